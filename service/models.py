"""Model kinds an app can host: how to build, serve, train and store each one.

``MODEL_KINDS`` maps the ``policy.kind`` of ``POST /apps`` to a :class:`ModelKind`; the API and
the trainer only go through this table, so a new kind (MCTS-IS, ...) is one more entry, never an
if/else in a route. Learners are imported lazily: the service starts without loading every
algorithm, and a kind whose learner is missing fails with a clear error when used.
"""

from __future__ import annotations

import hashlib
import importlib
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from online.policies.registry import POLICY_KINDS, PolicyKind
from service.param_checks import check_params


@dataclass(frozen=True)
class Choice:
    """A decision as the API returns it."""

    action: str
    probability: float
    ranking: list[tuple[str, float]]


@dataclass(frozen=True)
class Prediction:
    """A supervised kind's answer: P(y = 1 | x) and the interactions that produced it."""

    probability: float
    interactions: list[str]  # the leaf conjunctions ``x`` falls in, one per distinct leaf
    trees: list[dict[str, Any]]  # per tree: root field, leaf (or None), leaf mean, weight


class WrongKind(ValueError):
    """An operation the app's model kind does not serve (the API answers 422)."""


#: what each ModelKind operation is, for the API's messages
_ROUTES = {
    "decide": "POST /apps/{app}/decide",
    "learn": "POST /apps/{app}/reward",
    "predict": "POST /apps/{app}/predict",
    "learn_labeled": "POST /apps/{app}/learn",
    "interactions": "GET /apps/{app}/interactions",
}


def _not_served(operation: str, kind: str, instead: str) -> Callable[..., Any]:
    """A stand-in for an operation ``kind`` has no meaning for; calling it raises WrongKind."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise WrongKind(f"policy kind {kind!r} does not {operation}: {instead}")

    refuse.not_served = True  # type: ignore[attr-defined]
    return refuse


@dataclass(frozen=True)
class ModelKind:
    """What the service needs from a learner; every callable takes the learner first.

    Bandit kinds serve ``decide`` and learn from rewards (``learn``); supervised kinds serve
    ``predict`` and learn from labeled events (``learn_labeled``, the same stream, trainer and
    snapshots as rewards). Routes ask :meth:`require` for an operation: an app whose kind does
    not serve it is a 422 with a message naming the routes it does serve.
    """

    name: str
    learner: str  # "module:Class", imported on first use
    build: Callable[[type, dict[str, Any], list[str]], Any]
    #: learner, context, actions, excluded, the actions' features by id (or None)
    decide: Callable[[Any, dict[str, Any], list[str], list[str], dict | None], Choice]
    learn: Callable[[Any, dict[str, Any], str, float, float], None]
    change_actions: Callable[[Any, list[str], list[str]], None]  # learner, added, removed
    #: state for serving only (decide, not learn), if the learner has a smaller one
    dump_serving: Callable[[Any], dict] | None = None
    #: restart the exploration draws of a served copy from a seed (GROVE_DECIDE_SEED)
    reseed: Callable[[Any, int], None] | None = None
    #: how an API process turns a serving state into its own learner (default: ``load``)
    load_serving: Callable[[type, dict], Any] | None = None
    #: supervised kinds: P(y = 1 | x) with the interactions used (learner, x)
    predict: Callable[[Any, dict[str, Any]], Prediction] | None = None
    #: supervised kinds: learn one labeled event (learner, x, y in {0, 1})
    learn_labeled: Callable[[Any, dict[str, Any], int], None] | None = None
    #: supervised kinds: the selected interactions (learner, top, alpha, leaves_only) -> dict
    interactions: Callable[[Any, int | None, float, bool], dict] | None = None
    #: whether apps of this kind have actions (bandits) or none (predictors)
    uses_actions: bool = True
    #: learn a run of ``(context, action, reward, probability)`` events in order, as ``learn``
    #: on each would; raises at a bad event after learning those before it (default: ``learn``
    #: one at a time)
    learn_many: Callable[[Any, Iterable[tuple]], None] | None = None

    def learn_run(self, learner: Any, events: Iterable[tuple]):
        """Learn reward events in order (``learn_many`` if the kind has one, else ``learn``):
        ``(context, action, reward, probability)``, and optionally the actions the decision was
        drawn among (None: the app's).

        On a bad event the events before it are learned and its exception is raised: a caller
        that feeds a generator knows which event that was (the last one it yielded).
        """
        if self.learn_many is not None:
            self.learn_many(learner, events)
        else:
            for context, action, reward, probability, *_ in events:
                self.learn(learner, context, action, reward, probability)

    def learn_each(self, learner: Any, items: Sequence, as_event: Callable[[Any], tuple],
                   refused: Callable[[int], None]) -> int:
        """Learn ``items`` in order as runs (:meth:`learn_run`), each turned into an event by
        ``as_event``; an item that fails (its event or its learning) is skipped, the run going
        on after it, and ``refused(index)`` is called while its exception is handled. Returns
        how many were learned."""
        start = learned = 0
        while start < len(items):
            given = 0  # items handed to the learner: on an error, the last one is the bad one

            def events(rest):
                nonlocal given
                for item in rest:
                    given += 1
                    yield as_event(item)

            try:
                self.learn_run(learner, events(items[start:]))
                return learned + given
            except Exception:
                given = max(given, 1)  # a learner that fails before reading blames the first
                learned += given - 1
                refused(start + given - 1)
                start += given
        return learned

    def serves(self, operation: str) -> bool:
        """Whether ``operation`` (a callable field: decide, predict, ...) means something here."""
        fn = getattr(self, operation, None)
        return fn is not None and not getattr(fn, "not_served", False)

    def require(self, operation: str, app: str) -> Callable[..., Any]:
        """The ``operation`` callable, or WrongKind naming the routes ``app`` does serve."""
        if self.serves(operation):
            return getattr(self, operation)
        others = sorted(k.name for k in MODEL_KINDS.values() if k.serves(operation))
        served = [route.format(app=app) for op, route in _ROUTES.items() if self.serves(op)]
        raise WrongKind(
            f"app {app!r} is a {self.name!r} app: {_ROUTES[operation].format(app=app)} is for "
            f"{' or '.join(repr(k) for k in others) or 'no'} apps; this one serves "
            f"{', '.join(served)}"
        )

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


#: learner -> (the actions list it was last asked to decide among, its events learned then,
#: whether that list is its inventory): see _inventory_or
_INVENTORY_CHECKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _inventory_or(policy: Any, actions: Sequence[str], excluded: Sequence[str]):
    """``None`` if ``actions`` are exactly the forest's inventory, in order, and nothing is
    excluded: the forest then decides over its own indexed inventory instead of looking up
    every action (with 1,000 actions that lookup was 0.9 ms of a 1 ms decide). The answer is
    kept per learner for the same ``actions`` object (an API process passes its config's
    tuple) and the same number of events learned (learning may add actions)."""
    if excluded:
        return actions
    key = (actions, policy.n_learned)
    known = _INVENTORY_CHECKS.get(policy)
    if known is not None and known[0] is actions and known[1] == policy.n_learned:
        return None if known[2] else actions
    same = tuple(actions) == tuple(policy.actions)
    _INVENTORY_CHECKS[policy] = (*key, same)
    return None if same else actions


def _forest_decide(policy: Any, context: dict, actions: list[str], excluded: list[str],
                   action_features: dict | None = None) -> Choice:
    # the same decision either way (same candidates in the same order, same draws)
    actions = _inventory_or(policy, actions, excluded)
    decision = policy.decide(context, actions=actions, excluded=tuple(excluded),
                             action_features=action_features)
    # the ranking as the learner gives it (Python floats already): it is copied once more
    # into the answer, not here
    return Choice(
        action=decision.action,
        probability=float(decision.probability),
        ranking=decision.ranking,
    )


def _forest_learn(policy: Any, context: dict, action: str, reward: float, probability: float):
    # an action the app does not list (offered by the request) is added by the forest itself
    policy.learn_one(context, action, reward, probability)


def _forest_learn_many(policy: Any, events: Iterable[tuple]) -> None:
    # one compiled call per run of events between stump resolutions (BanditForest.learn_many);
    # the actions offered and their features go to the policies that read them (auto evaluates
    # its candidates over the offers, adf reads the features); the Bandit Forest reads neither
    policy.learn_many(events)


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


def decide_seed(seed: int, events_learned: int) -> int:
    """The seed of a model's exploration draws once it has learned ``events_learned`` events.

    Used by the API (GROVE_DECIDE_SEED) and by ``grove replay --in-process --decide-seed`` alike,
    so that both draw the same actions from the same model.
    """
    digest = hashlib.sha256(f"grove-decide:{seed}:{events_learned}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def _forest_reseed(forest: Any, seed: int) -> None:
    forest.reseed(decide_seed(seed, forest.n_learned))


def _forest_change_actions(policy: Any, added: list[str], removed: list[str]) -> None:
    known = set(policy.actions)
    for action in added:
        if action not in known:
            policy.add_action(action)
    for action in removed:
        if action in known:
            policy.remove_action(action)


# -- MCTS-IS (online.MCTSInteractions): a click-probability predictor ---------------------------
def _mcts_build(cls: type, params: dict[str, Any], actions: list[str]) -> Any:
    check_params(cls, params)
    return cls(**params)  # no actions: POST /apps refuses them for this kind


def _mcts_predict(model: Any, x: dict) -> Prediction:
    explained = model.explain_one(x)
    leaves = [t["leaf"] for t in explained["trees"] if t["leaf"] is not None]
    return Prediction(
        probability=float(explained["probability"]),
        interactions=list(dict.fromkeys(leaves)),
        trees=explained["trees"],
    )


def _mcts_learn_labeled(model: Any, x: dict, y: int) -> None:
    model.learn_one(x, int(y))


def _mcts_interactions(model: Any, top: int | None, alpha: float, leaves_only: bool) -> dict:
    return {
        "interactions": model.interactions(alpha=alpha, leaves_only=leaves_only, top=top),
        "trees": model.trees(),
    }


_MCTS_INSTEAD = (
    "it predicts P(y = 1 | x) and has no actions; use POST /apps/{app}/predict and "
    "POST /apps/{app}/learn"
)


def _policy_kind(spec: PolicyKind) -> ModelKind:
    """The service's entry for a hosted contextual-bandit policy of :data:`POLICY_KINDS`.

    Every such policy decides with ``decide(x, actions, excluded)``, learns with ``learn_one``
    / ``learn_many`` and stores ``to_state()``; ``to_state(statistics=False)`` is the smaller
    copy an API process decides with (Bandit Forest without its exploring stumps' counts, the
    tree-ensemble policy without its window of events).
    """

    def build(cls: type, params: dict[str, Any], actions: list[str]) -> Any:
        spec.check(params)  # TypeError naming the parameters the kind does not have
        check_params(cls, params)  # ValueError naming a value of the wrong type
        if spec.name == "auto":  # every way an app gets an auto policy: a bounded candidate list
            from service.candidates import check_candidates

            check_candidates(params.get("candidates"))
        return _forest_build(cls, params, actions)

    return ModelKind(
        name=spec.name,
        learner=spec.learner,
        build=build,
        decide=_forest_decide,
        learn=_forest_learn,
        learn_many=_forest_learn_many,
        change_actions=_forest_change_actions,
        dump_serving=lambda policy: policy.to_state(statistics=False),
        reseed=_forest_reseed,
        load_serving=_forest_load_serving,
    )


MODEL_KINDS: dict[str, ModelKind] = {
    # the policy kinds and the names make_policy accepts are one list (online.POLICY_KINDS)
    **{name: _policy_kind(spec) for name, spec in POLICY_KINDS.items()},
    "mcts-is": ModelKind(
        name="mcts-is",
        learner="online:MCTSInteractions",
        build=_mcts_build,
        decide=_not_served("decide", "mcts-is", _MCTS_INSTEAD),
        learn=_not_served("learn from rewards", "mcts-is", _MCTS_INSTEAD),
        change_actions=lambda model, added, removed: None,
        # the extracted DTs and the interaction candidates only: predicts and lists the same
        dump_serving=lambda model: model.to_state(statistics=False),
        predict=_mcts_predict,
        learn_labeled=_mcts_learn_labeled,
        interactions=_mcts_interactions,
        uses_actions=False,
    ),
}


def model_kind(name: str) -> ModelKind:
    try:
        return MODEL_KINDS[name]
    except KeyError:
        raise ValueError(
            f"unknown policy kind {name!r}; known kinds: {', '.join(sorted(MODEL_KINDS))}"
        ) from None


def warm_up() -> None:
    """Build each deciding kind's serving copy once and decide with it (two actions, a number
    and a category): imports their modules and loads their compiled kernels now, not in a
    request (about 0.3 s, most of it the compiler's type registry on first dispatch)."""
    context = {"x": 0.5, "c": "u"}
    for kind in MODEL_KINDS.values():
        if kind.serves("decide"):
            learner = kind.load_for_serving(kind.dump_for_serving(kind.new({}, ["a", "b"])))
            kind.decide(learner, dict(context), ["a", "b"], [])
