"""Tree edit distance between decision trees (Definition 3.2 of MEPSI), vectorized with numpy.

TED(h, g) is the minimum total cost of node operations turning the internal-node tree ``h``
into ``g``: INSERT a node, REMOVE a node (its children move up to its parent) and UPDATE the
feature a node tests. With the default unit costs (Definition 3.2 counts operations) it is the
number of operations; UPDATE to the same feature costs nothing.

The algorithm is Zhang & Shasha (1989): for every pair of key roots ``(i, j)`` it fills a
forest-distance table ``fd`` over the postorder ranges ``l(i)..i`` and ``l(j)..j``; cells where
both nodes lie on their key root's leftmost path give tree distances ``td[x, y]`` that later
tables read. Here all tables of many tree pairs are laid side by side in one matrix
(rows: every key-root block of every tree ``h``; columns: every block of every ``g``) and filled
along anti-diagonals of (local row + local column): every cell depends only on cells of a
smaller anti-diagonal, so one anti-diagonal is one batch of numpy operations. The work per pair
is the Zhang-Shasha bound, O(sum of key-root subtree sizes of h x the same for g); the Python
overhead is one loop step per anti-diagonal for a whole batch of pairs.

Two backends compute the same numbers (``backend=``): ``"numba"``, the textbook double loop
compiled by numba (:mod:`online.pruning.ted_compiled`, about 1 ms per pair of 140-node trees,
30x faster than the numpy fill on large trees), used by ``"auto"`` when numba is installed;
``"numpy"``, the batched anti-diagonal fill described above (no compiled dependency).

Why not a library: ``zss`` and ``apted`` on PyPI are pure Python (one interpreted step per
table cell, about 1 s for one pair of 150-node trees); ``edist`` is compiled (Cython) but
numba was the one compiled dependency the project accepted. The test suite checks both
backends against a brute-force recursion on small trees and against each other.

Choices where the paper is silent or ambiguous
----------------------------------------------
- Ordered trees (children keep their left-to-right order), as in Zhang-Shasha and APTED.
- Costs are per operation and uniform (``insert``, ``remove``, ``update``, default 1 each);
  an UPDATE between nodes testing the same feature costs 0.
- TED of an empty tree (a single leaf, no internal node) to ``g`` is ``insert * NC(g)``.

Examples
--------
from online.pruning.trees import Tree
>>> h = Tree.from_children([0, 1, 2], [[1, 2], [], []])   # root 0 with children 1, 2
>>> g = Tree.from_children([0, 1], [[1], []])             # root 0 with child 1
>>> ted(h, g)          # REMOVE the node testing 2
1.0
>>> ted(h, Tree.from_children([5, 1, 2], [[1, 2], [], []]))   # UPDATE the root
1.0
>>> ted_matrix([h, g]).tolist()
[[0.0, 1.0], [1.0, 0.0]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from online.pruning import ted_compiled
from online.pruning.trees import Tree

__all__ = ["BACKENDS", "postorder_sed_matrix", "ted", "ted_cross", "ted_matrix", "ted_pairs"]

#: "numba": the compiled pair-by-pair kernel (:mod:`online.pruning.ted_compiled`), used by
#: "auto" when numba imports; "numpy": the batched anti-diagonal fill of this module.
BACKENDS = ("auto", "numba", "numpy")

#: cells (rows x columns) filled in one batch; bounds memory to roughly 60 bytes per cell
DEFAULT_MAX_CELLS = 2_000_000


def _use_numba(backend: str) -> bool:
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}")
    if backend == "numba" and not ted_compiled.AVAILABLE:
        raise ImportError("backend='numba' needs the numba package")
    return backend == "numba" or (backend == "auto" and ted_compiled.AVAILABLE)


def operation_costs(insert, remove, update) -> dict:
    """The three operation costs as floats; Definition 3.2's costs are finite and >= 0."""
    costs = {"insert": float(insert), "remove": float(remove), "update": float(update)}
    for name, cost in costs.items():
        if not (math.isfinite(cost) and cost >= 0):
            raise ValueError(f"the {name} cost must be a finite number >= 0, got {cost!r}")
    return costs


def ted(
    h: Tree,
    g: Tree,
    *,
    insert: float = 1.0,
    remove: float = 1.0,
    update: float = 1.0,
    backend: str = "auto",
) -> float:
    """TED(h, g): cost of turning ``h`` into ``g`` (Definition 3.2)."""
    costs = operation_costs(insert, remove, update)
    insert, remove, update = costs.values()
    return float(ted_cross([h], [g], backend=backend, **costs)[0, 0])


def ted_pairs(
    trees: Sequence[Tree],
    I,
    J,
    *,
    insert: float = 1.0,
    remove: float = 1.0,
    update: float = 1.0,
    backend: str = "auto",
    n_jobs=1,
) -> np.ndarray:
    """``TED(trees[I[p]], trees[J[p]])`` for a list of pairs (what MEPSI asks for on demand).

    ``n_jobs``: threads of the compiled backend (scikit-learn's convention; same distances).
    """
    trees = list(trees)
    I, J = np.asarray(I, dtype=np.int64), np.asarray(J, dtype=np.int64)
    costs = operation_costs(insert, remove, update)
    insert, remove, update = costs.values()
    if _use_numba(backend):
        return ted_compiled.pairs(trees, I, J, n_jobs=n_jobs, **costs)
    out = np.zeros(len(I))
    for i in np.unique(I):  # one batched row per distinct first tree
        at = np.flatnonzero(I == i)
        out[at] = ted_cross([trees[i]], [trees[j] for j in J[at]], backend="numpy", **costs)[0]
    return out


def ted_matrix(
    trees: Sequence[Tree],
    *,
    insert: float = 1.0,
    remove: float = 1.0,
    update: float = 1.0,
    max_cells: int = DEFAULT_MAX_CELLS,
    progress=None,
    backend: str = "auto",
    n_jobs=1,
) -> np.ndarray:
    """All pairwise distances ``D[i, j] = TED(trees[i], trees[j])``.

    With ``insert == remove`` TED is symmetric and only pairs above the diagonal are
    computed. ``progress`` (optional) is called with the number of tree pairs finished.
    ``n_jobs``: threads of the compiled backend (scikit-learn's convention; same distances).
    """
    insert, remove, update = operation_costs(insert, remove, update).values()
    trees = list(trees)
    symmetric = insert == remove
    if _use_numba(backend):
        T = len(trees)
        I, J = np.triu_indices(T, 1) if symmetric else np.nonzero(~np.eye(T, dtype=bool))
        D = np.zeros((T, T))
        flat = (ted_compiled.flatten(trees), ted_compiled.flatten(trees, mirror=True))
        step = 2000
        for s in range(0, len(I), step):
            sl = slice(s, s + step)
            D[I[sl], J[sl]] = ted_compiled.pairs(
                trees,
                I[sl],
                J[sl],
                insert=insert,
                remove=remove,
                update=update,
                flat=flat,
                n_jobs=n_jobs,
            )
            if progress is not None:
                progress(min(s + step, len(I)))
        return D + D.T if symmetric else D
    return _cross(trees, trees, insert, remove, update, max_cells, symmetric, progress)


def ted_cross(
    hs: Sequence[Tree],
    gs: Sequence[Tree],
    *,
    insert: float = 1.0,
    remove: float = 1.0,
    update: float = 1.0,
    max_cells: int = DEFAULT_MAX_CELLS,
    backend: str = "auto",
    n_jobs=1,
) -> np.ndarray:
    """``D[p, q] = TED(hs[p], gs[q])`` for every pair, computed in batches."""
    insert, remove, update = operation_costs(insert, remove, update).values()
    hs, gs = list(hs), list(gs)
    if _use_numba(backend):
        I, J = np.divmod(np.arange(len(hs) * len(gs)), max(len(gs), 1))
        d = ted_compiled.pairs(
            hs + gs,
            I,
            J + len(hs),
            insert=insert,
            remove=remove,
            update=update,
            n_jobs=n_jobs,
        )
        return d.reshape(len(hs), len(gs))
    return _cross(hs, gs, insert, remove, update, max_cells, False, None)


def postorder_sed_matrix(
    trees: Sequence[Tree],
    *,
    insert: float = 1.0,
    remove: float = 1.0,
    update: float = 1.0,
    backend: str = "auto",
    n_jobs=1,
) -> np.ndarray:
    """String edit distance between the postorder feature sequences: a lower bound of TED.

    A tree edit mapping keeps postorder order, so it is also an alignment of the two postorder
    sequences with the same operations and costs: ``SED(post(h), post(g)) <= TED(h, g)``
    (Guha et al. 2002). It costs O(NC(h) NC(g)) per pair instead of Zhang-Shasha's
    O(sum of key-root subtree sizes squared), so MEPSI uses it to skip TEDs that cannot matter.
    The compiled backend (:func:`online.pruning.ted_compiled.sed_pairs`, ``n_jobs`` threads)
    is 3.6x faster than the numpy rows below on 277-node trees.

    >>> from online.pruning.trees import Tree
    >>> h = Tree.from_children([0, 1, 2], [[1, 2], [], []])
    >>> postorder_sed_matrix([h, Tree.from_children([0, 1, 2], [[1], [2], []])]).tolist()
    [[0.0, 2.0], [2.0, 0.0]]
    """
    trees = list(trees)
    T = len(trees)
    costs = operation_costs(insert, remove, update)
    insert, remove, update = costs.values()
    if _use_numba(backend):
        I, J = np.triu_indices(T, 1) if insert == remove else np.nonzero(~np.eye(T, dtype=bool))
        out = np.zeros((T, T))
        out[I, J] = ted_compiled.sed_pairs(trees, I, J, n_jobs=n_jobs, **costs)
        return out + out.T if insert == remove else out
    seqs = [t.postorder_features() for t in trees]
    n = np.array([len(q) for q in seqs])
    L = int(n.max()) if T else 0
    S = np.full((T, L), -1, dtype=np.int64)
    for t, q in enumerate(seqs):
        S[t, : len(q)] = q
    cols = np.arange(L + 1) * insert
    out = np.zeros((T, T))
    for i in range(T):
        rest = np.arange(T) if remove != insert else np.arange(i + 1, T)
        if len(rest) == 0:
            continue
        D = np.broadcast_to(cols, (len(rest), L + 1)).copy()
        for r, label in enumerate(seqs[i], start=1):
            A = np.empty_like(D)
            A[:, 0] = r * remove
            np.minimum(
                D[:, 1:] + remove, D[:, :-1] + update * (S[rest] != label), out=A[:, 1:]
            )
            D = (
                np.minimum.accumulate(A - cols, axis=1) + cols
            )  # the insertion chain along the row
        out[i, rest] = D[np.arange(len(rest)), n[rest]]
    if remove == insert:
        out = out + out.T
    return out


# ---------------------------------------------------------------------------------------------
# per-tree key-root blocks


def _blocks(tree: Tree) -> dict:
    """Zhang-Shasha rows of one tree: one block of rows per key root, row r = forest
    l(i)..l(i)+r-1."""
    cache = tree._post
    if "blocks" in cache:
        return cache["blocks"]
    feats, lml = tree._postorder()
    n = len(feats)
    # key roots: the highest node for each leftmost leaf (Zhang & Shasha 1989, LR_keyroots)
    last = np.full(n, -1)
    last[lml] = np.arange(n)  # later (higher) nodes overwrite earlier ones
    keyroots = np.sort(last[last >= 0])
    sizes = keyroots - lml[keyroots] + 1
    lengths = sizes + 1  # row 0 is the empty forest
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    start_rep = np.repeat(starts, lengths)
    base = np.repeat(lml[keyroots], lengths)
    local = np.arange(int(lengths.sum())) - start_rep
    node = base + local - 1
    real = local > 0
    node_safe = np.where(real, node, 0)
    on_left = real & (lml[node_safe] == base)
    # row index of the forest l(i)..l(x)-1 inside the same block
    # (fd[l(x)-1] in the paper's indexing)
    sub_row = start_rep + lml[node_safe] - base
    out = {
        "n": n,
        "feat": feats,
        "local": local.astype(np.int64),
        "node": node_safe.astype(np.int64),
        "on_left": on_left,
        "sub": np.where(real, sub_row, 0).astype(np.int64),
    }
    cache["blocks"] = out
    return out


def _stack(blocks: list[dict]):
    """Concatenate blocks of several trees; node ids are shifted into one numbering."""
    row_off = node_off = 0
    parts = {k: [] for k in ("local", "node", "on_left", "sub", "feat")}
    roots = []
    for b in blocks:
        parts["local"].append(b["local"])
        parts["node"].append(b["node"] + node_off)
        parts["on_left"].append(b["on_left"])
        parts["sub"].append(b["sub"] + row_off)
        parts["feat"].append(b["feat"])
        row_off += len(b["local"])
        node_off += b["n"]
        roots.append(node_off - 1)
    out = {k: np.concatenate(v) for k, v in parts.items()}
    out["roots"] = np.array(roots, dtype=np.int64)
    out["n"] = node_off
    return out


def _fill(
    rows: dict, cols: dict, insert: float, remove: float, update: float
) -> np.ndarray:
    """Fill all forest-distance tables of the row trees x column trees; return root-to-root TEDs."""
    R, C = len(rows["local"]), len(cols["local"])
    N1, N2 = rows["n"], cols["n"]
    r_loc, c_loc = rows["local"], cols["local"]
    # integer costs (the unit costs of Definition 3.2) run on int32: less memory traffic
    integer = all(float(c).is_integer() for c in (insert, remove, update))
    vtype = (
        np.int32
        if integer and (R * remove + C * insert + 1) * 4 < 2**30
        else np.float64
    )
    itype = np.int32 if R * C + 1 < 2**31 and N1 * N2 + 1 < 2**31 else np.int64
    # base cells: empty forest on one side costs the removals / insertions of the other side
    fd = (r_loc[:, None] * remove + c_loc[None, :] * insert).astype(vtype).ravel()
    td = np.full(N1 * N2 + 1, 2**30 if vtype is np.int32 else np.inf, dtype=vtype)
    td[-1] = 0  # sentinel read by cells whose third term is an UPDATE instead
    insert, remove, update = vtype(insert), vtype(remove), vtype(update)
    diag = r_loc[:, None] + c_loc[None, :]
    diag[(r_loc == 0)[:, None] | (c_loc == 0)[None, :]] = 0
    max_d = int(diag.max()) if diag.size else 0
    both_rc = rows["on_left"][:, None] & cols["on_left"][None, :]
    # sort cells by anti-diagonal; inside one, cells with both nodes on leftmost paths first
    key = (2 * diag + ~both_rc).ravel()
    key = key.astype(np.int16 if 2 * max_d + 2 < np.iinfo(np.int16).max else np.int32)
    order = np.argsort(key, kind="stable")
    counts = np.bincount(key, minlength=2 * max_d + 2)
    idx = order[counts[:4].sum() :].astype(
        itype
    )  # anti-diagonals 0 and 1 are base cells
    counts = counts[4:].reshape(-1, 2)  # (anti-diagonal d >= 2, [both, other])
    a, b = np.divmod(idx, itype(C))
    x, y = rows["node"][a].astype(itype), cols["node"][b].astype(itype)
    both = rows["on_left"][a] & cols["on_left"][b]
    # third term: fd[x-1][y-1] + UPDATE(x, y) if both on leftmost paths (td index = sentinel),
    # else fd[l(x)-1][l(y)-1] + td[x][y]
    write_td = x * itype(N2) + y
    td_idx = np.where(both, itype(N1 * N2), write_td)
    third_src = np.where(
        both, idx - itype(C + 1), (rows["sub"][a] * C + cols["sub"][b]).astype(itype)
    )
    third_add = np.where(both & (rows["feat"][x] != cols["feat"][y]), update, vtype(0))
    left_src, up_src = idx - itype(1), idx - itype(C)
    del a, b, x, y, both
    lo = 0
    for n_both, n_other in counts:
        hi = lo + int(n_both) + int(n_other)
        if hi == lo:
            continue
        s = slice(lo, hi)
        v = fd[third_src[s]] + td[td_idx[s]] + third_add[s]
        np.minimum(v, fd[up_src[s]] + remove, out=v)
        np.minimum(v, fd[left_src[s]] + insert, out=v)
        fd[idx[s]] = v
        mid = lo + int(n_both)
        td[write_td[lo:mid]] = v[: int(n_both)]
        lo = hi
    return (
        td[:-1].reshape(N1, N2)[np.ix_(rows["roots"], cols["roots"])].astype(np.float64)
    )


def _cross(
    hs, gs, insert, remove, update, max_cells, symmetric, progress
) -> np.ndarray:
    out = np.zeros((len(hs), len(gs)))
    nh = np.array([t.n_nodes for t in hs])
    ng = np.array([t.n_nodes for t in gs])
    out[nh == 0, :] = ng[None, :] * insert
    out[:, ng == 0] = nh[:, None] * remove
    out[np.ix_(nh == 0, ng == 0)] = 0.0
    hi_idx = [i for i in range(len(hs)) if nh[i]]
    gi_idx = [j for j in range(len(gs)) if ng[j]]
    if not hi_idx or not gi_idx:
        return out
    hb = {i: _blocks(hs[i]) for i in hi_idx}
    gb = hb if hs is gs else {j: _blocks(gs[j]) for j in gi_idx}
    h_rows = np.array([len(hb[i]["local"]) for i in hi_idx])
    g_cols = np.array([len(gb[j]["local"]) for j in gi_idx])
    # row chunks of about sqrt(max_cells) rows, then column chunks filling the cell budget
    side = max(int(np.sqrt(max_cells)), int(h_rows.max()))
    row_chunks = _chunks(h_rows, side)
    done = 0
    for rc in row_chunks:
        r_ids = [hi_idx[k] for k in rc]
        rows = _stack([hb[i] for i in r_ids])
        budget = max(max_cells // len(rows["local"]), int(g_cols.max()))
        g_pos = range(len(gi_idx))
        if symmetric:
            g_pos = [k for k in g_pos if gi_idx[k] >= r_ids[0]]
        for cc in _chunks(g_cols[list(g_pos)], budget):
            c_ids = [gi_idx[list(g_pos)[k]] for k in cc]
            cols = _stack([gb[j] for j in c_ids])
            out[np.ix_(r_ids, c_ids)] = _fill(rows, cols, insert, remove, update)
            done += len(r_ids) * len(c_ids)
            if progress is not None:
                progress(done)
    if symmetric:
        upper = np.triu(out, 1)
        out = np.where(np.triu(np.ones_like(out, dtype=bool), 1), upper, upper.T)
        np.fill_diagonal(out, 0.0)
    return out


def _chunks(sizes: np.ndarray, budget: int) -> list[list[int]]:
    chunks, cur, total = [], [], 0
    for k, s in enumerate(sizes):
        if cur and total + s > budget:
            chunks.append(cur)
            cur, total = [], 0
        cur.append(k)
        total += int(s)
    if cur:
        chunks.append(cur)
    return chunks
