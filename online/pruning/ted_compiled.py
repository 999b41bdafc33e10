"""Zhang-Shasha tree edit distance compiled with numba: one pair at a time, many pairs per call.

The same algorithm as :mod:`online.pruning.ted` (Zhang & Shasha 1989; Definition 3.2 of MEPSI:
INSERT, REMOVE, UPDATE of the tested feature), written as the textbook double loop over key
roots and forest-distance tables, which numba compiles to machine code. Each tree is flattened
once (postorder features, leftmost leaves, key roots: cached on the :class:`Tree`), the trees
of a call are concatenated into a few arrays, and one compiled call computes a whole list of
pairs ``(I[p], J[p])``, reusing two work tables (int32 for integer costs). An unpruned
144-node digits tree pair takes about 1 ms here instead of 20-130 ms with the numpy
anti-diagonal version; a 277-node splice pair about 4 ms. Several threads share a call
(``n_jobs``: the kernel releases the GIL), and :func:`sed_pairs` compiles the postorder
string edit distance, the lower bound MEPSI's bounded search uses.

numba is optional: :data:`AVAILABLE` says whether it imported. Without it
:func:`online.pruning.ted.ted_pairs` uses the numpy version. ``_zs_pairs.py_func`` (numba's
handle on the uncompiled Python function) is the pure reference the tests hold the compiled
kernel against.

Choices where the paper is silent or ambiguous: as in :mod:`online.pruning.ted` (ordered
trees, per-operation costs, an UPDATE to the same feature costs 0, an empty tree's distance is
the cost of inserting or removing every node).
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from online.pruning import sed_bits, ted_avx512
from online.pruning.trees import LastForest

try:  # optional compiled backend
    import numba

    AVAILABLE = True
except ImportError:  # pragma: no cover - exercised only where numba is missing
    numba = None
    AVAILABLE = False

__all__ = ["AVAILABLE", "flatten", "n_threads", "pairs", "sed_pairs"]

#: run :mod:`online.pruning.ted_avx512` (same distances, about 5x faster on large trees) when it
#: is usable: integer costs, AVX-512BW/VL; False forces this module's scalar kernel
USE_AVX512 = True
#: below this many Zhang-Shasha cells a call runs on one thread (threads cost more than they save)
PARALLEL_MIN_CELLS = 2e6
#: chunks per thread: pairs differ in cost, so threads take chunks as they finish (load balance)
CHUNKS_PER_THREAD = 32
#: CPU seconds spent in the compiled kernels since the last reset: ``"total"`` over all threads,
#: ``"critical"`` summed over calls of the busiest thread's share (what the kernels take of wall
#: time on an idle machine). Read by bench/mepsi/timing.py; costs two clock reads per chunk.
KERNEL_CPU = {"total": 0.0, "critical": 0.0}


def _zs_pairs(
    feat, lml, node_off, kr, kr_off, I, J, ins, rem, upd, out
):  # pragma: no cover - compiled
    """TED(tree I[p], tree J[p]) for every p, into ``out[p]`` (Zhang & Shasha 1989).

    The tables take ``out``'s dtype: int32 for integer costs (half the memory traffic of
    float64, 1.6x faster on 277-node trees), float64 otherwise.
    """
    n_max = 0
    for t in range(len(node_off) - 1):
        n_max = max(n_max, node_off[t + 1] - node_off[t])
    td = np.zeros((n_max, n_max), out.dtype)
    fd = np.zeros((n_max + 1, n_max + 1), out.dtype)
    ly = np.zeros(n_max + 1, np.int64)  # per column y of a table: l(y) - l(j)
    fy = np.zeros(n_max + 1, np.int64)  # and the feature node y tests
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
                m2 = j - lj + 1
                for y in range(1, m2 + 1):
                    ly[y] = lml[ob + lj + y - 1] - lj
                    fy[y] = feat[ob + lj + y - 1]
                # forest distance of l(i)..x against l(j)..y; row/column 0 = empty forest
                fd[0, 0] = 0
                for y in range(1, m2 + 1):
                    fd[0, y] = fd[0, y - 1] + ins
                for x in range(1, i - li + 2):
                    xi = li + x - 1
                    lx = lml[oa + xi] - li
                    fx = feat[oa + xi]
                    fd[x, 0] = fd[x - 1, 0] + rem
                    if lx == 0:  # x on the left path of i
                        for y in range(1, m2 + 1):
                            v = min(fd[x - 1, y] + rem, fd[x, y - 1] + ins)
                            if ly[y] == 0:  # both trees whole: a tree distance
                                w = fd[x - 1, y - 1]
                                if fx != fy[y]:
                                    w += upd
                                v = min(v, w)
                                td[xi, lj + y - 1] = v
                            else:
                                v = min(v, fd[0, ly[y]] + td[xi, lj + y - 1])
                            fd[x, y] = v
                    else:
                        for y in range(1, m2 + 1):
                            v = min(fd[x - 1, y] + rem, fd[x, y - 1] + ins)
                            fd[x, y] = min(v, fd[lx, ly[y]] + td[xi, lj + y - 1])
        out[p] = td[n1 - 1, n2 - 1]


if AVAILABLE:
    _zs_pairs = numba.njit(cache=False, nogil=True)(_zs_pairs)


def _sed_pairs(seq, off, I, J, ins, rem, upd, out):  # pragma: no cover - compiled
    """String edit distance of sequences I[p] and J[p] (rows of ``seq`` cut at ``off``)."""
    n_max = 0
    for t in range(len(off) - 1):
        n_max = max(n_max, off[t + 1] - off[t])
    row = np.zeros(n_max + 1)
    for p in range(len(I)):
        a, b = I[p], J[p]
        oa, ob = off[a], off[b]
        n1, n2 = off[a + 1] - oa, off[b + 1] - ob
        for y in range(n2 + 1):
            row[y] = y * ins
        for x in range(1, n1 + 1):
            diag = row[0]
            row[0] = x * rem
            fx = seq[oa + x - 1]
            for y in range(1, n2 + 1):
                v = row[y] + rem
                w = row[y - 1] + ins
                if w < v:
                    v = w
                w = diag + (upd if fx != seq[ob + y - 1] else 0.0)
                if w < v:
                    v = w
                diag = row[y]
                row[y] = v
        out[p] = row[n2]


if AVAILABLE:
    _sed_pairs = numba.njit(cache=False, nogil=True)(_sed_pairs)


def _postorder(tree, mirror: bool):
    """(postorder features, leftmost-leaf postorder index, key roots) of ``tree`` or its mirror."""
    key = "flat_mirror" if mirror else "flat"
    if key not in tree._post:
        f, lml = tree._postorder(mirror)
        last = np.full(len(f), -1)
        last[lml] = np.arange(len(f))  # the highest node for each leftmost leaf
        tree._post[key] = (f, lml, np.sort(last[last >= 0]))
    return tree._post[key]


_FLAT = LastForest()  # the last result per orientation (MEPSI asks many times)


def flatten(trees, mirror: bool = False) -> tuple[np.ndarray, ...]:
    """Concatenate the trees' postorder features, leftmost leaves and key roots.

    Returns ``(feat, lml, node_off, kr, kr_off)``: tree ``t``'s nodes are
    ``node_off[t]:node_off[t + 1]`` (local postorder indices in ``lml``), its key roots
    ``kr[kr_off[t]:kr_off[t + 1]]`` in increasing order (Zhang & Shasha's LR_keyroots).
    ``mirror=True`` flattens the mirrored trees (children in right-to-left order). The last
    result per orientation is kept for the next call on the same tree objects.
    """
    return _FLAT.get(trees, mirror, lambda ts: _flatten(ts, mirror))


def _flatten(trees, mirror: bool) -> tuple[np.ndarray, ...]:
    feats, lmls, krs = [], [], []
    for t in trees:
        f, lml, kr = _postorder(t, mirror)
        feats.append(f)
        lmls.append(lml)
        krs.append(kr)
    node_off = np.concatenate(([0], np.cumsum([len(f) for f in feats]))).astype(np.int64)
    kr_off = np.concatenate(([0], np.cumsum([len(k) for k in krs]))).astype(np.int64)
    def cat(parts):
        return (
            np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
        )
    return cat(feats), cat(lmls), node_off, cat(krs), kr_off


def _cells(flat) -> np.ndarray:
    """Zhang-Shasha rows per tree: sum over key roots of (subtree size + 1)."""
    _, lml, node_off, kr, kr_off = flat
    tree_of = np.repeat(np.arange(len(kr_off) - 1), np.diff(kr_off))
    size = kr - lml[node_off[tree_of] + kr] + 2
    return np.bincount(tree_of, weights=size, minlength=len(kr_off) - 1)


def n_threads(n_jobs) -> int:
    """Threads for ``n_jobs`` as scikit-learn reads it: None -> 1, -1 -> all cores, -2 -> all
    but one."""
    if n_jobs is None:
        return 1
    n_jobs = int(n_jobs)
    if n_jobs == 0:
        raise ValueError("n_jobs must not be 0")
    cores = os.cpu_count() or 1
    return max(1, n_jobs if n_jobs > 0 else cores + 1 + n_jobs)


def pairs(
    trees, I, J, *, insert=1.0, remove=1.0, update=1.0, flat=None, n_jobs=1
) -> np.ndarray:
    """``TED(trees[I[p]], trees[J[p]])`` for every p with the compiled kernel.

    Mirroring both trees (children right to left) keeps the distance (an edit mapping of the
    trees is one of their mirrors), but changes Zhang-Shasha's key roots: each pair runs in the
    orientation whose tables are smaller (left paths vs right paths, the choice RTED makes per
    subproblem, made here once per pair). ``flat`` may pass ``(flatten(trees),
    flatten(trees, mirror=True))`` computed once for many calls.

    ``n_jobs`` threads (scikit-learn's convention, see :func:`n_threads`) share the pairs: the
    kernel releases the GIL, each chunk of pairs gets its own work tables and writes only its own
    outputs, so the distances do not depend on ``n_jobs``.
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
    cost = np.where(use_right, cr[I] * cr[J], cl[I] * cl[J])
    costs, dtype = (float(insert), float(remove), float(update)), np.float64
    n = np.diff(left[2])
    if all(c.is_integer() for c in costs) and (
        n.max(initial=0) * max(map(abs, costs)) * 2 < 2**31 - 1
    ):  # integer costs: int32 tables (same distances, less memory traffic)
        costs, dtype = tuple(np.int32(c) for c in costs), np.int32
    vector = USE_AVX512 and ted_avx512.usable(int(n.max(initial=0)), *costs)
    jobs = []  # (flattened trees, positions in out)
    for mirror, sel in ((False, ~use_right), (True, use_right)):
        at = np.flatnonzero(sel)
        if len(at):
            f = ted_avx512.flatten(trees, mirror) if vector else None
            vector = f is not None  # (None: too many distinct features for its codes)
            f = f if vector else (right if mirror else left)
            jobs.extend((f, chunk) for chunk in _split(at, cost[at], n_jobs))

    def run(job):
        f, at = job
        if vector:
            return ted_avx512.pairs(f, I[at], J[at], *costs)
        part = np.zeros(len(at), dtype)
        _zs_pairs(*f, I[at], J[at], *costs, part)
        return part

    parts = _run_all(run, jobs, n_jobs)
    for (_, at), part in zip(jobs, parts):
        out[at] = part
    return out


def _run_all(run, jobs, n_jobs) -> list:
    """``[run(job) for job in jobs]``, on up to ``n_jobs`` threads; accounts :data:`KERNEL_CPU`."""
    per_thread = Counter()

    def timed(job):
        t0 = time.thread_time()
        out = run(job)
        per_thread[threading.get_ident()] += time.thread_time() - t0
        return out

    threads = min(n_threads(n_jobs), len(jobs))
    if threads <= 1:
        parts = [timed(job) for job in jobs]
    else:
        with ThreadPoolExecutor(threads) as pool:
            parts = list(pool.map(timed, jobs))
    if per_thread:
        KERNEL_CPU["total"] += sum(per_thread.values())
        KERNEL_CPU["critical"] += max(per_thread.values())
    return parts


def _split(at: np.ndarray, cost: np.ndarray, n_jobs) -> list[np.ndarray]:
    """Cut the pairs ``at`` into chunks of about equal Zhang-Shasha cost (one chunk if small)."""
    threads = n_threads(n_jobs)
    total = float(cost.sum())
    if threads <= 1 or total < PARALLEL_MIN_CELLS or len(at) < 2:
        return [at]
    n_chunks = min(len(at), threads * CHUNKS_PER_THREAD)
    # costliest pairs first, dealt round-robin: chunks of similar cost, the big ones start early
    order = at[np.argsort(-cost, kind="stable")]
    return [np.sort(order[c::n_chunks]) for c in range(n_chunks)]


def sed_pairs(trees, I, J, *, insert=1.0, remove=1.0, update=1.0, n_jobs=1) -> np.ndarray:
    """String edit distance between the postorder feature sequences of pairs of trees.

    A lower bound of TED (see :func:`online.pruning.ted.postorder_sed_matrix`), O(NC(g) NC(h))
    per pair; threads as in :func:`pairs`. With equal integer costs (Definition 3.2's unit
    costs) it is the cost times the Levenshtein distance, computed bit-parallel
    (:mod:`online.pruning.sed_bits`, 64 cells per word operation).
    """
    seqs = [t.postorder_features() for t in trees]
    off = np.concatenate(([0], np.cumsum([len(q) for q in seqs]))).astype(np.int64)
    seq = np.concatenate(seqs).astype(np.int64) if seqs else np.zeros(0, np.int64)
    I = np.ascontiguousarray(I, dtype=np.int64)
    J = np.ascontiguousarray(J, dtype=np.int64)
    out = np.zeros(len(I))
    n = np.diff(off).astype(np.float64)
    chunks = _split(np.arange(len(I)), n[I] * n[J], n_jobs) if len(I) else []
    bits = sed_bits.usable(trees, insert, remove, update)
    tables = sed_bits.pattern_tables(trees) if bits and len(I) else None

    def run(at):
        if bits:  # equal integer costs: cost x Levenshtein, bit-parallel (same numbers)
            return float(insert) * sed_bits.levenshtein_pairs(trees, I[at], J[at], tables=tables)
        part = np.zeros(len(at))
        _sed_pairs(seq, off, I[at], J[at], float(insert), float(remove), float(update), part)
        return part

    parts = _run_all(run, chunks, n_jobs)
    for at, part in zip(chunks, parts):
        out[at] = part
    return out
