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
- Out-of-bag scores (a tree's all-zero score row = no vote, :mod:`online.pruning.voting`):
  reduce-error takes the error over the samples the sub-ensemble votes on; Kappa compares two
  trees on the samples both vote on (chance agreement from each tree's own class frequencies);
  boosting-based takes each tree's weighted error over the samples it votes on and reweights
  only those (their total weight unchanged before the renormalisation).
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

from online.pruning.voting import covered, encode, votes

__all__ = ["METHODS", "boosting_based", "kappa_pruning", "random_k", "reduce_error"]


def _labels(predictions, y):
    """(codes, label codes, y codes, n_classes, mask of the samples each tree votes on)."""
    codes, classes = encode(predictions, y)
    y = np.asarray(y)
    if codes.ndim == 3:
        y_codes = y.astype(np.int64)
        codes_l = codes.argmax(axis=2)
        mask = covered(codes)  # out-of-bag scores: zero rows do not vote
    else:
        y_codes = np.searchsorted(classes, y)
        codes_l = codes
        mask = np.ones(codes.shape, dtype=bool)
    return codes, codes_l, y_codes, len(classes), mask


def random_k(predictions, y, k, random_state=None) -> np.ndarray:
    """``k`` trees uniformly at random."""
    T = np.asarray(predictions).shape[0]
    return check_random_state(random_state).choice(T, size=k, replace=False)


def kappa_pruning(predictions, y, k, random_state=None) -> np.ndarray:
    """Kappa pruning: the least-agreeing pairs first (Margineantu & Dietterich 1997)."""
    _, codes, _, K, mask = _labels(predictions, y)
    T, m = codes.shape
    onehot = np.zeros((T, m * K))
    onehot[
        np.repeat(np.arange(T), m),
        (np.arange(m) * K)[None, :].repeat(T, 0).ravel() + codes.ravel(),
    ] = mask.ravel()
    both = mask.astype(np.float64) @ mask.T  # samples both trees vote on
    theta1 = onehot @ onehot.T / np.maximum(both, 1)  # observed agreement
    freq = np.stack(
        [np.bincount(c[v], minlength=K) / max(v.sum(), 1) for c, v in zip(codes, mask)]
    )
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

    codes, _, y_codes, K, _ = _labels(predictions, y)
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
    _, codes, y_codes, _, mask = _labels(predictions, y)
    T, m = codes.shape
    wrong = (codes != y_codes[None, :]) & mask
    w = np.full(m, 1.0 / m)
    chosen: list[int] = []
    taken = np.zeros(T, dtype=bool)
    for _ in range(k):
        with np.errstate(invalid="ignore", divide="ignore"):
            eps = (wrong @ w) / (mask @ w)  # weighted error on the samples the tree votes on
        eps[taken | ~np.isfinite(eps)] = np.inf
        t = int(np.argmin(eps))
        chosen.append(t)
        taken[t] = True
        e = float(eps[t])
        if e <= 0.0 or e >= 0.5:
            w = np.full(m, 1.0 / m)
        else:  # AdaBoost reweighting: misclassified examples carry half the weight
            share = mask[t] @ w  # (out-of-bag) the samples tree t votes on keep their mass
            w = np.where(
                mask[t], np.where(wrong[t], w / (2 * e), w / (2 * (1 - e))) * share, w
            )
            w = w / w.sum()
    return np.array(chosen, dtype=np.int64)


#: option string -> method, for the benchmark and the pruning job
METHODS = {
    "random": random_k,
    "kappa": kappa_pruning,
    "reduce_error": reduce_error,
    "boosting": boosting_based,
}
