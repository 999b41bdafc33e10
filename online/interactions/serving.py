"""A serving copy of an MCTS-IS forest: what prediction and Appendix B.4 read, nothing more.

Predicting needs the extracted DTs (eq. 7) and the leaf means mu_hat; ``interactions()`` needs
the data nodes with s > lambda and their paths. The search statistics of the other nodes (most
of a grown FDT: nodes the extraction did not keep, sigma_hat of feature nodes not taken) are only
needed to keep learning. ``serving_fdt`` keeps:

- the data nodes of the extracted DTs: their splits keep their whole child block (routing
  indexes it by category code);
- the interaction candidates (s > lambda), and the path up to n_r of every kept node;

and renumbers them in their old order (blocks stay contiguous). The extraction (best feature node
per data node, L*) is stored with them, since it cannot be recomputed without the pruned nodes.
"""

from __future__ import annotations

import numpy as np

from online.interactions.extraction import _ranges
from online.interactions.fdt import FDT, Table


def serving_fdt(fdt: FDT, best_f: np.ndarray, loss_d: np.ndarray, lambda_: float):
    """(FDT restricted to what serving reads, best_f and loss_d renumbered for it)."""
    D, F = fdt.d, fdt.f
    n = D.n
    # the extracted DTs' splits, from n_r down: their child blocks are kept whole (routing
    # indexes them by category code)
    whole = np.zeros(F.n, dtype=bool)
    frontier = fdt.roots.astype(np.int64)
    while frontier.size:
        split = best_f[frontier]
        split = split[split >= 0]
        whole[split] = True
        frontier, _ = _ranges(F.cstart[split], F.ccount[split])
    fids = np.flatnonzero(whole)
    keep_d = np.zeros(n, dtype=bool)
    keep_d[fdt.roots] = True
    keep_d[_ranges(F.cstart[fids], F.ccount[fids])[0]] = True
    # B.4's candidates, and every kept node's ancestors (their names and supports are paths)
    keep_d |= (D.depth[:n] >= 1) & (D.s[:n] > lambda_) & (D.V[:n] > 1)
    keep_f = whole.copy()
    frontier = np.flatnonzero(keep_d)
    while frontier.size:
        up_f = D.parent[frontier]
        up_f = np.unique(up_f[up_f >= 0])
        keep_f[up_f] = True
        up_d = F.parent[up_f]
        frontier = up_d[~keep_d[up_d]]
        keep_d[frontier] = True
    dids, fids = np.flatnonzero(keep_d), np.flatnonzero(keep_f)
    new_d = np.full(n, -1, dtype=np.int64)
    new_d[dids] = np.arange(dids.size)
    new_f = np.full(F.n, -1, dtype=np.int64)
    new_f[fids] = np.arange(fids.size)

    out = FDT()
    out.d = Table(D._columns, capacity=max(dids.size, 1))
    out.f = Table(F._columns, capacity=max(fids.size, 1))
    out.d.n, out.f.n = dids.size, fids.size
    for name in D._columns:
        getattr(out.d, name)[: dids.size] = getattr(D, name)[dids]
    for name in F._columns:
        getattr(out.f, name)[: fids.size] = getattr(F, name)[fids]
    parent = D.parent[dids]
    out.d.parent[: dids.size] = np.where(parent >= 0, new_f[np.maximum(parent, 0)], -1)
    out.d.fstart[: dids.size] = -1  # the feature blocks are not kept whole: no search
    out.d.fcount[: dids.size] = 0
    out.f.parent[: fids.size] = new_d[F.parent[fids]]
    # whole blocks stay contiguous (kept in their old order); partial ones cannot route
    out.f.cstart[: fids.size] = np.where(whole[fids], new_d[F.cstart[fids]], -1)
    out.f.ccount[: fids.size] = np.where(whole[fids], F.ccount[fids], 0)
    out.roots = new_d[fdt.roots]
    out.root_fields = fdt.root_fields.copy()
    best = best_f[dids]
    routed = (best >= 0) & whole[np.maximum(best, 0)]  # off the DTs, a split is never read
    kept_best = np.where(routed, new_f[np.maximum(best, 0)], -1)
    return out, kept_best, loss_d[dids].copy()
