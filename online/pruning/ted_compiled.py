"""Zhang-Shasha tree edit distance compiled with numba: one pair at a time, many pairs per call.

The same algorithm as :mod:`online.pruning.ted` (Zhang & Shasha 1989; Definition 3.2 of MEPSI:
INSERT, REMOVE, UPDATE of the tested feature), written as the textbook double loop over key
roots and forest-distance tables, which numba compiles to machine code. Each tree is flattened
once (postorder features, leftmost leaves, key roots: cached on the :class:`Tree`), the trees
of a call are concatenated into a few arrays, and one compiled call computes a whole list of
pairs ``(I[p], J[p])``, reusing two work tables. An unpruned 144-node digits tree pair takes
about 1 ms here instead of 20-130 ms with the numpy anti-diagonal version.

numba is optional: :data:`AVAILABLE` says whether it imported. Without it
:func:`online.pruning.ted.ted_pairs` uses the numpy version. ``_zs_pairs.py_func`` (numba's
handle on the uncompiled Python function) is the pure reference the tests hold the compiled
kernel against.

Choices where the paper is silent or ambiguous: as in :mod:`online.pruning.ted` (ordered
trees, per-operation costs, an UPDATE to the same feature costs 0, an empty tree's distance is
the cost of inserting or removing every node).
"""

from __future__ import annotations

import numpy as np

from online.pruning.trees import postorder

try:  # optional compiled backend
    import numba

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    numba = None
    AVAILABLE = False

__all__ = ["AVAILABLE", "flatten", "pairs"]


def _zs_pairs(
    feat, lml, node_off, kr, kr_off, I, J, ins, rem, upd, out
):  # pragma: no cover - compiled
    """TED(tree I[p], tree J[p]) for every p, into ``out[p]`` (Zhang & Shasha 1989)."""
    n_max = 0
    for t in range(len(node_off) - 1):
        n_max = max(n_max, node_off[t + 1] - node_off[t])
    td = np.zeros((n_max, n_max))
    fd = np.zeros((n_max + 1, n_max + 1))
    for p in range(len(I)):
        a, b = I[p], J[p]
        oa, ob = node_off[a], node_off[b]
        n1, n2 = node_off[a + 1] - oa, node_off[b + 1] - ob
        if n1 == 0 or n2 == 0:
            out[p] = n1 * rem + n2 * ins
            continue
        for ki in range(kr_off[a], kr_off[a + 1]):
            i = kr[ki]
            li = lml[oa + i]
            for kj in range(kr_off[b], kr_off[b + 1]):
                j = kr[kj]
                lj = lml[ob + j]
                # forest distance of l(i)..x against l(j)..y; row/column 0 = empty forest
                fd[0, 0] = 0.0
                for x in range(1, i - li + 2):
                    fd[x, 0] = fd[x - 1, 0] + rem
                for y in range(1, j - lj + 2):
                    fd[0, y] = fd[0, y - 1] + ins
                for x in range(1, i - li + 2):
                    xi = li + x - 1
                    lx = lml[oa + xi]
                    fx = feat[oa + xi]
                    for y in range(1, j - lj + 2):
                        yj = lj + y - 1
                        ly = lml[ob + yj]
                        v = fd[x - 1, y] + rem
                        w = fd[x, y - 1] + ins
                        v = min(v, w)
                        if lx == li and ly == lj:  # both trees whole: a tree distance
                            w = fd[x - 1, y - 1]
                            if fx != feat[ob + yj]:
                                w += upd
                            v = min(v, w)
                            fd[x, y] = v
                            td[xi, yj] = v
                        else:
                            w = fd[lx - li, ly - lj] + td[xi, yj]
                            v = min(v, w)
                            fd[x, y] = v
        out[p] = td[n1 - 1, n2 - 1]


if AVAILABLE:
    _zs_pairs = numba.njit(cache=False, nogil=True)(_zs_pairs)


def _postorder(tree, mirror: bool):
    """(postorder features, leftmost-leaf postorder index, key roots) of ``tree`` or its mirror."""
    key = "flat_mirror" if mirror else "flat"
    if key not in tree._post:
        if mirror:
            f, lml = postorder(tree.feature, [k[::-1] for k in tree.children()])
        else:
            f, lml = tree._postorder()
        last = np.full(len(f), -1)
        last[lml] = np.arange(len(f))  # the highest node for each leftmost leaf
        tree._post[key] = (f, lml, np.sort(last[last >= 0]))
    return tree._post[key]


def flatten(trees, mirror: bool = False) -> tuple[np.ndarray, ...]:
    """Concatenate the trees' postorder features, leftmost leaves and key roots.

    Returns ``(feat, lml, node_off, kr, kr_off)``: tree ``t``'s nodes are
    ``node_off[t]:node_off[t + 1]`` (local postorder indices in ``lml``), its key roots
    ``kr[kr_off[t]:kr_off[t + 1]]`` in increasing order (Zhang & Shasha's LR_keyroots).
    ``mirror=True`` flattens the mirrored trees (children in right-to-left order).
    """
    feats, lmls, krs = [], [], []
    for t in trees:
        f, lml, kr = _postorder(t, mirror)
        feats.append(f)
        lmls.append(lml)
        krs.append(kr)
    node_off = np.concatenate(([0], np.cumsum([len(f) for f in feats]))).astype(np.int64)
    kr_off = np.concatenate(([0], np.cumsum([len(k) for k in krs]))).astype(np.int64)
    cat = lambda parts: (
        np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
    )
    return cat(feats), cat(lmls), node_off, cat(krs), kr_off


def _cells(flat) -> np.ndarray:
    """Zhang-Shasha rows per tree: sum over key roots of (subtree size + 1)."""
    _, lml, node_off, kr, kr_off = flat
    tree_of = np.repeat(np.arange(len(kr_off) - 1), np.diff(kr_off))
    size = kr - lml[node_off[tree_of] + kr] + 2
    return np.bincount(tree_of, weights=size, minlength=len(kr_off) - 1)


def pairs(trees, I, J, *, insert=1.0, remove=1.0, update=1.0, flat=None) -> np.ndarray:
    """``TED(trees[I[p]], trees[J[p]])`` for every p with the compiled kernel.

    Mirroring both trees (children right to left) keeps the distance (an edit mapping of the
    trees is one of their mirrors), but changes Zhang-Shasha's key roots: each pair runs in the
    orientation whose tables are smaller (left paths vs right paths, the choice RTED makes per
    subproblem, made here once per pair). ``flat`` may pass ``(flatten(trees),
    flatten(trees, mirror=True))`` computed once for many calls.
    """
    I = np.ascontiguousarray(I, dtype=np.int64)
    J = np.ascontiguousarray(J, dtype=np.int64)
    out = np.zeros(len(I))
    if not len(I):
        return out
    if flat is None:
        flat = (flatten(trees), flatten(trees, mirror=True))
    left, right = flat
    cl, cr = _cells(left), _cells(right)
    use_right = cr[I] * cr[J] < cl[I] * cl[J]
    costs = (float(insert), float(remove), float(update))
    for f, sel in ((left, ~use_right), (right, use_right)):
        if sel.any():
            part = np.zeros(int(sel.sum()))
            _zs_pairs(*f, np.ascontiguousarray(I[sel]), np.ascontiguousarray(J[sel]), *costs, part)
            out[sel] = part
    return out
