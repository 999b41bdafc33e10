"""One MCTS-IS iteration (Algorithm 1) per sample, compiled: selection (eq. 8), the
backpropagation of sec. 3.2 with eq. (9) and lines 22-26, and the expansion of sec. 3.

Samples are learned one after the other, exactly as Algorithm 1 does (sample t's path reads the
V and sigma_hat that sample t-1 updated); within one sample the N_T FDTs are searched level by
level, tree after tree (the trees never share a node, so the order only fixes which random
numbers each tree draws).

Each sample runs in two phases:
- phase A (selection, read-only): the path SN_t of every tree, the excluded feature nodes met
  on the way (lines 22-26) and the feature nodes whose child block must grow because the sample
  has a category they were created without (the child is then a new leaf);
- phase B: the growths, the updates of V, B, p_hat, mu_hat, sigma_hat and s, and the choice of
  the leaves to expand; then ``_expand`` adds their children.
Between the two, the kernel checks that the node tables have room for what phase B may add;
if not it returns, the caller enlarges the tables and calls again to resume at phase B.

Floating point follows the order of the numpy reference this kernel replaced (golden trace in
tests/online/interactions/test_mcts_is_golden.py): gamma^-k by repeated products, ``math.log``.

Eq. (8)'s argmin: a random number is drawn only when the minimum is tied (then one of the tied
feature nodes, uniformly: the same distribution as a random tie-break key per feature node,
which is what the kernel drew until 2026-11, one call per feature node scanned).

EARLY EXIT (exact): feature node f cannot beat or tie the best score b found so far when
gap = sigma_f - b > 0 and gap^2 V_f > C_p^2 ln N (1 + 1e-6), i.e. gap > beta_f (1 + 5e-7) with
beta_f = C_p sqrt(ln N / V_f) its exploration bonus; the rounding of the computed score
sigma_f - beta_f and of the test is a few ulps (< 1e-15 relative), far under that margin as long
as beta_f is not below ~1e-9 |b|, which the last condition (C_p^2 ln N > 1e-18 b^2 V_f) checks.
Such an f is skipped without its division and square root; the argmin, its ties and so the
draws are those of the full scan (same golden trace).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from online.interactions.fdt import FDT
from online.interactions.layout import (
    DataNodes,
    FeatureNodes,
    Params,
    Samples,
    Scratch,
    Tables,
    Work,
)

__all__ = ["Scratch", "iterate"]

# counters kept in ``Work.counts`` so that a resumed call finds phase A's results
N_EX, N_GROW, NEED_D, NEED_F = 0, 1, 2, 3
# ... and phase B's leaves to expand (``_expand``, called from ``_learn_rows``: a call with array
# arguments inside the per-sample functions would make numba reference-count ~25 arrays per call)
N_EXPAND, SMALLEST = 4, 5


@njit(cache=True, error_model="numpy")
def _sort_small(a, n):
    """Insertion sort of a[:n] in place (a handful of feature node ids)."""
    for i in range(1, n):
        v = a[i]
        j = i - 1
        while j >= 0 and a[j] > v:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v


@njit(cache=True, error_model="numpy")
def _phase_a(r, codes, K, tables, n_d, c_p, rng, work):
    """Selection (line 14-18, eq. 8) in every tree for sample r; no table is written."""
    roots, data, feat = tables
    dfstart, dfcount = data.fstart, data.fcount
    fV, fsigma, ffield = feat.V, feat.sigma, feat.field
    fcstart, fccount, fnabove = feat.cstart, feat.ccount, feat.nabove
    path_d, path_f, plen, at_leaf, best, n_unv = (work.path_d, work.path_f, work.plen,
                                                  work.at_leaf, work.best, work.n_unv)
    ex, grow, counts, alive, is_new, tmp = (work.ex, work.grow, work.counts, work.alive,
                                            work.is_new, work.tmp)
    T = roots.shape[0]
    n_ex = 0
    n_grow = 0
    pending = 0  # data-node rows the growths will add
    for t in range(T):
        path_d[t, 0] = roots[t]
        path_f[t, 0] = -1
        plen[t] = 1
        at_leaf[t] = False
        alive[t] = True
        is_new[t] = False  # the walker stands on a child a growth will create
    level = 0
    while True:
        any_alive = False
        # pass 1, tree order: excluded feature nodes, the best visited one (a random number
        # only when eq. 8's minimum is tied and no feature node is unvisited)
        for t in range(T):
            if not alive[t]:
                continue
            d = path_d[t, level]
            if is_new[t] or dfstart[d] < 0:  # a leaf: the deepest selected node
                at_leaf[t] = True
                alive[t] = False
                continue
            any_alive = True
            fs, fc = dfstart[d], dfcount[d]
            # excluded feature nodes (Theorem 4: lines 22-26), never-selected ones, and N =
            # sum of V over l(n^d) (an exact sum of counts, whatever the order)
            N = 0.0
            nu, n_inc = 0, 0
            for f in range(fs, fs + fc):
                if fnabove[f] == 0:
                    ex[n_ex, 0] = t
                    ex[n_ex, 1] = level
                    ex[n_ex, 2] = f
                    n_ex += 1
                    continue
                n_inc += 1
                if fV[f] == 0:
                    nu += 1
                N += fV[f]
            b = -1
            if nu == 0 and n_inc > 0:  # else pass 2 picks a never-selected one
                # eq. (8): argmin of sigma_hat - C_p sqrt(ln N / V) over l(n^d)
                logN = math.log(max(N, 1.0))
                k2 = c_p * c_p * logN * (1.0 + 1e-6)
                b_score, n_tie = np.inf, 0
                for f in range(fs, fs + fc):
                    if fnabove[f] == 0:
                        continue
                    # exact early exit, no division or root: see EARLY EXIT above
                    gap = fsigma[f] - b_score
                    if gap > 0.0 and gap * gap * fV[f] > k2 > 1e-18 * b_score * b_score * fV[f]:
                        continue
                    score = fsigma[f] - c_p * math.sqrt(logN / fV[f])
                    if score < b_score:
                        b, b_score, n_tie = f, score, 1
                    elif score == b_score:
                        n_tie += 1
                if n_tie > 1:  # a tied minimum: one of the tied, uniformly
                    k = int(rng.random() * n_tie)
                    for f in range(b, fs + fc):
                        if fnabove[f] == 0:
                            continue
                        if fsigma[f] - c_p * math.sqrt(logN / fV[f]) == b_score:
                            if k == 0:
                                b = f
                                break
                            k -= 1
            best[t] = b if n_inc > 0 else -1
            n_unv[t] = nu
        if not any_alive:
            break
        # pass 2: never-selected feature nodes come first, one at random
        for t in range(T):
            if not alive[t] or n_unv[t] == 0:
                continue
            k = int(rng.random() * n_unv[t])
            d = path_d[t, level]
            for f in range(dfstart[d], dfstart[d] + dfcount[d]):
                if fnabove[f] > 0 and fV[f] == 0:
                    if k == 0:
                        best[t] = f
                        break
                    k -= 1
        # children; a category the feature node was created without grows its block
        m = 0
        for t in range(T):
            if not alive[t]:
                continue
            f = best[t]
            if f < 0:  # l(n^d) is empty: the path stops at a data node that is not a leaf
                alive[t] = False
                continue
            if codes[r, ffield[f]] >= fccount[f]:
                tmp[m] = f
                m += 1
        _sort_small(tmp, m)
        for k in range(m):
            grow[n_grow, 0] = tmp[k]
            grow[n_grow, 1] = n_d + pending
            pending += K[ffield[tmp[k]]]
            n_grow += 1
        for t in range(T):
            if not alive[t]:
                continue
            f = best[t]
            c = codes[r, ffield[f]]
            if c >= fccount[f]:
                start = -1
                for g in range(n_grow - m, n_grow):
                    if grow[g, 0] == f:
                        start = grow[g, 1]
                path_d[t, level + 1] = start + c
                is_new[t] = True
            else:
                path_d[t, level + 1] = fcstart[f] + c
            path_f[t, level + 1] = f
            plen[t] += 1
        level += 1
    # children of the excluded feature nodes (growing after the selection's growths)
    m0 = n_grow
    for e in range(n_ex):
        f = ex[e, 2]
        if codes[r, ffield[f]] >= fccount[f]:
            grow[n_grow, 0] = f
            n_grow += 1
    _sort_small(grow[m0:, 0], n_grow - m0)
    for g in range(m0, n_grow):
        grow[g, 1] = n_d + pending
        pending += K[ffield[grow[g, 0]]]
    for e in range(n_ex):
        f = ex[e, 2]
        c = codes[r, ffield[f]]
        if c >= fccount[f]:
            for g in range(m0, n_grow):
                if grow[g, 0] == f:
                    ex[e, 3] = grow[g, 1] + c
        else:
            ex[e, 3] = fcstart[f] + c
    n_leaves = 0
    for t in range(T):
        if at_leaf[t]:
            n_leaves += 1
    sumK = 0
    for i in range(K.shape[0]):
        sumK += K[i]
    counts[N_EX] = n_ex
    counts[N_GROW] = n_grow
    counts[NEED_D] = pending + n_leaves * sumK
    counts[NEED_F] = n_leaves * K.shape[0]


@njit(cache=True, error_model="numpy")
def _recount(f, ds, fcstart, fccount, fnabove, lam):
    n = 0
    for k in range(fcstart[f], fcstart[f] + fccount[f]):
        if ds[k] > lam:
            n += 1
    fnabove[f] = n


@njit(cache=True, error_model="numpy")
def _recount_touched(work, n_ex, ds, feat, lam):
    """nabove of every feature node whose children phase B updated, counted afresh (when
    lambda >= 1, new children's s = 1 is not above it, and the increments of phase B do not
    apply)."""
    path_f, plen, ex = work.path_f, work.plen, work.ex
    fcstart, fccount, fnabove = feat.cstart, feat.ccount, feat.nabove
    for t in range(plen.shape[0]):
        for lev in range(1, plen[t]):
            _recount(path_f[t, lev], ds, fcstart, fccount, fnabove, lam)
    for e in range(n_ex):
        _recount(ex[e, 2], ds, fcstart, fccount, fnabove, lam)


@njit(cache=True, error_model="numpy")
def _expand(K, m, smallest, max_nodes, tables, n_d, n_f, work):
    """Expansion (sec. 3) of the leaves ``work.best[:m]`` (tree ``work.n_unv[:m]``), by node id,
    while the node budget allows; returns (n_d, n_f)."""
    _, data, feat = tables
    dV, dB, ds, dparent, dcat, ddepth = data.V, data.B, data.s, data.parent, data.cat, data.depth
    dfstart, dfcount, dtree = data.fstart, data.fcount, data.tree
    fV, fsigma, fsumV, ffield = feat.V, feat.sigma, feat.sumV, feat.field
    fparent, fcstart, fccount, fnabove = feat.parent, feat.cstart, feat.ccount, feat.nabove
    path_f, plen, on_path = work.path_f, work.plen, work.on_path
    leaves, owner = work.best, work.n_unv  # what phase B left there
    F = K.shape[0]
    for q in range(1, m):  # by node id (insertion sort of a few distinct ids, with owners)
        node, t = leaves[q], owner[q]
        j = q - 1
        while j >= 0 and leaves[j] > node:
            leaves[j + 1], owner[j + 1] = leaves[j], owner[j]
            j -= 1
        leaves[j + 1], owner[j + 1] = node, t
    for q in range(m):
        if n_d + smallest > max_nodes:
            break
        node, t = leaves[q], owner[q]
        for i in range(F):
            on_path[i] = False
        for lev in range(1, plen[t]):
            on_path[ffield[path_f[t, lev]]] = True
        total, nf = 0, 0
        for i in range(F):
            if not on_path[i]:
                total += K[i]
                nf += 1
        if n_d + total > max_nodes or nf == 0:
            continue
        dfstart[node] = n_f
        dfcount[node] = nf
        for i in range(F):
            if on_path[i]:
                continue
            f = n_f
            n_f += 1
            fV[f], fsigma[f] = 0.0, 0.0  # sec. 3: a new feature node has sigma_hat = 0
            ffield[f], fparent[f] = i, node
            fcstart[f], fccount[f] = n_d, K[i]
            fsumV[f] = K[i]
            fnabove[f] = K[i]
            for j in range(K[i]):
                b = n_d + j
                dV[b], dB[b], ds[b] = 1.0, 0.0, 1.0
                dparent[b], dcat[b], ddepth[b] = f, j, ddepth[node] + 1
                dfstart[b], dfcount[b], dtree[b] = -1, 0, dtree[node]
            n_d += K[i]
    return n_d, n_f


@njit(cache=True, error_model="numpy")
def _phase_b(r, y, K, tables, n_d, n_f, params, work):
    """Growths, backpropagation (sec. 3.2, eq. 9, lines 22-27) for sample r, and the leaves to
    expand (``counts[N_EXPAND]`` of them in ``work.best``, their trees in ``work.n_unv``; 0 once
    the budget is spent)."""
    roots, data, feat = tables
    dV, dB, ds, dparent, dcat, ddepth = data.V, data.B, data.s, data.parent, data.cat, data.depth
    dfstart, dfcount, dtree = data.fstart, data.fcount, data.tree
    fV, fsigma, fsumV, ffield = feat.V, feat.sigma, feat.sumV, feat.field
    fparent, fcstart, fccount, fnabove = feat.parent, feat.cstart, feat.ccount, feat.nabove
    v, kappa, c_f, lam = params.v, params.kappa, params.c_f, params.lam
    grace, max_depth, max_nodes = params.grace, params.max_depth, params.max_nodes
    path_d, path_f, support, plen, at_leaf = (work.path_d, work.path_f, work.support, work.plen,
                                              work.at_leaf)
    ex, grow, err, powers, counts = work.ex, work.grow, work.err, work.powers, work.counts
    leaves, owner = work.best, work.n_unv  # phase A's selection is done with them
    T = roots.shape[0]
    yt = y[r]
    n_ex, n_grow = counts[N_EX], counts[N_GROW]
    recount = not lam < 1.0  # new nodes (s = 1) count as above lambda only when lambda < 1

    # -- growths, in phase A's order: the block moves to the end with the new children -------
    for g in range(n_grow):
        f, start = grow[g, 0], grow[g, 1]
        old_start, old_n = fcstart[f], fccount[f]
        new_n = K[ffield[f]]
        pa = fparent[f]
        for k in range(old_n):
            a, b = old_start + k, start + k
            dV[b], dB[b], ds[b] = dV[a], dB[a], ds[a]
            dparent[b], dcat[b], ddepth[b] = dparent[a], dcat[a], ddepth[a]
            dfstart[b], dfcount[b], dtree[b] = dfstart[a], dfcount[a], dtree[a]
            if dfstart[b] >= 0:  # grandchildren feature nodes now hang below the moved row
                for h in range(dfstart[b], dfstart[b] + dfcount[b]):
                    fparent[h] = b
            ddepth[a] = -1  # dead row
            dfstart[a] = -1
        for k in range(old_n, new_n):  # sec. 3: V = 1, B = 0, s = 1
            b = start + k
            dV[b], dB[b], ds[b] = 1.0, 0.0, 1.0
            dparent[b], dcat[b], ddepth[b] = f, k, ddepth[pa] + 1
            dfstart[b], dfcount[b], dtree[b] = -1, 0, dtree[pa]
        n_d = start + new_n
        fcstart[f] = start
        fccount[f] = new_n
        fsumV[f] += new_n - old_n
        fnabove[f] += new_n - old_n

    # -- backpropagation: V, B (so p_hat, mu_hat) on SN_t, and eq. (9) ----------------------
    for t in range(T):
        n = plen[t]
        for lev in range(n):
            node = path_d[t, lev]
            V_after = dV[node] + 1.0
            mu_after = (dB[node] + yt) / V_after  # mu_hat_{n^d, t+1}
            e = yt - mu_after
            err[lev] = e * e
            dV[node] += 1.0
            dB[node] += yt
            if lev > 0:
                fsumV[path_f[t, lev]] += 1.0
        if n < 2:
            continue
        # w_ij proportional to gamma^(j - |SN|), gamma = (v + V_{SN_|SN|, t+1}) / kappa
        gamma = (v + dV[path_d[t, n - 1]]) / kappa
        powers[0] = 1.0
        for k in range(1, n):
            powers[k] = powers[k - 1] * gamma
        num, den = 0.0, 0.0
        for lev in range(n - 1, 0, -1):
            w = 1.0 / powers[n - 1 - lev]
            num += w * err[lev]
            den += w
            f = path_f[t, lev]
            L = num / den  # eq. (9): sigma_hat_{pa(SN_i)} <- running mean of L
            fsigma[f] = (fV[f] * fsigma[f] + L) / (fV[f] + 1.0)
            fV[f] += 1.0  # line 27
    # lines 22-26: the child data node of x_t's category below every excluded feature node
    for e in range(n_ex):
        dV[ex[e, 3]] += 1.0
        dB[ex[e, 3]] += yt
        fsumV[ex[e, 2]] += 1.0

    # -- s_{n^d} (eqs. 5-6, line 25) from the estimators after the update --------------------
    for t in range(T):
        support[t, 0] = 1.0
        sup = 1.0
        for lev in range(1, plen[t]):
            node, f = path_d[t, lev], path_f[t, lev]
            sup = sup * (dV[node] / fsumV[f])  # eq. (6): prod of p_hat below n_r
            support[t, lev] = sup
            s = dB[node] / dV[node] * sup + c_f * math.sqrt(sup)
            if not recount:
                fnabove[f] += int(s > lam) - int(ds[node] > lam)
            ds[node] = s
    for e in range(n_ex):
        node, f = ex[e, 3], ex[e, 2]
        ps = support[ex[e, 0], ex[e, 1]] * (dV[node] / fsumV[f])
        s = dB[node] / dV[node] * ps + c_f * math.sqrt(ps)
        if not recount:
            fnabove[f] += int(s > lam) - int(ds[node] > lam)
        ds[node] = s
    # (with recount, ``_learn_rows`` then calls ``_recount_touched``)

    # -- expansion (sec. 3): the deepest selected node when it is a leaf, by node id --------
    F = K.shape[0]
    m = 0
    for t in range(T):
        if at_leaf[t]:
            node = path_d[t, plen[t] - 1]
            if dV[node] >= grace and (max_depth < 0 or ddepth[node] < max_depth):
                leaves[m] = node
                owner[m] = t
                m += 1
    # the smallest expansion adds the children of the F - 1 fields with the fewest categories
    smallest, largest = 0, 0
    for i in range(F):
        smallest += K[i]
        largest = max(largest, K[i])
    smallest -= largest
    # once the node budget is spent the FDT keeps its shape, the estimators keep learning
    if n_d + smallest > max_nodes:
        m = 0
    counts[N_EXPAND] = m
    counts[SMALLEST] = smallest
    return n_d, n_f


@njit(cache=True, error_model="numpy")
def _learn_rows(samples, tables, n_d, n_f, params, rng, start, resume, work):
    """Algorithm 1 on samples ``start, start + 1, ...``; returns (next sample, n_d, n_f):
    next sample < len(y) when the tables need room (``work.counts``), phase A of it being done.

    ``samples``, ``tables``, ``params`` and ``work`` as plain tuples or as the NamedTuples of
    :mod:`online.interactions.layout` (see ``layout.plain``)."""
    samples, params, work = Samples(*samples), Params(*params), Work(*work)
    tables = Tables(tables[0], DataNodes(*tables[1]), FeatureNodes(*tables[2]))
    codes, y, counts = samples.codes, samples.y, work.counts
    data_V, feat_V = tables.data.V, tables.features.V
    R = y.shape[0]
    for r in range(start, R):
        K = samples.K_rows[r]
        if not (resume and r == start):
            _phase_a(r, codes, K, tables, n_d, params.c_p, rng, work)
            if n_d + counts[NEED_D] > data_V.shape[0] or n_f + counts[NEED_F] > feat_V.shape[0]:
                return r, n_d, n_f
        n_d, n_f = _phase_b(r, y, K, tables, n_d, n_f, params, work)
        if not params.lam < 1.0:
            _recount_touched(work, counts[N_EX], tables.data.s, tables.features, params.lam)
        if counts[N_EXPAND] > 0:
            n_d, n_f = _expand(K, counts[N_EXPAND], counts[SMALLEST], params.max_nodes, tables,
                               n_d, n_f, work)
    return R, n_d, n_f


def iterate(fdt: FDT, codes: np.ndarray, y: np.ndarray, k_rows: np.ndarray, params: dict,
            rng: np.random.Generator, scratch: Scratch) -> None:
    """Algorithm 1 on each row of ``codes`` (rows x fields) in turn; ``k_rows[r]`` = K_i known
    when row r is learned (categories get codes in order of appearance)."""
    R, T = len(y), len(fdt.roots)
    if T == 0 or R == 0:
        return
    D, F = fdt.d, fdt.f
    codes = np.ascontiguousarray(codes, dtype=np.int64)
    y = np.ascontiguousarray(y, dtype=np.float64)
    k_rows = np.ascontiguousarray(k_rows, dtype=np.int64)
    max_depth = -1 if params["max_depth"] is None else int(params["max_depth"])
    max_nodes = int(params["max_nodes"])
    kernel_params = tuple(Params(
        c_p=float(params["c_p"]), v=float(params["v"]), kappa=float(params["kappa"]),
        c_f=float(params["c_f"]), lam=float(params["lambda_"]),
        grace=float(params["grace_period"]), max_depth=max_depth, max_nodes=max_nodes))
    samples = tuple(Samples(codes, y, k_rows))
    work = tuple(scratch.work)  # plain tuples: see layout.plain
    r, resume = 0, False
    while r < R:
        r, D.n, F.n = _learn_rows(samples, scratch.tables(fdt), D.n, F.n, kernel_params, rng,
                                  r, resume, work)
        if r < R:  # room for phase B of row r, then resume there; max_nodes bounds the
            # expansions, so the tables need not double past it (growths may add a few rows)
            need_d, need_f = int(scratch.work.counts[NEED_D]), int(scratch.work.counts[NEED_F])
            D.reserve(need_d, limit=max_nodes + 2 * need_d)
            F.reserve(need_f, limit=max_nodes + 2 * need_f)
            resume = True
