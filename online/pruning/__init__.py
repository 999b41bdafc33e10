"""Ensemble pruning: MEPSI (Bi, Zhang & Jiang) with tree edit distance, and baselines.

Where the paper is in the code (paper: ``/work/shared/papers/mepsi.txt``):

================================================  ===============================================
paper                                             code
================================================  ===============================================
Eq. (1): the majority vote                        ``voting.vote``, ``voting.votes``
Eq. (3) / Eq. (6): error - lambda * structure     ``mepsi.MEPSI.fit``
the empirical error term of Eq. (3)               ``voting.vote_error``, ``mepsi._pair_errors``,
                                                  ``mepsi._candidate_errors``
Definition 3.2: tree edit distance (internal      ``ted.ted`` (numpy reference), ``ted_compiled``
nodes; INSERT, REMOVE, UPDATE)                    (compiled), ``ted_avx512._zs16`` (AVX-512)
Definition 3.3: ESM(h, G) = NC(h) - min TED       ``mepsi.esm``, ``mepsi.MEPSI.fit``
Algorithm 1, lines 3-12: the best pair            ``mepsi.MEPSI.fit`` (with ``_pair_errors``)
Algorithm 1, lines 13-25: greedy additions        ``mepsi.MEPSI.fit`` (with ``_candidate_errors``)
Appendix C.1: lambda = C / ESM_avg                ``mepsi._esm_avg_term``, ``_esm_avg_subset``
decision trees as MEPSI sees them                 ``trees.Tree``, ``trees.from_sklearn_tree``,
                                                  ``bandit_forest.bandit_forest_trees``
baselines (random, reduce-error, kappa, boosting) ``baselines.METHODS``
================================================  ===============================================
"""

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
