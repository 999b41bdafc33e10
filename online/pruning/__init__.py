"""Ensemble pruning: MEPSI (Bi, Zhang & Jiang) with tree edit distance, and baselines."""

from online.pruning.baselines import (
    METHODS,
    boosting_based,
    kappa_pruning,
    random_k,
    reduce_error,
)
from online.pruning.mepsi import MEPSI
from online.pruning.ted import ted, ted_cross, ted_matrix, ted_pairs
from online.pruning.trees import (
    Tree,
    forest_oob_predictions,
    forest_predictions,
    from_sklearn_forest,
    from_sklearn_tree,
)
from online.pruning.voting import vote_accuracy

__all__ = [
    "MEPSI",
    "METHODS",
    "Tree",
    "boosting_based",
    "forest_oob_predictions",
    "forest_predictions",
    "from_sklearn_forest",
    "from_sklearn_tree",
    "kappa_pruning",
    "random_k",
    "reduce_error",
    "ted",
    "ted_cross",
    "ted_matrix",
    "ted_pairs",
    "vote_accuracy",
]
