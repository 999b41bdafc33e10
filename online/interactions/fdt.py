"""The FDT of MCTS-IS (Definitions 1-2), stored as two tables (two structured arrays each).

A *data node* n^d holds the estimators V, B (so p_hat and mu_hat) and the screening statistic
s of sec. 3; a *feature node* n_i^f holds V (times selected) and sigma_hat (eq. 9). Every node
is a row of numpy structured arrays (its hot columns in one, 32-byte rows aligned on cache
lines; the rest in another), never a Python object, so that a forest of millions of nodes
stays four arrays, the compiled search (``search``) walks them, and numpy code (extraction,
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

# name -> (dtype, value of a new row, hot). Sec. 3, Expansion: a new feature node has
# sigma_hat = 0 (and V = 0: never selected); a new data node has V = 1, B = 0 and s = 1.
# "hot" columns are what the search (``search``) reads for every node it walks: they form one
# structured array of 32-byte rows (two to a cache line, never straddling one); the others
# (paths, depths, p_hat's denominator) a second one.
DATA_COLUMNS = {
    "V": (np.float64, 1.0, True),
    "B": (np.float64, 0.0, True),
    "s": (np.float64, 1.0, True),
    "parent": (np.int32, -1, False),  # parent feature node (-1 for a tree's root n_r)
    "cat": (np.int32, -1, False),  # category code j of n_{i,j}^d
    "depth": (np.int32, 0, False),  # number of feature nodes on the path; -1 marks a dead row
    "fstart": (np.int32, -1, True),  # first child feature node, -1 while not expanded
    "fcount": (np.int32, 0, True),
    "tree": (np.int32, -1, False),
}
FEATURE_COLUMNS = {
    "V": (np.float64, 0.0, True),
    "sigma": (np.float64, 0.0, True),
    "field": (np.int32, -1, True),
    "parent": (np.int32, -1, False),  # parent data node
    "cstart": (np.int32, -1, True),
    "ccount": (np.int32, 0, True),
    "sumV": (np.float64, 0.0, False),  # sum of the children's V: denominator of p_hat (sec. 3.2)
    # children with s > lambda; 0 means excluded from l(pa) (Thm. 4)
    "nabove": (np.int32, 0, True),
}


def _empty(n: int, dtype: np.dtype) -> np.ndarray:
    """``np.empty(n, dtype)`` starting on a 64-byte boundary (a cache line; numpy's large
    arrays start 16 bytes past a page), so that rows of 32 bytes never straddle two lines."""
    size = n * dtype.itemsize
    buf = np.empty(size + 64, dtype=np.uint8)
    start = -buf.ctypes.data % 64
    return buf[start : start + size].view(dtype)


class Table:
    """Columns of equal length that grow by doubling; ``n`` rows are in use.

    The columns are the fields of two structured arrays, the hot columns and the others (a
    node's hot values sit together in memory: the search touches V, B, s and the child block of
    a data node, or V, sigma_hat and the child block of a feature node, at once, and a grown FDT
    is far larger than the caches); ``table.V`` is a view.
    """

    def __init__(self, columns: dict, capacity: int = 64):
        self._columns = columns
        self._dtypes = tuple(
            np.dtype(
                [(name, dtype) for name, (dtype, _, h) in columns.items() if h == hot],
                align=True,
            )
            for hot in (True, False)
        )
        self.n = 0
        self._set_rows(tuple(_empty(capacity, dt) for dt in self._dtypes))

    def _set_rows(self, rows: tuple) -> None:
        self.rows = rows
        for part in rows:
            for name in part.dtype.names:
                setattr(self, name, part[name])

    def __deepcopy__(self, memo) -> Table:
        # a deep copy of each view would be an array of its own, cut off from ``rows``
        table = Table.__new__(Table)
        table._columns, table._dtypes, table.n = self._columns, self._dtypes, self.n
        rows = tuple(_empty(len(part), part.dtype) for part in self.rows)
        for new, old in zip(rows, self.rows):
            new[:] = old
        table._set_rows(rows)
        return table

    @property
    def capacity(self) -> int:
        return len(self.rows[0])

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
            rows = tuple(_empty(new_capacity, dt) for dt in self._dtypes)
            for new, old in zip(rows, self.rows):
                new[: self.n] = old[: self.n]
            self._set_rows(rows)

    def add(self, count: int) -> int:
        """Append ``count`` rows with their initial values; return the first row index."""
        start = self.n
        self.reserve(count)
        for name, (_, value, _) in self._columns.items():
            getattr(self, name)[start : start + count] = value
        self.n = start + count
        return start

    @property
    def nbytes(self) -> int:
        return sum(part.nbytes for part in self.rows)

    def to_state(self) -> dict:
        return {name: getattr(self, name)[: self.n].copy() for name in self._columns}

    @classmethod
    def from_state(cls, columns: dict, state: dict) -> Table:
        n = len(state[next(iter(columns))])
        table = cls(columns, capacity=max(n, 64))
        for name, (dtype, _, _) in columns.items():
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
