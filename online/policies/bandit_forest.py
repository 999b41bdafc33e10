"""Bandit Forest as a hosted policy: :class:`online.BanditForest` plus :meth:`probabilities`."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from online.bandit.decide_kernels import decide_probabilities
from online.bandit.forest import BanditForest

__all__ = ["BanditForestPolicy"]


class BanditForestPolicy(BanditForest):
    """:class:`~online.bandit.forest.BanditForest` with the distribution of :meth:`decide`
    readable without drawing (what an evaluator of candidate policies asks). Decisions, learning
    and the state (format ``grove.bandit-forest``) are BanditForest's, unchanged.

    >>> forest = BanditForestPolicy(n_trees=5, warmup=10, seed=0)
    >>> for a in ["a", "b"]:
    ...     forest.add_action(a)
    >>> forest.probabilities({"site": "x"})
    {'a': 0.5, 'b': 0.5}
    """

    def probabilities(self, x: dict, actions: Iterable | None = None,
                      excluded: Iterable = ()) -> dict:
        """The distribution :meth:`decide` draws from, most probable first, without drawing.

        Changes nothing (not even the random generator).
        """
        xb, _ = self._encoder.encode_known(x)
        candidates, known = self._candidates(actions, excluded)
        n = len(candidates)
        probs, drawn, order = np.empty(n), np.empty(n, np.int64), np.empty(n, np.int64)
        paths = np.empty(len(self._roots), np.int64)
        decide_probabilities(xb, self._kernel_forest(), known, self.voting == "all-finished",
                             probs, drawn, order, paths)
        return {candidates[i]: float(probs[i]) for i in order.tolist()}
