"""The MEPSI paper's pruning protocol, in one place for the pruning job and the benchmarks.

One forest with the paper's settings (Table S1: 200 trees, entropy, sqrt features, bootstrap,
``max_samples`` 1.0, Table S1's ``ccp_alpha``), the trees' predictions on the set the error
term is measured on (``prune_on``: the training rows, as the paper says, or each tree's
out-of-bag rows, which unpruned trees need), labels turned into the class codes a score vote
uses, and the baselines of Table 1 (random-k, Kappa, ordered aggregation reduce-error and
boosting-based) run on that set with their time. The MEPSI fit itself is one call
(``MEPSI(...).fit(trees, P, y)``); its callers choose C and reuse TED matrices as they need.

Used by :mod:`service.jobs.pruning` (uploaded labeled data) and ``bench/mepsi/`` (Table 1, the C
studies, the timing and same-selection runs).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(120, 4)); y = np.where(X[:, 0] + X[:, 1] > 0, "yes", "no")
>>> rf = paper_forest(n_trees=10, ccp_alpha=0.0, random_state=0).fit(X[:90], y[:90])
>>> P, codes = pruning_set(rf, X[:90], y[:90], prune_on="oob")
>>> P.shape, rf.classes_.tolist(), bool((rf.classes_[codes] == y[:90]).all())
((10, 90, 2), ['no', 'yes'], True)
>>> picks = run_baselines(P, codes, k=3, random_state=0)
>>> sorted(picks), len(picks["reduce_error"].trees)
(['boosting', 'kappa', 'random', 'reduce_error'], 3)
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from online.pruning.baselines import METHODS
from online.pruning.trees import forest_oob_predictions, forest_predictions

__all__ = ["BASELINES", "Picked", "class_codes", "held_out_set", "paper_forest", "pruning_set",
           "run_baselines"]

#: Table 1's baselines, in its column order (keys of :data:`online.pruning.baselines.METHODS`)
BASELINES = ("random", "kappa", "reduce_error", "boosting")


def paper_forest(n_trees: int = 200, ccp_alpha: float = 0.2, random_state: int = 0):
    """An unfitted scikit-learn random forest with the paper's settings (Table S1); one thread,
    so that timings measure the pruning and several runs can share the cores."""
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(
        n_estimators=n_trees,
        criterion="entropy",
        max_features="sqrt",
        bootstrap=True,
        max_samples=None,
        ccp_alpha=ccp_alpha,
        random_state=random_state,
        n_jobs=1,
    )


def class_codes(forest, y) -> np.ndarray:
    """Positions of the labels ``y`` in ``forest.classes_`` (the score columns), -1 for a class
    the forest never saw (a test row of it is then never predicted right)."""
    y = np.asarray(y)
    known = np.isin(y, forest.classes_)
    return np.where(known, np.searchsorted(forest.classes_, y), -1)


def pruning_set(forest, X, y, *, prune_on: str = "train", vote: str = "soft"):
    """``(P, labels)`` the error term is measured on, for MEPSI and the baselines alike.

    ``prune_on="train"``: the trees' predictions on ``X`` (the rows the forest was fitted on, as
    in the paper; any other labeled rows work too); ``"oob"``: each tree's class probabilities on
    its out-of-bag rows of ``X``, which must then be the forest's training rows in order.
    ``vote="soft"``: class probabilities and labels as :func:`class_codes`; ``"hard"``: predicted
    labels and ``y`` as it is (``"oob"`` needs the soft vote: zero rows mark in-bag samples).
    """
    if prune_on not in ("train", "oob"):
        raise ValueError(f"prune_on must be 'train' or 'oob', not {prune_on!r}")
    if vote not in ("soft", "hard"):
        raise ValueError(f"vote must be 'soft' or 'hard', not {vote!r}")
    soft = vote == "soft"
    if prune_on == "oob":
        if not soft:
            raise ValueError("prune_on='oob' needs vote='soft' (zero rows mark in-bag samples)")
        P = forest_oob_predictions(forest, X)
    else:
        P = forest_predictions(forest, X, scores=soft)
    return P, (class_codes(forest, y) if soft else np.asarray(y))


def held_out_set(forest, X, y, *, vote: str = "soft"):
    """``(P, labels)`` to score a selection on held-out rows (:func:`vote_accuracy`)."""
    soft = vote == "soft"
    P = forest_predictions(forest, X, scores=soft)
    return P, (class_codes(forest, y) if soft else np.asarray(y))


@dataclass(frozen=True)
class Picked:
    """One baseline's selection: the kept trees in the order chosen, wall and CPU seconds."""

    trees: np.ndarray
    seconds: float
    cpu_seconds: float


def run_baselines(P, y, k: int, random_state: int = 0, names=BASELINES) -> dict[str, Picked]:
    """Each baseline of ``names`` keeps ``k`` trees on ``(P, y)`` (from :func:`pruning_set`)."""
    out = {}
    for name in names:
        t0, c0 = time.perf_counter(), time.process_time()
        trees = METHODS[name](P, y, k, random_state=random_state)
        out[name] = Picked(trees, time.perf_counter() - t0, time.process_time() - c0)
    return out
