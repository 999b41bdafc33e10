"""Extraction of the current optimal DT from the FDT: the divide-and-conquer recursion of eq. (7).

Following Theorem 5, the recursion runs on T_hat^P, the FDT without the feature nodes excluded
from l(pa(n^f)) by the estimated screening criterion:

    L*_{n^d} = min_{n^f in c(n^d)} L*_{n^f},
    L*_{n^f} = sum_{n_{i,j}^d in c(n^f)} p_hat_{n_{i,j}^d} L*_{n_{i,j}^d}            (eq. 7)

- a feature node whose child data nodes are all leaves of T_hat^P takes L*_{n^f} = sigma_hat_{n^f}
  (Theorem 5: sigma_hat estimates L*_{n^f} there, Lemma 3);
- a leaf data node n^d of T_hat^P below a feature node that also has internal children takes
  the leaf loss of sec. 2.2, E[(y - E[y|S])^2 | S], estimated for y in {0, 1} (Assumption 3) by
  mu_hat (1 - mu_hat);
- a data node is internal when it has at least one selectable (not excluded) feature node that
  has been selected at least ``min_visits`` times: a never-selected feature node has no estimate
  (its sigma_hat is the initial 0, sec. 3), and one selected once or twice has a sigma_hat of a
  few squared errors, often exactly 0, which would win every argmin. Theorem 3 / 4: an internal
  node must take exactly one feature node, it may not stop.
"""

from __future__ import annotations

import numpy as np

from online.interactions.fdt import FDT


def _ranges(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated ``range(s, s + c)`` for each pair, and the pair index of every element."""
    counts = counts.astype(np.int64)
    group = np.repeat(np.arange(len(counts)), counts)
    offsets = np.cumsum(counts) - counts
    flat = (
        np.arange(int(counts.sum())) - offsets[group] + starts.astype(np.int64)[group]
    )
    return flat, group


def extract(
    fdt: FDT, min_visits: float = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Eq. (7) bottom-up over all data nodes of the forest.

    Returns ``best_f`` (the feature node chosen at each data node, -1 at leaves), ``loss_d``
    (L*_{n^d}) and ``loss_f`` (L*_{n^f}, +inf for feature nodes that are not candidates).
    """
    d, f = fdt.d, fdt.f
    n = d.n
    depth = d.depth[:n]
    V, B = d.V[:n], d.B[:n]
    mu = B / V
    loss_d = mu * (1.0 - mu)  # leaf loss (sec. 2.2) for y in {0, 1}
    internal = np.zeros(n, dtype=bool)
    best_f = np.full(n, -1, dtype=np.int64)
    loss_f = np.full(f.n, np.inf)
    if n == 0:
        return best_f, loss_d, loss_f
    expanded = (d.fstart[:n] >= 0) & (depth >= 0)
    for k in range(int(depth.max()), -1, -1):
        nodes = np.flatnonzero(expanded & (depth == k))
        if nodes.size == 0:
            continue
        cand, owner = _ranges(d.fstart[nodes], d.fcount[nodes])
        ok = (f.nabove[cand] > 0) & (
            f.V[cand] >= max(min_visits, 1.0)
        )  # in l(n^d), estimated
        cand, owner = cand[ok], owner[ok]
        if cand.size == 0:
            continue
        child, cgroup = _ranges(f.cstart[cand], f.ccount[cand])
        p = V[child] / f.sumV[cand][cgroup]
        weighted = np.bincount(cgroup, weights=p * loss_d[child], minlength=cand.size)
        any_internal = (
            np.bincount(cgroup, weights=internal[child], minlength=cand.size) > 0
        )
        lf = np.where(any_internal, weighted, f.sigma[cand])  # eq. (7) / Theorem 5
        loss_f[cand] = lf
        # argmin per owner node (ties: the first feature node, i.e. the lowest field id)
        order = np.lexsort((cand, lf, owner))
        first = np.ones(order.size, dtype=bool)
        first[1:] = owner[order][1:] != owner[order][:-1]
        win = order[first]
        best_f[nodes[owner[win]]] = cand[win]
        loss_d[nodes[owner[win]]] = lf[win]
        internal[nodes[owner[win]]] = True
    return best_f, loss_d, loss_f


def route(
    fdt: FDT, best_f: np.ndarray, codes: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Send each row of ``codes`` (rows x fields, -1 = unknown) down every extracted DT.

    Returns ``nodes`` (rows x trees): the leaf reached, or the last data node before a category
    the tree has no data node for; and ``at_leaf`` (True when a leaf was reached).
    """
    codes = np.asarray(codes, dtype=np.int64)
    R, T = codes.shape[0], len(fdt.roots)
    node = np.tile(fdt.roots, R).astype(np.int64)
    row = np.repeat(np.arange(R), T)
    at_leaf = np.zeros(R * T, dtype=bool)
    active = np.arange(R * T)
    while active.size:
        fs = best_f[node[active]]
        leaf = fs < 0
        at_leaf[active[leaf]] = True
        active, fs = active[~leaf], fs[~leaf]
        if active.size == 0:
            break
        c = codes[row[active], fdt.f.field[fs]]
        known = (c >= 0) & (c < fdt.f.ccount[fs])
        active, fs, c = active[known], fs[known], c[known]
        node[active] = fdt.f.cstart[fs] + c
    return node.reshape(R, T), at_leaf.reshape(R, T)
