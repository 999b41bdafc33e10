"""Model kinds an app can host: how to build, serve, train and store each one.

``MODEL_KINDS`` maps the ``policy.kind`` of ``POST /apps`` to a :class:`ModelKind`; the API and
the trainer only go through this table, so a new kind (MCTS-IS, ...) is one more entry, never an
if/else in a route. Learners are imported lazily: the service starts without loading every
algorithm, and a kind whose learner is missing fails with a clear error when used.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any



@dataclass(frozen=True)
class Choice:
    """A decision as the API returns it."""

    action: str
    probability: float
    ranking: list[tuple[str, float]]


@dataclass(frozen=True)
class ModelKind:
    """What the service needs from a learner; every callable takes the learner first."""

    name: str
    learner: str  # "module:Class", imported on first use
    build: Callable[[type, dict[str, Any], list[str]], Any]
    decide: Callable[[Any, dict[str, Any], list[str], list[str]], Choice]
    learn: Callable[[Any, dict[str, Any], str, float, float], None]
    change_actions: Callable[[Any, list[str], list[str]], None]  # learner, added, removed
    #: state for serving only (decide, not learn), if the learner has a smaller one
    dump_serving: Callable[[Any], dict] | None = None
    #: how an API process turns a serving state into its own learner (default: ``load``)
    load_serving: Callable[[type, dict], Any] | None = None

    @property
    def cls(self) -> type:
        module, _, attr = self.learner.partition(":")
        return getattr(importlib.import_module(module), attr)

    def new(self, params: dict[str, Any], actions: list[str]) -> Any:
        """A fresh learner; bad ``params`` raise ``TypeError``/``ValueError``."""
        return self.build(self.cls, params, actions)

    def load(self, state: dict) -> Any:
        return self.cls.from_state(state)

    def load_for_serving(self, state: dict) -> Any:
        """The learner an API process decides with."""
        return self.load_serving(self.cls, state) if self.load_serving else self.load(state)

    @staticmethod
    def dump(learner: Any) -> dict:
        """Everything the trainer needs to resume learning."""
        return learner.to_state()

    def dump_for_serving(self, learner: Any) -> dict:
        """What API processes load to decide (the full state if the kind has nothing smaller)."""
        return (self.dump_serving or self.dump)(learner)


# -- Bandit Forest (online.BanditForest) ------------------------------------------------------
def _forest_build(cls: type, params: dict[str, Any], actions: list[str]) -> Any:
    policy = cls(**params)
    for action in actions:
        policy.add_action(action)
    return policy


def _forest_decide(policy: Any, context: dict, actions: list[str], excluded: list[str]) -> Choice:
    decision = policy.decide(context, actions=actions, excluded=tuple(excluded))
    return Choice(
        action=decision.action,
        probability=float(decision.probability),
        ranking=[(a, float(p)) for a, p in decision.ranking],
    )


def _forest_learn(policy: Any, context: dict, action: str, reward: float, probability: float):
    # an action the app does not list (offered by the request) is added by the forest itself
    policy.learn_one(context, action, reward, probability)


def _forest_load_serving(cls: type, state: dict) -> Any:
    """Restore a serving copy with its own exploration randomness.

    The snapshot carries the trainer's decide generator, which the trainer never advances: every
    API process, after every snapshot, would replay the same random sequence (correlated
    exploration across replicas and over time). Each copy is re-seeded from the OS
    (``reseed(None)``) instead; the propensities it logs are unchanged (they come from the
    forest, not the draw).
    """
    forest = cls.from_state(state)
    forest.reseed(None)
    return forest


def _forest_change_actions(policy: Any, added: list[str], removed: list[str]) -> None:
    known = set(policy.actions)
    for action in added:
        if action not in known:
            policy.add_action(action)
    for action in removed:
        if action in known:
            policy.remove_action(action)


MODEL_KINDS: dict[str, ModelKind] = {
    "bandit-forest": ModelKind(
        name="bandit-forest",
        learner="online:BanditForest",
        build=_forest_build,
        decide=_forest_decide,
        learn=_forest_learn,
        change_actions=_forest_change_actions,
        # without the exploring stumps' counts: an order of magnitude smaller, decides the same
        dump_serving=lambda forest: forest.to_state(statistics=False),
        load_serving=_forest_load_serving,
    ),
}


def model_kind(name: str) -> ModelKind:
    try:
        return MODEL_KINDS[name]
    except KeyError:
        raise ValueError(
            f"unknown policy kind {name!r}; known kinds: {', '.join(sorted(MODEL_KINDS))}"
        ) from None
