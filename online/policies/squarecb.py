"""SquareCB's inverse-gap weighting (Foster & Rakhlin, 2020), the exploration rule of the
tree-ensemble policy.

Given the oracle's predicted rewards ``s`` of the K candidate actions and the best one ``b``,
action ``a != b`` gets ``p_a = 1 / (K + gamma (s_b - s_a))`` and ``b`` gets the rest (Foster &
Rakhlin, Algorithm 1, written with rewards instead of losses). Every probability is exact and
bounded: ``1 / (K + gamma * (max s - min s)) <= p_a <= 1/K`` for ``a != b``, ``p_b >= 1/K``.

An action the oracle has no data for (``unseen``) is given no gap: ``1/K``, like an action tied
with the best, so that a new action is tried at once instead of waiting for a refit.
"""

from __future__ import annotations

import math

import numba

__all__ = ["gamma", "inverse_gap_weights"]


def gamma(scale: float, n_actions: int, n_events: int) -> float:
    """The learning rate gamma = scale * sqrt(K n) (Foster & Rakhlin's sqrt(K T / log) with
    the constants in ``scale``); ``n`` is the number of events the oracle learns from."""
    return scale * math.sqrt(n_actions * max(n_events, 1))


@numba.njit(cache=True, nogil=True)
def inverse_gap_weights(scores, unseen, gamma, out):
    """Write the IGW probabilities of ``scores`` into ``out``; return the best index.

    >>> import numpy as np
    >>> p = np.empty(3)
    >>> inverse_gap_weights(np.array([0.5, 0.9, 0.1]), np.zeros(3, np.bool_), 10.0, p)
    1
    >>> p.round(4).tolist()  # 1/(3 + 4), the rest, 1/(3 + 8)
    [0.1429, 0.7662, 0.0909]
    """
    K = scores.shape[0]
    best = -1
    for j in range(K):
        if not unseen[j] and (best < 0 or scores[j] > scores[best]):
            best = j
    if best < 0:
        for j in range(K):
            out[j] = 1.0 / K
        return 0
    total = 0.0
    for j in range(K):
        if j != best:
            gap = 0.0 if unseen[j] else scores[best] - scores[j]
            out[j] = 1.0 / (K + gamma * gap)
            total += out[j]
    out[best] = 1.0 - total
    return best
