"""One MCTS-IS iteration (Algorithm 1) for many walkers at once: selection (eq. 8), the
backpropagation of sec. 3.2 with eq. (9) and lines 22-26, and the expansion of sec. 3.

A *walker* is one (sample, tree) pair: sample t searched in FDT i. Walkers of one sample in
different trees never share a node, so a batch of one sample over all N_T trees is exactly
Algorithm 1 run on each tree. With several samples in a batch, selection reads the statistics
as they were at the start of the batch (V, sigma_hat, s and so l(n^d)); every update is then
applied exactly as the row-by-row recursion would (mu_hat_{t+1} and V_{t+1} per row, eq. (9)'s
running mean); only the choices of the later rows can differ from a row-by-row run.
"""

from __future__ import annotations

import numpy as np

from online.interactions.extraction import _ranges
from online.interactions.fdt import FDT
from online.interactions.screening import is_excluded, screening_statistic


def _select(fdt: FDT, flat, group, n_groups, inv, c_p, rng) -> np.ndarray:
    """Eq. (8) at each walker's data node; -1 where l(n^d) is empty.

    pi_t(n^d) = argmin_{n^f in l(n^d)} sigma_hat_{n^f} - C_p sqrt(log sum_{l(n^d)} V / V_{n^f}).
    A feature node never selected (V = 0) has an infinite bonus: it comes first, at random among
    the never-selected ones (ties between finite scores are also broken at random).
    """
    f = fdt.f
    included = ~is_excluded(f.nabove[flat])
    fV = f.V[flat]
    N = np.bincount(group, weights=np.where(included, fV, 0.0), minlength=n_groups)
    n_inc = np.bincount(group, weights=included, minlength=n_groups)
    unvisited = included & (fV == 0)
    n_unv = np.bincount(group, weights=unvisited, minlength=n_groups).astype(np.int64)
    visited = included & (fV > 0)
    import math
    logN = np.array([math.log(v) for v in np.maximum(N, 1.0).tolist()])[group]
    score = np.full(flat.size, np.inf)
    score[visited] = f.sigma[flat[visited]] - c_p * np.sqrt(logN[visited] / fV[visited])
    order = np.lexsort((rng.random(flat.size), score, group))
    sizes = np.bincount(group, minlength=n_groups)
    best = flat[order[np.cumsum(sizes) - sizes]]
    chosen = best[inv]
    wants_new = n_unv[inv] > 0
    if wants_new.any():
        unv_flat = flat[unvisited]
        offsets = np.cumsum(n_unv) - n_unv
        g = inv[wants_new]
        k = (rng.random(g.size) * n_unv[g]).astype(np.int64)
        chosen[wants_new] = unv_flat[offsets[g] + k]
    chosen[n_inc[inv] == 0] = -1
    return chosen


def _child(fdt: FDT, fids, codes, n_categories) -> np.ndarray:
    """Child data node n_{i,j}^d of feature node n_i^f for category j (growing stale blocks)."""
    stale = codes >= fdt.f.ccount[fids]
    if stale.any():
        fdt.grow(fids[stale], n_categories)
    return fdt.f.cstart[fids].astype(np.int64) + codes


def _grouped_cumulative(keys, values):
    """For entries in order: count and running sum of ``values`` within equal ``keys``."""
    # unique composite keys (key, position) make a plain quicksort keep the entry order
    order = np.argsort(keys.astype(np.int64) * keys.size + np.arange(keys.size))
    k, v = keys[order], values[order]
    new = np.ones(k.size, dtype=bool)
    new[1:] = k[1:] != k[:-1]
    starts = np.flatnonzero(new)
    gid = np.cumsum(new) - 1
    cs = np.cumsum(v)
    run_sum = cs - (cs - v)[starts][gid]
    run_cnt = np.arange(k.size) - starts[gid] + 1
    out_sum, out_cnt = np.empty_like(run_sum), np.empty_like(run_cnt)
    out_sum[order], out_cnt[order] = run_sum, run_cnt
    return out_cnt, out_sum


def _unique_inverse(values: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Distinct ``values`` (ints in [0, size), in no particular order) and the index of each
    value among them: ``np.unique(values, return_inverse=True)`` without sorting."""
    scratch = np.empty(size, dtype=np.int64)
    pos = np.arange(values.size)
    scratch[values] = pos  # the last writer wins: one representative per value
    uniq = values[scratch[values] == pos]
    scratch[uniq] = np.arange(uniq.size)
    return uniq, scratch[values]


def _add(values: np.ndarray, index: np.ndarray, amount) -> None:
    np.add.at(values, index, amount)


def iterate(
    fdt: FDT, codes: np.ndarray, y: np.ndarray, n_categories: np.ndarray, params, rng
):
    """Run one iteration of Algorithm 1 per (row, tree) walker; ``codes`` is rows x fields."""
    D, F = fdt.d, fdt.f
    T, R = len(fdt.roots), len(y)
    if T == 0 or R == 0:
        return
    W = R * T
    w_row = np.repeat(np.arange(R), T)
    yw = y[w_row]
    nodes = [np.tile(fdt.roots, R).astype(np.int64)]  # SN_t starts with n_r
    feats = [np.full(W, -1, dtype=np.int64)]
    excluded_pairs = []  # (walker, excluded feature node, level): lines 22-26
    ends_at_leaf = np.zeros(W, dtype=bool)
    alive = np.arange(W)

    # -- selection: descend until a leaf or a data node with l(n^d) empty (line 14) ----------
    level = 0
    while alive.size:
        d = nodes[level][alive]
        leaf = D.fstart[d] < 0
        ends_at_leaf[alive[leaf]] = True
        alive, d = alive[~leaf], d[~leaf]
        if alive.size == 0:
            break
        if R == 1:  # one sample: its walkers are in different trees, all nodes distinct
            uniq, inv = d, np.arange(d.size)
        else:
            uniq, inv = _unique_inverse(d, D.n)
        flat, group = _ranges(D.fstart[uniq], D.fcount[uniq])
        excl = is_excluded(F.nabove[flat])
        if excl.any():
            ex_flat, ex_group = flat[excl], group[excl]
            n_ex = np.bincount(ex_group, minlength=uniq.size)
            per = n_ex[inv]
            pw = np.repeat(alive, per)
            within = np.arange(int(per.sum())) - np.repeat(np.cumsum(per) - per, per)
            ex_off = np.cumsum(n_ex) - n_ex
            pf = ex_flat[np.repeat(ex_off[inv], per) + within]
            excluded_pairs.append((pw, pf, np.full(pw.size, level)))
        chosen = _select(
            fdt, flat, group, uniq.size, inv, params["c_p"], rng
        )  # line 18
        go = chosen >= 0
        alive, chosen = alive[go], chosen[go]
        if alive.size == 0:
            break
        child = _child(fdt, chosen, codes[w_row[alive], F.field[chosen]], n_categories)
        nxt = np.full(W, -1, dtype=np.int64)
        nxt[alive] = child
        fe = np.full(W, -1, dtype=np.int64)
        fe[alive] = chosen
        nodes.append(nxt)
        feats.append(fe)
        level += 1

    node_mat = np.stack(nodes, axis=1)
    feat_mat = np.stack(feats, axis=1)
    L = node_mat.shape[1]
    n_sn = (node_mat >= 0).sum(axis=1)  # |SN_t| per walker

    # -- backpropagation (sec. 3.2): V, B, p_hat, mu_hat of every node of SN_t ---------------
    ent_w, ent_l = np.nonzero(node_mat >= 0)  # walker-major, so rows stay in order
    ent_n = node_mat[ent_w, ent_l]
    if R == 1:
        cnt, ysum = np.ones(ent_n.size, dtype=np.int64), yw[ent_w]
    else:
        cnt, ysum = _grouped_cumulative(ent_n, yw[ent_w])
    V_after = D.V[ent_n] + cnt  # V_{n^d, t+1} as seen right after this row's update
    mu_after = (D.B[ent_n] + ysum) / V_after  # mu_hat_{n^d, t+1}
    _add(D.V, ent_n, 1.0)
    _add(D.B, ent_n, yw[ent_w])
    deeper = ent_l > 0
    _add(F.sumV, feat_mat[ent_w[deeper], ent_l[deeper]], 1.0)

    # lines 22-26: the child data node (x_t's category) of every excluded feature node of every
    # data node on the path gets the same updates, so that a node excluded on a poor early
    # estimate can come back into l(n^d).
    if excluded_pairs:
        pw = np.concatenate([p[0] for p in excluded_pairs])
        pf = np.concatenate([p[1] for p in excluded_pairs])
        pl = np.concatenate([p[2] for p in excluded_pairs])
        ex_child = _child(fdt, pf, codes[w_row[pw], F.field[pf]], n_categories)
        _add(D.V, ex_child, 1.0)
        _add(D.B, ex_child, yw[pw])
        _add(F.sumV, pf, 1.0)

    # eq. (9): sigma_hat_{pa(SN_i)} <- running mean of L = sum_{j >= i} w_ij (y - mu_hat_j)^2,
    # w_ij proportional to gamma^j, gamma = (v + V_{SN_|SN|, t+1}) / kappa
    err = np.zeros((W, L))
    err[ent_w, ent_l] = (yw[ent_w] - mu_after) ** 2
    last = ent_l == n_sn[ent_w] - 1
    V_deep = np.empty(W)
    V_deep[ent_w[last]] = V_after[last]
    gamma = (params["v"] + V_deep) / params["kappa"]
    expo = np.arange(L)[None, :] - (n_sn - 1)[:, None]  # j - |SN|, <= 0 on the path
    powers = np.cumprod(np.concatenate([np.ones((W, 1)), np.repeat(gamma[:, None], L - 1, axis=1)], axis=1), axis=1)
    G = np.where(expo <= 0, 1.0 / powers[np.arange(W)[:, None], np.maximum(-expo, 0)], 0.0)
    G[:, 0] = 0.0  # the root's error is never part of L (i >= 2 in eq. 9)
    num = np.cumsum((G * err)[:, ::-1], axis=1)[:, ::-1]
    den = np.cumsum(G[:, ::-1], axis=1)[:, ::-1]
    sel_w, sel_l = ent_w[deeper], ent_l[deeper]
    Lval = num[sel_w, sel_l] / den[sel_w, sel_l]
    fsel = feat_mat[sel_w, sel_l]
    uniq_f, inv_f = _unique_inverse(fsel, F.n)
    m = np.bincount(inv_f, minlength=uniq_f.size).astype(np.float64)
    total = np.bincount(inv_f, weights=Lval, minlength=uniq_f.size)
    F.sigma[uniq_f] = (F.V[uniq_f] * F.sigma[uniq_f] + total) / (F.V[uniq_f] + m)
    F.V[uniq_f] += m  # line 27

    # s_{n^d} (line 25) for every updated data node, from the estimators after the update
    p = np.ones((W, L))
    p[sel_w, sel_l] = fdt.p_hat(node_mat[sel_w, sel_l])
    support = np.cumprod(p, axis=1)  # eq. (6): prod of p_hat below n_r
    sn = node_mat[sel_w, sel_l]
    D.s[sn] = screening_statistic(fdt.mu_hat(sn), support[sel_w, sel_l], params["c_f"])
    touched_f = [fsel]
    if excluded_pairs:
        ps = support[pw, pl] * fdt.p_hat(ex_child)
        D.s[ex_child] = screening_statistic(fdt.mu_hat(ex_child), ps, params["c_f"])
        touched_f.append(pf)
    tf, _ = _unique_inverse(np.concatenate(touched_f), F.n)
    kids, kgroup = _ranges(F.cstart[tf], F.ccount[tf])
    F.nabove[tf] = np.bincount(
        kgroup, weights=D.s[kids] > params["lambda_"], minlength=tf.size
    )

    # -- expansion (sec. 3): the deepest selected node, when it is a leaf --------------------
    leaves = np.unique(node_mat[np.flatnonzero(ends_at_leaf), n_sn[ends_at_leaf] - 1])
    leaves = leaves[D.V[leaves] >= params["grace_period"]]
    max_depth = params["max_depth"]
    if max_depth is not None:
        leaves = leaves[D.depth[leaves] < max_depth]
    n_fields = len(n_categories)
    smallest = int(np.sort(n_categories)[: max(n_fields - 1, 0)].sum())
    for node in leaves.tolist():
        if D.n + smallest > params["max_nodes"]:
            break  # node budget spent: the FDT keeps its shape, estimators keep learning
        on_path = set(fdt.path_fields(node))
        fields = [i for i in range(n_fields) if i not in on_path]
        if D.n + int(n_categories[fields].sum()) > params["max_nodes"]:
            continue
        fdt.expand(node, fields, n_categories)
