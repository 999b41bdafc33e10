"""The estimated screening criterion of MCTS-IS (Theorem 4, eqs. (5)-(6), sec. 3).

Eq. (5) prunes a data node n^d when

    E[y 1{(x, y) in S_{n^d}}] + c_F sqrt(P((x, y) in S_{n^d})) < lambda,

with P(S_{n^d}) = prod of P(x_i = j | S_{pa(pa(n_{i,j}^d))}) along the path (eq. 6) and
E[y 1_S] = E[y | S] P(S). Sec. 3 replaces the unknowns by p_hat and mu_hat. The paper prints

    s_{n^d} = prod p_hat + c_F sqrt(mu_hat prod p_hat)

which swaps mu_hat between the two terms; we use the reading that estimates the left-hand side
of eq. (5) term by term (the one Theorem 4 is stated with):

    s_{n^d} = mu_hat_{n^d} prod p_hat + c_F sqrt(prod p_hat).

Line 25 of Algorithm 1 (s = p_yb mu_hat + c_F sqrt(p_b p_hat)) is the same formula with
p_yb = p_b p_hat = prod p_hat.

A feature node n^f is excluded from the selectable set l(pa(n^f)) when *all* its child data nodes
have s <= lambda (Theorem 4; eq. (1)'s second set keeps every sibling of a kept leaf).
"""

from __future__ import annotations

import numpy as np


def screening_statistic(mu_hat, support, c_f: float):
    """s_{n^d} = mu_hat * P_hat(S) + c_F * sqrt(P_hat(S)): the estimated left side of eq. (5).

    >>> round(float(screening_statistic(0.5, 0.04, c_f=0.05)), 4)
    0.03
    """
    support = np.asarray(support, dtype=np.float64)
    return np.asarray(mu_hat) * support + c_f * np.sqrt(support)


def is_excluded(n_above) -> np.ndarray:
    """A feature node is outside l(pa(n^f)) when none of its children has s > lambda."""
    return np.asarray(n_above) == 0
