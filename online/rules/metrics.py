"""Fidelity of a student to its teacher (sec. 4.3): pairwise order agreement.

Fidelity = 1/(N(N-1)) sum_{i != j} I(y_i > y_j) XNOR I(y~_i > y~_j). With
P_y = #{(i,j): y_i > y_j}, P_s the same for y~, and C the pairs ordered strictly the same way
by both, the sum is N(N-1) - P_y - P_s + 2C; C is counted in O(N log N) with a Fenwick tree.
(A pair tied in one score and not in the other counts 1/2, as the formula implies.)
"""

from __future__ import annotations

import numpy as np


def _strict_pairs(v: np.ndarray) -> int:
    _, counts = np.unique(v, return_counts=True)
    n = len(v)
    return (n * n - int((counts.astype(np.int64) ** 2).sum())) // 2


def concordant_pairs(y: np.ndarray, s: np.ndarray) -> int:
    """#{(i, j): y_i > y_j and s_i > s_j}."""
    _, s_rank = np.unique(s, return_inverse=True)
    s_rank = s_rank.astype(np.int64) + 1
    size = int(s_rank.max()) + 1
    tree = [0] * (size + 1)
    order = np.argsort(y, kind="stable")
    ys, rs = y[order], s_rank[order].tolist()
    bounds = np.flatnonzero(np.r_[True, ys[1:] != ys[:-1], True])
    total = 0
    for g in range(len(bounds) - 1):
        lo, hi = int(bounds[g]), int(bounds[g + 1])
        for r in rs[lo:hi]:  # entries with smaller y and smaller s
            i = r - 1
            while i > 0:
                total += tree[i]
                i -= i & -i
        for r in rs[lo:hi]:
            i = r
            while i <= size:
                tree[i] += 1
                i += i & -i
    return total


def fidelity(y, y_student) -> float:
    """Pairwise agreement of sec. 4.3 between teacher scores ``y`` and student scores.

    >>> fidelity([1, 2, 3], [10, 20, 30]), fidelity([1, 2, 3], [3, 2, 1])
    (1.0, 0.0)
    >>> fidelity([1, 2], [5, 5])  # a tie in the student counts one half
    0.5
    """
    y = np.asarray(y, dtype=np.float64)
    s = np.asarray(y_student, dtype=np.float64)
    n = len(y)
    if n < 2:
        raise ValueError("fidelity needs at least two entities")
    agree = n * (n - 1) - _strict_pairs(y) - _strict_pairs(s) + 2 * concordant_pairs(y, s)
    return agree / (n * (n - 1))
