"""Typed records stored in Redis: an app's configuration and the outcomes of the Lua scripts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from functools import cached_property
from typing import Any


class Aggregation(str, Enum):
    """How several rewards for one event combine (Azure Personalizer's reward aggregation)."""

    earliest = "earliest"  # the first reward joins at once; a later one is refused
    sum = "sum"  # rewards add up until the wait time ends, then the event is learned
    average = "average"  # as sum, and the event is learned with their mean


@dataclass(frozen=True)
class Action:
    id: str
    features: dict[str, Any] | None = None


@dataclass(frozen=True)
class AppConfig:
    """What ``POST /apps`` stores (JSON in the app's config key, next to its ``uid``)."""

    name: str
    uid: str
    policy_kind: str
    policy_params: dict[str, Any]
    actions: tuple[Action, ...]
    reward_wait_time: float  # seconds
    default_reward: float
    reward_range: tuple[float, float]
    reward_aggregation: Aggregation
    api_key_hash: str
    created_at: float
    updated_at: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def action_ids(self) -> list[str]:
        return list(self.action_id_tuple)

    @cached_property
    def action_id_tuple(self) -> tuple[str, ...]:
        """The action ids, computed once per config (the API decides with them per request)."""
        return tuple(a.id for a in self.actions)

    @cached_property
    def action_features(self) -> dict[str, dict[str, Any]] | None:
        """The features of the actions that have some, by id (None: no action has any)."""
        return {a.id: a.features for a in self.actions if a.features} or None

    @property
    def wait_ms(self) -> int:
        return max(1, int(round(self.reward_wait_time * 1000)))

    def rescale(self, reward: float) -> float:
        """Reward in the app's range -> [0, 1] for the learner (clipped: sums may overshoot)."""
        low, high = self.reward_range
        return min(1.0, max(0.0, (reward - low) / (high - low)))

    def to_json(self) -> str:
        data = asdict(self)
        data["reward_aggregation"] = self.reward_aggregation.value
        return json.dumps(data, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> AppConfig:
        data = json.loads(text)
        data["actions"] = tuple(Action(**a) for a in data["actions"])
        data["reward_range"] = tuple(data["reward_range"])
        data["reward_aggregation"] = Aggregation(data["reward_aggregation"])
        return cls(**data)

    def replace(self, **changes: Any) -> AppConfig:
        return replace(self, **changes)


@dataclass(frozen=True)
class SnapshotInfo:
    """The snapshot's header (everything but the state bytes)."""

    version: int
    offset: str
    events_learned: int
    events_rejected: int
    updated_at_ms: int
    # events of the stream before the model was replaced (import, reset, a new policy): the
    # models before it learned or rejected them, this one never will
    events_before: int = 0


@dataclass(frozen=True)
class Checkpoint:
    """Where a trainer resumes an app: the learner's last whole state (:mod:`service.scripts`,
    PUBLISH) includes the stream up to ``offset`` and those counts; the served snapshot is at
    ``version`` and includes the stream up to ``served_offset`` (the same or later)."""

    version: int
    offset: str
    events_learned: int
    events_rejected: int
    served_offset: str


#: bytes of a request's digest (NewDecision.request; service.scripts.DECIDE compares them)
REQUEST_DIGEST = 16


@dataclass(frozen=True)
class NewDecision:
    """One decision to record: what the policy chose, with its propensity."""

    event_id: str
    context: dict[str, Any]
    action: str
    probability: float
    model_version: int
    deferred: bool = False
    # the actions the decision was drawn among when not the app's own (a request that named its
    # actions or excluded some): learned with the event, for evaluating policies (auto)
    offered: tuple[str, ...] | None = None
    # the candidates' own features (action id -> flat features) when the request or the app
    # gave any: learned with the event by the kinds that score actions by them (adf)
    action_features: dict[str, dict[str, Any]] | None = None
    # Personalizer's Apprentice mode: the action the client shows (its request's first action,
    # or a slot's baselineAction); ``action`` is then the policy's own draw, learned as an
    # imitation of it (service.scripts, event_entry)
    baseline: str | None = None
    # the ranking answered, kept for GROVE_REPEAT_WINDOW when the client named the eventId: a
    # repeat of the request (a retry after an answer it did not get) is answered the same
    # (service.scripts, DECIDE); None: not kept. ``request``: the client's request's digest
    # (REQUEST_DIGEST bytes), what tells a repeat from another request with that eventId
    # (none: not kept)
    ranking: Sequence[tuple[str, float]] | None = None
    request: bytes = b""


@dataclass(frozen=True)
class FirstAnswer:
    """A repeated request's record as the first answer gave it (:class:`NewDecision`)."""

    action: str
    probability: float
    model_version: int
    ranking: list[tuple[str, float]]


@dataclass(frozen=True)
class Recorded:
    """What recording decisions did: ``version``, the app's current model version; ``first``:
    the request was a repeat, and these are its first answers, one per record (none written)."""

    version: int
    first: list[FirstAnswer] | None = None
