"""Request and response bodies, one schema per direction (JSON in camelCase)."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from online.policies.features import MAX_MAGNITUDE
from online.policies.registry import DEFAULT_POLICY_KIND
from service.feature_checks import check_features, check_text
from service.models import MODEL_KINDS
from service.records import Aggregation

APP_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
EVENT_ID = r"^[A-Za-z0-9_.:-]{1,128}$"
MAX_BATCH = 1000
MAX_FEATURE_NAME = 256
MAX_FEATURE_VALUE = 4096
#: the shortest rewardWaitTime, seconds: Grove's timers count milliseconds (a shorter one was
#: written back as PT0S, which a Personalizer client could not send again)
MIN_REWARD_WAIT = 0.001

#: a context (or action) feature: number, string, bool or missing
FeatureValue = bool | int | float | str | None


def flat_features(features: Any) -> Any:
    """Before type checks: say plainly that a context is flat (nested objects are not features)."""
    if isinstance(features, dict):
        for key, value in features.items():
            if isinstance(value, (dict, list)):
                kind = "an object" if isinstance(value, dict) else "a list"
                raise ValueError(
                    f"feature {key!r} is {kind}: a context is flat, name -> number, string, "
                    "bool or null (write nested values as 'outer.inner' keys)"
                )
            if isinstance(key, str) and len(key) > MAX_FEATURE_NAME:
                raise ValueError(f"feature name {key[:32]!r}... is over {MAX_FEATURE_NAME} chars")
            if isinstance(value, str) and len(value) > MAX_FEATURE_VALUE:
                raise ValueError(f"feature {key!r} has a string over {MAX_FEATURE_VALUE} chars")
    return features


class Schema(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class ActionSpec(Schema):
    """An action: its id and optional features (stored with the decision and learned with its
    reward by the kinds that read them, ``adf``; the others learn one model per action id)."""

    id: str = Field(min_length=1, max_length=128)
    features: dict[str, FeatureValue] | None = None

    _flat = field_validator("features", mode="before")(flat_features)
    _checked = field_validator("features")(check_features)


def _action_specs(actions: list[str | ActionSpec] | None) -> list[ActionSpec] | None:
    if actions is None:
        return None
    specs = [a if isinstance(a, ActionSpec) else ActionSpec(id=a) for a in actions]
    for spec in specs:
        check_text("action id", spec.id)
    duplicates = sorted(i for i, n in Counter(a.id for a in specs).items() if n > 1)
    if duplicates:
        raise ValueError(f"duplicate action ids: {duplicates}")
    return specs


class PolicySpec(Schema):
    kind: str = Field(
        default=DEFAULT_POLICY_KIND,
        description="model kind: a contextual-bandit policy that decides among the app's "
        "actions and learns from rewards ('auto', the default: candidates chosen by "
        "counterfactual evaluation; 'trees', 'linucb', 'adf' (scores actions by their own "
        "features), 'bandit-forest'), or 'mcts-is' (predicts "
        "P(y = 1 | x) with the interactions it selected, learns from labeled events; takes no "
        "actions)",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="the learner's hyperparameters"
    )


class AppCreate(Schema):
    name: str = Field(pattern=APP_NAME)
    policy: PolicySpec = Field(default_factory=PolicySpec)
    actions: list[str | ActionSpec] = Field(
        default_factory=list,
        max_length=10_000,
        description="the actions to decide among (bandit kinds); 'mcts-is' apps take none, and "
        "their reward settings are unused",
    )
    reward_wait_time: float = Field(default=600.0, ge=MIN_REWARD_WAIT, le=30 * 86400,
                                    description="seconds (1 ms to 30 days)")
    default_reward: float = 0.0
    reward_range: tuple[float, float] = (0.0, 1.0)
    reward_aggregation: Aggregation = Aggregation.earliest

    _actions = field_validator("actions")(_action_specs)

    @model_validator(mode="after")
    def _check_actions(self) -> AppCreate:
        kind = MODEL_KINDS.get(self.policy.kind)
        if kind is not None and not kind.uses_actions and self.actions:
            raise ValueError(
                f"policy kind {kind.name!r} takes no actions (it predicts P(y = 1 | x)): "
                "leave 'actions' out"
            )
        return self

    @model_validator(mode="after")
    def _check_rewards(self) -> AppCreate:
        low, high = self.reward_range
        if not (math.isfinite(low) and math.isfinite(high) and low < high):
            raise ValueError(f"rewardRange must be [low, high] with low < high, got {[low, high]}")
        if max(abs(low), abs(high)) > MAX_MAGNITUDE:  # (high - low, and sums of rewards, stay
            raise ValueError(f"rewardRange must be within +-{MAX_MAGNITUDE:g}, got "  # finite)
                             f"{[low, high]}")
        if not low <= self.default_reward <= high:
            raise ValueError(
                f"defaultReward {self.default_reward} is outside rewardRange {[low, high]}"
            )
        return self


class AppUpdate(Schema):
    actions: list[str | ActionSpec] | None = Field(default=None, max_length=10_000)
    reward_wait_time: float | None = Field(default=None, ge=MIN_REWARD_WAIT, le=30 * 86400)
    default_reward: float | None = None

    _actions = field_validator("actions")(_action_specs)


class AppPublic(Schema):
    name: str
    policy: PolicySpec
    actions: list[ActionSpec]
    reward_wait_time: float
    default_reward: float
    reward_range: tuple[float, float]
    reward_aggregation: Aggregation
    created_at: float
    updated_at: float
    model_version: int
    events_learned: int
    events_rejected: int
    pending_decisions: int
    trainer_lag: int = Field(description="events appended but not yet in the served snapshot")
    trainer_lag_seconds: float = Field(description="age of the oldest such event")
    trainer_alive: bool
    snapshot_age: float | None
    changes_found: int | None = Field(
        None, description="actions whose rewards the app's policy found changed (tastes changed, "
        "a campaign ended) and forgot or restarted, in the model this process serves (for "
        "'auto': its serving candidate's); null for a kind that does not watch "
        "('bandit-forest', 'mcts-is'), in the list of apps and in the creation's answer")
    events_since_refit: int | None = Field(
        None, description="events the model this process serves learned since its trees were "
        "last refitted: its linear base has learned them, its trees will at the next refit "
        "(for 'auto': its serving candidate's); null for a kind without refits ('linucb', "
        "'bandit-forest', 'mcts-is', an 'auto' app serving LinUCB), in the list of apps and "
        "in the creation's answer")
    feature_columns: int | None = Field(
        None, description="the feature columns the model this process serves codes (for "
        "'auto': its serving candidate's); null for 'bandit-forest' and 'mcts-is', in the list "
        "of apps and in the creation's answer")
    features_left_out: int | None = Field(
        None, description="features of learned events that got no column because the policy's "
        "max_columns was reached, counted at each event (a key sent with every event counts "
        "every time), in the model this process serves; null as featureColumns")
    explained_share: float | None = Field(
        None, description="the share of the rewards' variance, beyond each action's mean, that "
        "the served model's predictions explained out of sample at its last refit: the weight "
        "of its optimism bonus with the default optimism_explained (for 'auto': its serving "
        "candidate's); null for a kind without it (all but 'trees'), in the list of apps and in "
        "the creation's answer")
    stats: dict[str, int] = Field(
        description="decisions, rewarded, defaulted (learned with defaultReward), "
        "dropped (deferred, never activated), labeled (events queued by POST /apps/{app}/learn)"
    )


class AppCreated(AppPublic):
    api_key: str = Field(description="shown once; Grove only keeps its SHA-256")


class DecideRequest(Schema):
    event_id: str | None = Field(default=None, pattern=EVENT_ID)
    context: dict[str, FeatureValue] = Field(default_factory=dict)
    actions: list[str | ActionSpec] | None = Field(default=None, max_length=10_000)
    excluded_actions: list[str] = Field(default_factory=list, max_length=10_000)
    defer_activation: bool = False

    _flat = field_validator("context", mode="before")(flat_features)
    _checked = field_validator("context")(check_features)
    _actions = field_validator("actions")(_action_specs)

    @field_validator("excluded_actions")
    @classmethod
    def _excluded_text(cls, excluded: list[str]) -> list[str]:
        for action in excluded:
            check_text("excluded action", action)
        return excluded


class RankedAction(Schema):
    id: str
    probability: float


class DecideResponse(Schema):
    event_id: str
    action: str
    probability: float
    ranking: list[RankedAction]
    model_version: int


class BatchDecideRequest(Schema):
    requests: list[DecideRequest] = Field(min_length=1, max_length=MAX_BATCH)


class BatchDecideResponse(Schema):
    responses: list[DecideResponse]


class RewardRequest(Schema):
    event_id: str = Field(pattern=EVENT_ID)
    reward: float = Field(strict=True)  # a JSON number (true or "0.5" was taken as a number)

    @field_validator("reward")
    @classmethod
    def _finite_reward(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("reward must be a finite number")
        return value


class RewardResponse(Schema):
    event_id: str
    state: Literal["joined", "accumulating"] = Field(
        description="joined: queued for learning; accumulating: more rewards may add up (sum)"
    )
    reward_sum: float
    reward_count: int


class ActivateRequest(Schema):
    event_id: str = Field(pattern=EVENT_ID)


class ActivateResponse(Schema):
    event_id: str
    activated: bool = True


# -- supervised kinds (mcts-is): predict, learn, interactions ---------------------------------
class PredictRequest(Schema):
    x: dict[str, FeatureValue] = Field(description="the fields, name -> category (flat)")

    _flat = field_validator("x", mode="before")(flat_features)
    _checked = field_validator("x")(check_features)


class LeafUsed(Schema):
    root: str = Field(description="the field the tree's root splits on")
    leaf: str | None = Field(description="the conjunction x falls in (None: no split applies)")
    mean: float = Field(description="the leaf's mean response")
    weight: float = Field(description="the tree's weight in the probability")


class PredictResponse(Schema):
    probability: float = Field(description="P(y = 1 | x)")
    interactions: list[str] = Field(description="the leaf interactions x falls in")
    trees: list[LeafUsed]
    model_version: int


class LearnRequest(Schema):
    event_id: str | None = Field(default=None, pattern=EVENT_ID)
    x: dict[str, FeatureValue]
    y: Literal[0, 1] = Field(description="the label: 1 (e.g. a click) or 0")

    _flat = field_validator("x", mode="before")(flat_features)
    _checked = field_validator("x")(check_features)

    @field_validator("y", mode="before")
    @classmethod
    def _strict_label(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            # a ValueError, not a TypeError: pydantic turns only ValueError into a 422
            raise ValueError("y must be the number 0 or 1")  # noqa: TRY004
        return value


class LearnResponse(Schema):
    event_id: str
    state: Literal["queued"] = Field(description="in the learning stream; the trainer learns it")


class Interaction(Schema):
    terms: dict[str, FeatureValue] = Field(description="field -> category of the conjunction")
    rule: str
    support: float = Field(description="estimated share of the samples in the conjunction")
    count: float
    mean: float = Field(description="mean response in the conjunction")
    chi2: float
    p_value: float = Field(description="Bonferroni-corrected")
    tree: str = Field(description="root field of the tree holding it")
    leaf: bool = Field(description="a leaf of that tree's extracted decision tree")


class ExtractedTree(Schema):
    root: str = Field(description="the field its root splits on (Appendix B.3)")
    loss: float = Field(description="estimated squared loss L* of the extracted tree (eq. 7)")
    leaves: list[str] = Field(description="its leaves' conjunctions (at most maxLeaves)")
    n_leaves: int = Field(description="how many leaves it has")


class InteractionsResponse(Schema):
    interactions: list[Interaction]
    trees: list[ExtractedTree]
    model_version: int
