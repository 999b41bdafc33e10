"""The decision every Grove policy returns: the action, its propensity, every probability.

A service must log the probability of the action it served (its propensity) so that any other
policy can later be learned or evaluated from the same log; ``probabilities`` holds the whole
distribution the action was drawn from.
"""

from __future__ import annotations

from collections.abc import Hashable

__all__ = ["Decision"]


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
        if self._probabilities is None:
            candidates, probs = self._candidates, self._probs.tolist()
            self._probabilities = {candidates[i]: probs[i] for i in self._order.tolist()}
        return self._probabilities

    @property
    def ranking(self) -> list[tuple[Hashable, float]]:
        """(action, probability) pairs, most probable first."""
        if self._probabilities is None:  # from the arrays, without the dict (no Python loop)
            order = self._order.tolist()
            return list(zip(map(self._candidates.__getitem__, order),
                            self._probs[self._order].tolist()))
        return list(self._probabilities.items())

    def __eq__(self, other):
        if not isinstance(other, Decision):
            return NotImplemented
        return (self.action == other.action and self.probability == other.probability
                and self.explored == other.explored and self.probabilities == other.probabilities)

    __hash__ = None  # like the frozen dataclass it replaces: its dict field is unhashable

    def __repr__(self) -> str:
        return (f"Decision(action={self.action!r}, probability={self.probability!r}, "
                f"probabilities={self.probabilities!r}, explored={self.explored!r})")
