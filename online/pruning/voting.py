"""Majority vote of a sub-ensemble, shared by MEPSI and the baselines.

Predictions are either labels, shape ``(n_trees, n_samples)``, combined by majority vote, or
scores (class probabilities), shape ``(n_trees, n_samples, n_classes)``, combined by their
average and Eq. (1) of MEPSI (argmax over classes). Ties go to the lowest class index (numpy's
``argmax``), so the vote is deterministic.

Out-of-bag scores: a tree whose score row on a sample is all zeros does not vote on it (this is
how :func:`online.pruning.trees.forest_oob_predictions` marks the samples a tree was fitted on).
The error of a sub-ensemble is then taken over the samples at least one of its trees votes on
(the out-of-bag estimate); with no such sample it is 1. Probabilities of a fitted tree always
sum to 1, so ordinary score predictions are unaffected.

>>> import numpy as np
>>> P = np.array([[0, 1, 2], [0, 2, 2], [1, 1, 0]])
>>> codes, classes = encode(P, np.array([0, 1, 2]))
>>> vote(votes(codes, len(classes), [0, 1, 2])).tolist()
[0, 1, 2]
>>> vote_error(codes, np.array([0, 1, 2]), len(classes),
...            [0, 2])   # a 1-1 tie on sample 2 goes to class 0
0.3333...
"""

from __future__ import annotations

import numpy as np

__all__ = ["covered", "covered_error", "encode", "vote", "vote_accuracy", "vote_error", "votes"]


def encode(predictions, y) -> tuple[np.ndarray, np.ndarray]:
    """Map labels (or score arrays) to integer class codes shared by predictions and ``y``.

    Returns ``(codes, classes)``; for scores ``codes`` is the float score array itself and
    ``classes`` is ``arange(n_classes)`` (``y`` must then hold class indices).
    """
    P = np.asarray(predictions)
    y = np.asarray(y)
    if P.ndim == 3:
        if P.shape[1] != len(y):
            raise ValueError(
                "predictions must have shape (n_trees, n_samples, n_classes)"
            )
        return P.astype(np.float64), np.arange(P.shape[2])
    if P.ndim != 2 or P.shape[1] != len(y):
        raise ValueError("predictions must have shape (n_trees, n_samples) matching y")
    classes = np.unique(np.concatenate([P.ravel(), y.ravel()]))
    return np.searchsorted(classes, P), classes


def votes(codes: np.ndarray, n_classes: int, subset) -> np.ndarray:
    """Vote totals ``(n_samples, n_classes)`` of the trees in ``subset``."""
    subset = np.asarray(subset, dtype=np.int64)
    if codes.ndim == 3:
        return codes[subset].sum(axis=0)
    m = codes.shape[1]
    out = np.zeros((m, n_classes))
    for t in subset:
        out[np.arange(m), codes[t]] += 1.0
    return out


def vote(totals: np.ndarray) -> np.ndarray:
    """Eq. (1): the class with the most votes (lowest index on ties)."""
    return totals.argmax(axis=-1)


def vote_error(codes: np.ndarray, y_codes: np.ndarray, n_classes: int, subset) -> float:
    """Empirical 0-1 error of the sub-ensemble's vote (the error term of Eq. (3))."""
    totals = votes(codes, n_classes, subset)
    return float(covered_error(vote(totals) != y_codes, covered(totals)))


def covered(totals: np.ndarray) -> np.ndarray:
    """Samples (last axis but one) on which at least one tree voted."""
    return totals.sum(axis=-1) > 0


def covered_error(wrong: np.ndarray, cover: np.ndarray) -> np.ndarray:
    """Share of wrong votes among covered samples, along the last axis (1 where none is)."""
    n = cover.sum(axis=-1)
    return np.where(n > 0, (wrong & cover).sum(axis=-1) / np.maximum(n, 1), 1.0)


def vote_accuracy(predictions, y, subset) -> float:
    """Accuracy of the vote of ``subset`` on labeled data given as raw labels or scores."""
    codes, classes = encode(predictions, y)
    y = np.asarray(y)
    y_codes = y if codes.ndim == 3 else np.searchsorted(classes, y)
    return 1.0 - vote_error(codes, y_codes, len(classes), subset)
