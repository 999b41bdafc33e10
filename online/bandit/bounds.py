"""The elimination thresholds of Bandit Forest, eqs. (1)-(4) of Féraud et al. (2016).

Each function returns the right-hand side of one inequality: a variable (or an action) is
eliminated when its estimated gap to the best one, plus epsilon, reaches that value.

>>> round(variable_radius(t=100, K=2, M=10, delta=0.05), 4)         # eq. (1)
1.152
>>> round(variable_radius(t=100, K=2, M=10, delta=0.05, D=3, L=5), 4)  # eq. (3)
1.2425
>>> round(2 * action_radius(t=100, K=2, delta=0.05), 4)               # eq. (2)
0.5345
>>> round(2 * action_radius(t=100, K=2, delta=0.05, L=5), 4)          # eq. (4)
0.5638
"""

from __future__ import annotations

import math

from numba import njit

__all__ = ["variable_radius", "action_radius"]


@njit(cache=True)
def variable_radius(t: float, K: int, M: int, delta: float, D: int = 1, L: int = 1) -> float:
    """4 sqrt(log(4 K M D L t^2 / delta) / (2 t)): eq. (3); with D = L = 1 it is eq. (1)."""
    if t <= 0:
        return math.inf
    return 4.0 * math.sqrt(math.log(4.0 * K * M * D * L * t * t / delta) / (2.0 * t))


@njit(cache=True)
def action_radius(t: float, K: int, delta: float, L: int = 1) -> float:
    """sqrt(log(4 K L t^2 / delta) / (2 t)): half the right-hand side of eq. (4) (eq. (2) if L = 1).

    Eq. (4) compares two actions played t times each against 2 * action_radius(t). When the two
    counts differ (random draws instead of round-robin), Bandit Forest uses the sum of the two
    actions' radii, which is exactly eq. (4) when the counts are equal.
    """
    if t <= 0:
        return math.inf
    return math.sqrt(math.log(4.0 * K * L * t * t / delta) / (2.0 * t))
