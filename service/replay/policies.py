"""The policies a replay compares, behind one small interface.

A policy spec on the command line is ``name[:key=value,key=value...]``:

* ``forest[:params]`` — Grove's Bandit Forest with these hyperparameters (values are JSON when
  they parse as JSON: ``forest:n_trees=20,epsilon=[0.4,0.8]``). In-process it is the learner the
  service's trainer runs (built through ``service.models``); over HTTP it is an app of the service.
* ``auto[:params]`` — Grove's auto policy (kind ``auto``: candidates learn the same events,
  anytime-valid estimates pick the one that serves), e.g.
  ``auto:candidates=[{"kind":"bandit-forest"},{"kind":"linucb"}],min_events=200``; without
  params, the default candidates. Its summary adds each candidate's figures (estimate, lower,
  upper, events, serving), the switches, and the candidates' estimates over events.
* ``uniform`` — uniformly random actions (seeded).
* ``best-fixed`` — the best fixed action in hindsight (computed after the run from the whole
  stream: an optimistic baseline no online policy can know in advance).

Each policy's seed is derived from ``--seed`` and its position in the list, so adding a policy
does not change the draws of the others.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from service.replay.sources import ReplayInputError

KINDS = ("forest", "auto", "uniform", "best-fixed")
#: replay kinds that are a learner of the service -> the service's policy kind
MODEL_KINDS = {"forest": "bandit-forest", "auto": "auto"}


@dataclass(frozen=True)
class PolicySpec:
    label: str
    kind: str
    params: dict[str, Any] = field(default_factory=dict)


def _split_params(text: str) -> list[str]:
    """Split ``a=1,b=[1,2]`` on the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "[{("
        depth -= ch in "]})"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_spec(text: str) -> PolicySpec:
    """``forest:n_trees=20,max_depth=8`` -> PolicySpec.

    >>> parse_spec(  # doctest: +NORMALIZE_WHITESPACE
    ...     "forest:n_trees=20,epsilon=[0.4,0.8],voting=mixture")
    PolicySpec(label='forest:n_trees=20,epsilon=[0.4,0.8],voting=mixture', kind='forest',
               params={'n_trees': 20, 'epsilon': [0.4, 0.8], 'voting': 'mixture'})
    """
    kind, _, rest = text.strip().partition(":")
    if kind not in KINDS:
        raise ReplayInputError(f"--policy {text!r}: unknown policy {kind!r}; use one of "
                               f"{', '.join(KINDS)} (forest and auto take params: "
                               "forest:n_trees=20)")
    params: dict[str, Any] = {}
    for part in _split_params(rest):
        key, eq, value = part.partition("=")
        if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key.strip()):
            raise ReplayInputError(f"--policy {text!r}: expected key=value, got {part!r}")
        try:
            params[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            params[key.strip()] = value.strip()
    if params and kind not in MODEL_KINDS:
        raise ReplayInputError(f"--policy {text!r}: {kind} takes no parameters")
    return PolicySpec(text.strip(), kind, params)


def parse_specs(texts: list[str]) -> list[PolicySpec]:
    specs = [parse_spec(t) for t in texts]
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise ReplayInputError(f"--policy lists a policy twice: {labels}")
    return specs


@dataclass
class Choice:
    """One decision: the action, its probability, every candidate's probability, and what the
    driver needs to report the reward (the eventId over HTTP)."""

    action: str
    probability: float
    probabilities: dict[str, float]
    handle: Any = None


class Policy:
    """What the replay loop calls; subclasses decide and learn."""

    label: str = ""
    kind: str = ""
    #: decide latencies in seconds (HTTP only)
    latencies: list[float]

    def decide(self, context: dict, actions: list[str]) -> Choice:
        raise NotImplementedError

    def learn(self, choice: Choice, context: dict, reward: float) -> None:
        """The reward of the chosen action (in the data's units)."""

    def sync(self) -> None:
        """Block boundary: make what was learned so far visible to the next decisions."""

    def close(self) -> None:
        pass

    def describe(self) -> dict:
        return {"label": self.label, "kind": self.kind}


class UniformPolicy(Policy):
    kind = "uniform"

    def __init__(self, label: str, seed):
        self.label = label
        self.latencies = []
        self._rng = np.random.default_rng(seed)

    def decide(self, context: dict, actions: list[str]) -> Choice:
        p = 1.0 / len(actions)
        action = actions[int(self._rng.integers(len(actions)))]
        return Choice(action, p, dict.fromkeys(actions, p))


class InProcessForest(Policy):
    """Grove's Bandit Forest in this process, as the service's trainer builds and trains it.
    (:class:`InProcessAuto` is the same driver for the auto policy.)

    ``sync_every`` > 0: learned events wait in a buffer until :meth:`sync` (the replay calls it
    every ``sync_every`` steps), as the service's snapshots do over HTTP; 0: learn at once.
    Rewards are rescaled from ``reward_range`` to [0, 1], as the trainer does. With
    ``decide_seed``, the exploration draws restart at every sync from the seed a Grove started
    with ``GROVE_DECIDE_SEED`` gives the snapshot of the same model (``service.models``).
    """

    kind = "forest"

    def __init__(self, label: str, params: dict, actions: list[str], reward_range, sync_every: int,
                 decide_seed: int | None = None):
        from service.models import model_kind

        self.label = label
        self.params = params
        self.latencies = []
        self._kind = model_kind(MODEL_KINDS[self.kind])
        try:
            self._learner = self._kind.new(dict(params), list(actions))
            self._actions = tuple(actions)
        except (TypeError, ValueError) as exc:
            raise ReplayInputError(f"--policy {label!r}: invalid {self.kind} params: {exc}"
                                   ) from None
        self._low, self._high = reward_range
        self._sync_every = sync_every
        self._pending: list[tuple] = []
        self._decide_seed = decide_seed
        self._seeded_at: int | None = None
        self._reseed()

    def _reseed(self) -> None:
        # the service reseeds when it loads a new snapshot, i.e. once the model learned more
        learned = self._learner.n_learned
        if self._decide_seed is not None and learned != self._seeded_at:
            self._kind.reseed(self._learner, self._decide_seed)
            self._seeded_at = learned

    def decide(self, context: dict, actions: list[str]) -> Choice:
        c = self._kind.decide(self._learner, context, actions, [])
        return Choice(c.action, c.probability, dict(c.ranking))

    def learn(self, choice: Choice, context: dict, reward: float) -> None:
        scaled = (reward - self._low) / (self._high - self._low)
        # the actions it was drawn among, when not the app's (as the service records them)
        offered = tuple(choice.probabilities)
        event = (context, choice.action, scaled, choice.probability,
                 None if set(offered) == set(self._actions) else offered)
        if self._sync_every > 0:
            self._pending.append(event)
        else:
            self._kind.learn(self._learner, *event[:4])

    def sync(self) -> None:
        self._kind.learn_run(self._learner, self._pending)  # as the trainer learns a batch
        self._pending.clear()
        self._reseed()  # the service serves a new snapshot: its draws restart

    def describe(self) -> dict:
        return {"label": self.label, "kind": self.kind, "params": self.params}


def candidate_figures(evaluations: list[dict]) -> list[dict]:
    """The figures a replay reports per candidate, from ``AutoPolicy.evaluations()`` or the
    candidates of ``GET /apps/{app}/evaluations``."""
    keys = ("name", "kind", "estimate", "lower", "upper", "events", "serving")
    return [{k: c[k] for k in keys} for c in evaluations]


class AutoFigures:
    """What a replay keeps of an auto policy: its candidates' figures after every block (the
    curves of the candidates PNG) and, at the end, the candidates, the switches and which one
    serves. Shared by the in-process and the HTTP drivers."""

    def __init__(self):
        self.history: list[dict] = []  # {"events": n, "candidates": [figures]}

    def note(self, events: int, evaluations: list[dict]) -> None:
        if events and (not self.history or self.history[-1]["events"] != events):
            self.history.append({"events": events, "candidates": candidate_figures(evaluations)})

    def describe(self, evaluations: list[dict], switches: list[dict], serving: str) -> dict:
        return {"serving": serving, "candidates": candidate_figures(evaluations),
                "switches": [{k: s[k] for k in ("at", "from", "to", "reason", "estimates")}
                             for s in switches],
                "history": self.history}


class InProcessAuto(InProcessForest):
    """Grove's auto policy in this process, as the trainer runs it (see :class:`InProcessForest`).

    The candidates' figures are noted after every block (``sync``); with ``sync_every`` 0
    (learning event by event) every ``note_every`` events, so the curves have a point per block
    either way without evaluating every event twice.
    """

    kind = "auto"

    def __init__(self, *args, note_every: int = 500, **kwargs):
        super().__init__(*args, **kwargs)
        self.figures = AutoFigures()
        self._note_every = note_every

    def learn(self, choice: Choice, context: dict, reward: float) -> None:
        super().learn(choice, context, reward)
        learned = self._learner.n_learned
        if self._sync_every <= 0 and learned % self._note_every == 0:
            self.figures.note(learned, self._learner.evaluations())

    def sync(self) -> None:
        super().sync()
        self.figures.note(self._learner.n_learned, self._learner.evaluations())

    def describe(self) -> dict:
        learner = self._learner
        self.figures.note(learner.n_learned, learner.evaluations())
        return {**super().describe(),
                **self.figures.describe(learner.evaluations(), learner.switches, learner.serving)}


#: spawn-key domain of the policies' seeds: ``[seed, position]`` as plain entropy would equal
#: ``default_rng(seed)`` for position 0 (SeedSequence pads entropy with zeros), i.e. the stream a
#: data generator seeded with ``seed`` uses, and the "random" policy would replay its draws
_POLICY_DOMAIN = 0x6E70


def policy_seed(seed: int, position: int) -> np.random.SeedSequence:
    """The seed of the policy at ``position``, independent of ``default_rng(seed)``."""
    return np.random.SeedSequence(seed, spawn_key=(_POLICY_DOMAIN, position))


def forest_params(spec: PolicySpec, seed: int, position: int) -> dict:
    """The spec's params, with a ``seed`` derived from ``--seed`` unless the spec gives one."""
    params = dict(spec.params)
    params.setdefault("seed", int(policy_seed(seed, position).generate_state(1)[0]))
    return params
