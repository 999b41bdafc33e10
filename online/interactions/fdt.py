"""The FDT of MCTS-IS (Definitions 1-2), stored as two tables (one structured array each).

A *data node* n^d holds the estimators V, B (so p_hat and mu_hat) and the screening statistic
s of sec. 3; a *feature node* n_i^f holds V (times selected) and sigma_hat (eq. 9). Every node
is a row of a numpy structured array, never a Python object, so that a forest of millions of
nodes stays two arrays, the compiled search (``search``) walks them, and numpy code (extraction,
routing) reads their columns as views.

Layout:
- the child feature nodes of an expanded data node are one contiguous block
  ``[fstart, fstart + fcount)`` (one per field not yet on the path, Def. 2);
- the child data nodes of a feature node of field i are one contiguous block
  ``[cstart, cstart + ccount)`` indexed by category code: child(n_i^f, j) = cstart + j.
  When field i gains a category after the block was made, the block is moved to the end of the
  table with the new children appended (``search``: growths); the old rows are left dead
  (depth -1).
"""

from __future__ import annotations

import numpy as np

# name -> (dtype, value of a new row). Sec. 3, Expansion: a new feature node has sigma_hat = 0
# (and V = 0: never selected); a new data node has V = 1, B = 0 and s = 1.
DATA_COLUMNS = {
    "V": (np.float64, 1.0),
    "B": (np.float64, 0.0),
    "s": (np.float64, 1.0),
    "parent": (np.int32, -1),  # parent feature node (-1 for a tree's root n_r)
    "cat": (np.int32, -1),  # category code j of n_{i,j}^d
    "depth": (np.int32, 0),  # number of feature nodes on the path; -1 marks a dead row
    "fstart": (np.int32, -1),  # first child feature node, -1 while not expanded
    "fcount": (np.int32, 0),
    "tree": (np.int32, -1),
}
FEATURE_COLUMNS = {
    "V": (np.float64, 0.0),
    "sigma": (np.float64, 0.0),
    "field": (np.int32, -1),
    "parent": (np.int32, -1),  # parent data node
    "cstart": (np.int32, -1),
    "ccount": (np.int32, 0),
    "sumV": (
        np.float64,
        0.0,
    ),  # sum of the children's V: denominator of p_hat (sec. 3.2)
    "nabove": (
        np.int32,
        0,
    ),  # children with s > lambda; 0 means excluded from l(pa) (Thm. 4)
}


class Table:
    """Columns of equal length that grow by doubling; ``n`` rows are in use.

    The columns are the fields of one structured array (a node's values sit together in
    memory: the search touches V, B and s of a node, or V, sigma_hat and the block of a feature
    node, at once, and a grown FDT is far larger than the caches); ``table.V`` is a view.
    """

    def __init__(self, columns: dict, capacity: int = 64):
        self._columns = columns
        self._dtype = np.dtype(
            [(name, dtype) for name, (dtype, _) in columns.items()], align=True
        )
        self.n = 0
        self._set_rows(np.empty(capacity, dtype=self._dtype))

    def _set_rows(self, rows: np.ndarray) -> None:
        self.rows = rows
        for name in self._columns:
            setattr(self, name, rows[name])

    def __deepcopy__(self, memo) -> Table:
        # a deep copy of each view would be an array of its own, cut off from ``rows``
        table = Table.__new__(Table)
        table._columns, table._dtype, table.n = self._columns, self._dtype, self.n
        table._set_rows(self.rows.copy())
        return table

    @property
    def capacity(self) -> int:
        return len(self.rows)

    def reserve(self, extra: int, limit: int | None = None) -> None:
        """Room for ``extra`` more rows: capacity doubles, but not past ``limit`` (the rows the
        table is expected to hold at most) unless more is needed, then by eighths."""
        end = self.n + extra
        if end > self.capacity:
            if limit is None:
                new_capacity = max(end, 2 * self.capacity)
            elif end <= limit:
                new_capacity = max(end, min(2 * self.capacity, limit))
            else:
                new_capacity = max(end, self.capacity + self.capacity // 8)
            rows = np.empty(new_capacity, dtype=self._dtype)
            rows[: self.n] = self.rows[: self.n]
            self._set_rows(rows)

    def add(self, count: int) -> int:
        """Append ``count`` rows with their initial values; return the first row index."""
        start = self.n
        self.reserve(count)
        for name, (_, value) in self._columns.items():
            getattr(self, name)[start : start + count] = value
        self.n = start + count
        return start

    @property
    def nbytes(self) -> int:
        return self.rows.nbytes

    def to_state(self) -> dict:
        return {name: getattr(self, name)[: self.n].copy() for name in self._columns}

    @classmethod
    def from_state(cls, columns: dict, state: dict) -> Table:
        n = len(state[next(iter(columns))])
        table = cls(columns, capacity=max(n, 64))
        for name, (dtype, _) in columns.items():
            getattr(table, name)[:n] = np.asarray(state[name], dtype=dtype)
        table.n = n
        return table


class FDT:
    """A forest of FDTs: tree t is the t-th FDT learning problem, restricted to root field t."""

    def __init__(self):
        self.d = Table(DATA_COLUMNS)
        self.f = Table(FEATURE_COLUMNS)
        self.roots = np.empty(0, dtype=np.int64)
        self.root_fields = np.empty(0, dtype=np.int64)

    # -- construction --------------------------------------------------------------------------

    def add_tree(self, field: int, n_categories: np.ndarray) -> int:
        """Root n_r of a new FDT whose only child feature node is ``field`` (Appendix B.3)."""
        tree = len(self.roots)
        root = self.d.add(1)
        self.d.depth[root] = 0
        self.d.tree[root] = tree
        self.roots = np.append(self.roots, root)
        self.root_fields = np.append(self.root_fields, field)
        self.expand(root, [field], n_categories)
        return tree

    def expand(self, node: int, fields, n_categories: np.ndarray) -> None:
        """Sec. 3 Expansion (line 13): add one feature node per field in ``fields`` below data
        node ``node``, each with its K_i child data nodes."""
        fields = np.asarray(fields, dtype=np.int64)
        m = len(fields)
        if m == 0:
            return
        f0 = self.f.add(m)
        fids = np.arange(f0, f0 + m)
        self.f.field[fids] = fields
        self.f.parent[fids] = node
        self.d.fstart[node] = f0
        self.d.fcount[node] = m
        sizes = n_categories[fields].astype(np.int64)
        total = int(sizes.sum())
        d0 = self.d.add(total)
        starts = d0 + np.cumsum(sizes) - sizes
        self.f.cstart[fids] = starts
        self.f.ccount[fids] = sizes
        self.f.sumV[fids] = sizes  # each new child starts with V = 1
        self.f.nabove[fids] = sizes  # ... and s = 1 > lambda
        rows = np.arange(d0, d0 + total)
        owner = np.repeat(fids, sizes)
        self.d.parent[rows] = owner
        self.d.cat[rows] = rows - np.repeat(starts, sizes)
        self.d.depth[rows] = self.d.depth[node] + 1
        self.d.tree[rows] = self.d.tree[node]

    # -- queries -------------------------------------------------------------------------------

    def path_fields(self, node: int) -> list[int]:
        """Fields of the feature nodes from n_r down to data node ``node`` (root first)."""
        fields = []
        while self.d.parent[node] >= 0:
            f = int(self.d.parent[node])
            fields.append(int(self.f.field[f]))
            node = int(self.f.parent[f])
        return fields[::-1]

    def path_terms(self, node: int) -> list[tuple[int, int]]:
        """(field, category code) pairs from n_r down to ``node``: the node's conjunction."""
        terms = []
        while self.d.parent[node] >= 0:
            f = int(self.d.parent[node])
            terms.append((int(self.f.field[f]), int(self.d.cat[node])))
            node = int(self.f.parent[f])
        return terms[::-1]

    def p_hat(self, nodes: np.ndarray) -> np.ndarray:
        """p_hat_{n_{i,j}^d} = V_{n_{i,j}^d} / sum_j' V_{n_{i,j'}^d} (sec. 3.2); 1 for roots."""
        parent = self.d.parent[nodes]
        out = np.ones(len(nodes))
        has = parent >= 0
        out[has] = self.d.V[nodes[has]] / self.f.sumV[parent[has]]
        return out

    def mu_hat(self, nodes: np.ndarray) -> np.ndarray:
        """mu_hat_{n^d} = B_{n^d} / V_{n^d} (sec. 3.2)."""
        return self.d.B[nodes] / self.d.V[nodes]

    def support(self, node: int) -> float:
        """Eq. (6) with estimators: P((x, y) in S_{n^d}) = prod of p_hat on the path below n_r."""
        p = 1.0
        while self.d.parent[node] >= 0:
            f = int(self.d.parent[node])
            p *= float(self.d.V[node] / self.f.sumV[f])
            node = int(self.f.parent[f])
        return p

    @property
    def n_live_data_nodes(self) -> int:
        return int(np.count_nonzero(self.d.depth[: self.d.n] >= 0))

    @property
    def nbytes(self) -> int:
        return (
            self.d.nbytes + self.f.nbytes + self.roots.nbytes + self.root_fields.nbytes
        )

    # -- state ---------------------------------------------------------------------------------

    def to_state(self) -> dict:
        return {
            "data_nodes": self.d.to_state(),
            "feature_nodes": self.f.to_state(),
            "roots": self.roots.copy(),
            "root_fields": self.root_fields.copy(),
        }

    @classmethod
    def from_state(cls, state: dict) -> FDT:
        fdt = cls()
        fdt.d = Table.from_state(DATA_COLUMNS, state["data_nodes"])
        fdt.f = Table.from_state(FEATURE_COLUMNS, state["feature_nodes"])
        fdt.roots = np.asarray(state["roots"], dtype=np.int64).copy()
        fdt.root_fields = np.asarray(state["root_fields"], dtype=np.int64).copy()
        return fdt
