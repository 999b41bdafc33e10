"""The decision every Grove policy returns: the action, its propensity, every probability.

A service must log the probability of the action it served (its propensity) so that any other
policy can later be learned or evaluated from the same log; ``probabilities`` holds the whole
distribution the action was drawn from.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np

__all__ = ["Decision", "Ranking", "stored_action_id"]


class Ranking(Sequence):
    """(action, probability) pairs, most probable first, kept as the arrays they come from.

    A policy's decision holds its candidates, their probabilities and the ranking order as
    arrays; a caller that writes the ranking out (the service's JSON answer, with 1,000 actions)
    reads those (:attr:`actions`, :attr:`probabilities`) and never makes the pairs, which are
    made on first use by anything else (indexing, iterating, comparing with a list).

    >>> r = Ranking(["a", "b", "c"], np.array([0.2, 0.7, 0.1]), np.array([1, 0, 2]))
    >>> list(r), r == [("b", 0.7), ("a", 0.2), ("c", 0.1)], len(r)
    ([('b', 0.7), ('a', 0.2), ('c', 0.1)], True, 3)
    """

    __slots__ = ("candidates", "order", "_probs", "_pairs")

    def __init__(self, candidates: Sequence, probs: np.ndarray, order: np.ndarray):
        self.candidates = candidates  # in the policy's order
        self.order = order  # ranking position -> index into candidates
        self._probs = probs  # per candidate
        self._pairs: list | None = None

    @property
    def probabilities(self) -> np.ndarray:
        """The probabilities in ranking order (a new float64 array)."""
        return self._probs[self.order]

    def _list(self) -> list[tuple[Hashable, float]]:
        if self._pairs is None:  # zip and map: no Python code per pair
            self._pairs = list(zip(map(self.candidates.__getitem__, self.order.tolist()),
                                   self.probabilities.tolist()))
        return self._pairs

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i):
        return self._list()[i]

    def __iter__(self):
        return iter(self._list())

    def __eq__(self, other) -> bool:
        if isinstance(other, (Ranking, list, tuple)):
            return self._list() == list(other)
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"Ranking({self._list()!r})"


class Decision:
    """What a policy chose for one context.

    ``probability`` is the propensity of ``action`` (what an ad server must log);
    ``probabilities`` gives every candidate action's probability, in ranking order.
    ``explored`` says whether the action was drawn for exploration (else it was exploited).

    ``probabilities`` is built on first use (most callers only log ``action`` and
    ``probability``); a decision is not meant to be changed.
    """

    __slots__ = ("action", "probability", "explored", "_candidates", "_probs", "_order",
                 "_probabilities")

    def __init__(self, action: Hashable, probability: float, probabilities: dict | None = None,
                 explored: bool = False, *, _ranking: tuple | None = None):
        self.action = action
        self.probability = probability
        self.explored = explored
        self._probabilities = probabilities
        # (candidates, probabilities array, ranking order array) to build the dict from
        self._candidates, self._probs, self._order = _ranking or (None, None, None)

    @property
    def probabilities(self) -> dict:
        """Every candidate action's probability, most probable first."""
        if self._probabilities is None:  # the ranking's pairs, in its order
            self._probabilities = dict(self.ranking)
        return self._probabilities

    @property
    def ranking(self) -> Sequence[tuple[Hashable, float]]:
        """(action, probability) pairs, most probable first (a :class:`Ranking` when the policy
        gave its arrays: pairs made on first use)."""
        if self._probabilities is None and self._candidates is not None:
            return Ranking(self._candidates, self._probs, self._order)
        return list(self.probabilities.items())

    def __eq__(self, other):
        if not isinstance(other, Decision):
            return NotImplemented
        return (self.action == other.action and self.probability == other.probability
                and self.explored == other.explored and self.probabilities == other.probabilities)

    __hash__ = None  # like the frozen dataclass it replaces: its dict field is unhashable

    def __repr__(self) -> str:
        return (f"Decision(action={self.action!r}, probability={self.probability!r}, "
                f"probabilities={self.probabilities!r}, explored={self.explored!r})")


def stored_action_id(action):
    """An action id as a state read back from JSON or msgpack gives it: a tuple id comes back
    as a list, which is not hashable; it is a tuple again (at any depth).

    >>> stored_action_id(["ad", [1, 2]]), stored_action_id("ad-1"), stored_action_id(7)
    (('ad', (1, 2)), 'ad-1', 7)
    """
    return tuple(map(stored_action_id, action)) if isinstance(action, list) else action

