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
    and the state (format ``grove.bandit-forest``) are BanditForest's, unchanged. It takes the
    calls of the other hosted policies (``online.policies.base.Policy``): the actions' own
    features and a ``learn_many`` event's extra items are accepted and not read (the paper's
    forest learns one model per action id).

    >>> forest = BanditForestPolicy(n_trees=5, warmup=10, seed=0)
    >>> for a in ["a", "b"]:
    ...     forest.add_action(a)
    >>> forest.probabilities({"site": "x"})
    {'a': 0.5, 'b': 0.5}
    """

    def decide(self, x: dict, actions: Iterable | None = None, excluded: Iterable = (),
               action_features=None):
        return super().decide(x, actions, excluded)

    def learn_many(self, events: Iterable[tuple]) -> int:
        return super().learn_many(event[:4] for event in events)

    def probabilities(self, x: dict, actions: Iterable | None = None,
                      excluded: Iterable = (), action_features=None) -> dict:
        """The distribution :meth:`decide` draws from, most probable first, without drawing.

        Changes nothing (not even the random generator).
        """
        candidates, probs, order = self._distribution_of(x, actions, excluded)
        return {candidates[i]: float(probs[i]) for i in order.tolist()}

    def check_context(self, x: dict) -> None:
        """Raise what learning ``x`` would raise for its values, changing nothing (see
        ``online.policies.base.Policy.check_context``)."""
        self._encoder.encode_known(x)  # (a non-dict context: its ValueError too)

    def _decide_distribution(self, x: dict, actions: Iterable | None, excluded: Iterable,
                             checked: bool = True, action_features=None
                             ) -> tuple[list, np.ndarray]:
        """The candidates and their probabilities, in candidate order (the interface of
        ``online.policies.base.Policy`` that ``AutoPolicy`` serves a candidate through; the
        kernel's probabilities always sum to 1, so ``checked`` changes nothing)."""
        return self._distribution_of(x, actions, excluded)[:2]

    def _distribution_of(self, x, actions, excluded) -> tuple[list, np.ndarray, np.ndarray]:
        xb, _ = self._encoder.encode_known(x)
        candidates, known = self._candidates(actions, excluded)
        n = len(candidates)
        probs, drawn, order = np.empty(n), np.empty(n, np.int64), np.empty(n, np.int64)
        paths = np.empty(len(self._roots), np.int64)
        decide_probabilities(xb, self._kernel_forest(), known, self.voting == "all-finished",
                             probs, drawn, order, paths)
        return candidates, probs, order

    def distribution_rows(self, xs: list[dict], actions=None) -> tuple[list, np.ndarray]:
        """The inventory's actions (or ``actions``), and for each context of ``xs`` the
        distribution :meth:`decide` would draw from over them (row i: ``xs[i]``; the values of
        :meth:`probabilities`, in that order).

        For an evaluator (``AutoPolicy``) that needs many rows at once: the forest's arrays and
        the candidates are read once, no dict per row."""
        candidates, known = self._candidates(actions, ())
        n = len(candidates)
        probs = np.empty((len(xs), n))
        drawn, order = np.empty(n, np.int64), np.empty(n, np.int64)
        paths = np.empty(len(self._roots), np.int64)
        forest, all_finished = self._kernel_forest(), self.voting == "all-finished"
        for i, x in enumerate(xs):
            xb, _ = self._encoder.encode_known(x)
            decide_probabilities(xb, forest, known, all_finished, probs[i], drawn, order, paths)
        return candidates, probs
