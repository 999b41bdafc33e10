"""The tree-ensemble policy's distribution for one context in one compiled call.

A decision among the candidates is the trees' sums (:func:`~online.policies.tree_arrays.
score_models`), the linear base's scores with its optimism bonus
(:func:`~online.policies.ridge.upper_scores`), the trees weighed onto them and SquareCB's
inverse-gap weights (:func:`~online.policies.squarecb.inverse_gap_weights`). As separate calls
from Python these took ~5 us of a ~45 us decision (Letter, 26 actions) in the glue between
them: four dispatches, four arrays made, numpy's two passes for the blend. Here they are one
call, on the same numbers in the same order: the probabilities are those of the separate calls,
bit for bit (``tests/online/policies/test_trees_decide.py``). The scores alone
(:func:`weighed_scores`) are what every other path of the policy reads too (its ``scores``,
the evaluators' rows): one definition of what IGW weighs.
"""

from __future__ import annotations

import numba
import numpy as np

from online.policies.ridge import linear_scores, upper_scores
from online.policies.squarecb import inverse_gap_weights
from online.policies.tree_arrays import score_models

__all__ = ["candidate_distribution", "weighed_scores"]


@numba.njit(cache=True, nogil=True)
def weighed_scores(x, candidates, linear, bonus, sums, out):
    """``out[j]``: candidate j's linear score at the encoded context ``x``, plus ``bonus``
    times its width (when ``bonus`` is not 0 and widths are kept), plus its trees' sum
    ``sums[j]`` times their weight. ``candidates``, ``linear``: as
    :func:`candidate_distribution`'s."""
    _, linear_models, blend, _ = candidates
    coding, weights, pairs, start, diagonal = linear
    if bonus != 0.0 and pairs.shape[0] > 0:
        upper_scores(x, linear_models, coding, weights, pairs, start, diagonal, bonus, out)
    else:
        linear_scores(x, linear_models, coding, weights, out)
    for j in range(out.shape[0]):
        out[j] += sums[j] * blend[j]


@numba.njit(cache=True, nogil=True)
def candidate_distribution(x, candidates, ensemble, linear, bonus, gamma, new_value, sums,
                           probs):
    """Write into ``probs`` the distribution over the candidates at the encoded context ``x``,
    and into ``sums`` their trees' sums (what learning the decided event reads back).

    ``candidates``: (tree model, linear model, trees' weight, unseen) per candidate (-1: no
    model); ``ensemble``: ``CompiledEnsemble.kernel_arrays``; ``linear``:
    ``RidgeBase.kernel_arrays``; ``bonus``: the weight of the linear base's widths (0: none);
    ``new_value``: the context holds a category value newer than the trees, which then add
    nothing (``TreeEnsemblePolicy._new_values``)."""
    buf, index = ensemble
    score_models(x, candidates[0], buf, index, sums)
    if new_value:
        sums[:] = 0.0
    scores = np.empty(sums.shape[0])
    weighed_scores(x, candidates, linear, bonus, sums, scores)
    inverse_gap_weights(scores, candidates[3], gamma, probs)
