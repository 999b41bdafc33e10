"""Baseline ensemble-pruning methods, for the MEPSI benchmark and the pruning job.

Every method takes the trees' predictions on the pruning (labeled) set and returns the indices
of ``k`` trees, in selection order:

- :func:`random_k`: ``k`` trees drawn uniformly without replacement.
- :func:`kappa_pruning`: Margineantu & Dietterich (1997): pairs in increasing order of their
  Cohen's kappa agreement (most diverse first); both members of each pair join until ``k``.
- :func:`reduce_error`: ordered aggregation (Martínez-Muñoz & Suárez 2006; Margineantu &
  Dietterich 1997): start with the most accurate tree, then add the tree whose addition gives
  the lowest majority-vote error.
- :func:`boosting_based`: Martínez-Muñoz & Suárez (2007): order the trees as AdaBoost would pick
  them, each step taking the tree with the lowest weighted error under the current example
  weights, then reweighting.

Choices where the papers are silent or ambiguous
------------------------------------------------
- Ties are broken by the lower tree index; votes by :mod:`online.pruning.voting`.
- Kappa pruning with more than ``k`` trees after the last pair keeps the first ``k`` added.
- Boosting-based: when the chosen tree's weighted error is 0 or at least 0.5 the weights are
  reset to uniform (as in Martínez-Muñoz & Suárez 2007, which otherwise could not continue);
  the selected trees then vote with equal weights (a pruned bagging ensemble).

>>> import numpy as np
>>> y = np.array([0, 0, 1, 1])
>>> P = np.array([[0, 0, 1, 0], [0, 1, 1, 1], [1, 0, 1, 1], [0, 0, 0, 0]])
>>> reduce_error(P, y, 3).tolist()
[0, 1, 2]
>>> sorted(kappa_pruning(P, y, 2).tolist())
[1, 2]
>>> boosting_based(P, y, 3).tolist()
[0, 1, 2]
>>> len(random_k(P, y, 2, random_state=0))
2
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from online.pruning.voting import encode, votes

__all__ = ["METHODS", "boosting_based", "kappa_pruning", "random_k", "reduce_error"]


def _labels(predictions, y):
    codes, classes = encode(predictions, y)
    y = np.asarray(y)
    if codes.ndim == 3:
        y_codes = y.astype(np.int64)
        codes_l = codes.argmax(axis=2)
    else:
        y_codes = np.searchsorted(classes, y)
        codes_l = codes
    return codes, codes_l, y_codes, len(classes)


def random_k(predictions, y, k, random_state=None) -> np.ndarray:
    """``k`` trees uniformly at random."""
    T = np.asarray(predictions).shape[0]
    return check_random_state(random_state).choice(T, size=k, replace=False)


def kappa_pruning(predictions, y, k, random_state=None) -> np.ndarray:
    """Kappa pruning: the least-agreeing pairs first (Margineantu & Dietterich 1997)."""
    _, codes, _, K = _labels(predictions, y)
    T, m = codes.shape
    onehot = np.zeros((T, m * K))
    onehot[
        np.repeat(np.arange(T), m),
        (np.arange(m) * K)[None, :].repeat(T, 0).ravel() + codes.ravel(),
    ] = 1.0
    theta1 = onehot @ onehot.T / m  # observed agreement
    freq = np.stack([np.bincount(c, minlength=K) / m for c in codes])
    theta2 = freq @ freq.T  # agreement by chance
    with np.errstate(divide="ignore", invalid="ignore"):
        kappa = np.where(theta2 < 1, (theta1 - theta2) / (1 - theta2), 1.0)
    iu = np.triu_indices(T, 1)
    order = np.argsort(kappa[iu], kind="stable")
    chosen: list[int] = []
    for p in order:
        for t in (int(iu[0][p]), int(iu[1][p])):
            if t not in chosen:
                chosen.append(t)
        if len(chosen) >= k:
            break
    return np.array(chosen[:k], dtype=np.int64)


def reduce_error(predictions, y, k, random_state=None) -> np.ndarray:
    """Ordered aggregation by reduce-error (Martínez-Muñoz & Suárez 2006)."""
    from online.pruning.mepsi import _candidate_errors

    codes, _, y_codes, K = _labels(predictions, y)
    T = codes.shape[0]
    chosen: list[int] = []
    total = np.zeros((codes.shape[1], K))
    taken = np.zeros(T, dtype=bool)
    for _ in range(k):
        err = _candidate_errors(codes, y_codes, total)
        err[taken] = np.inf
        t = int(np.argmin(err))
        chosen.append(t)
        taken[t] = True
        total = total + votes(codes, K, [t])
    return np.array(chosen, dtype=np.int64)


def boosting_based(predictions, y, k, random_state=None) -> np.ndarray:
    """Boosting-based ordering (Martínez-Muñoz & Suárez 2007)."""
    _, codes, y_codes, _ = _labels(predictions, y)
    T, m = codes.shape
    wrong = codes != y_codes[None, :]
    w = np.full(m, 1.0 / m)
    chosen: list[int] = []
    taken = np.zeros(T, dtype=bool)
    for _ in range(k):
        eps = wrong @ w
        eps[taken] = np.inf
        t = int(np.argmin(eps))
        chosen.append(t)
        taken[t] = True
        e = float(eps[t])
        if e <= 0.0 or e >= 0.5:
            w = np.full(m, 1.0 / m)
        else:  # AdaBoost reweighting: misclassified examples carry half the weight
            w = np.where(wrong[t], w / (2 * e), w / (2 * (1 - e)))
    return np.array(chosen, dtype=np.int64)


#: option string -> method, for the benchmark and the pruning job
METHODS = {
    "random": random_k,
    "kappa": kappa_pruning,
    "reduce_error": reduce_error,
    "boosting": boosting_based,
}
