"""Personalizer's service configuration, mapped onto a Grove app.

=========================  ===========================================================
Personalizer               Grove
=========================  ===========================================================
rewardWaitTime             the app's ``rewardWaitTime`` (ISO 8601 duration <-> seconds)
defaultReward              the app's ``defaultReward`` (within its ``rewardRange``)
rewardAggregation          the app's ``rewardAggregation``: ``earliest``, ``sum`` or
                           ``average`` (the mean of the rewards before the wait time ends)
explorationPercentage      the app's exploration floor (a share in [0, 1], as Personalizer's
                           API took it): the policy parameter that is one (``floor`` of the
                           'auto' kind: every action gets at least floor / K; ``epsilon`` of
                           'linucb'). An 'auto' app changes its floor live; other kinds
                           take it at construction: a new value is in the policy's params
                           for the next model (reset, import, new policy)
logRetentionDays           how long the app's learned events stay in its log (-1: kept);
                           the trainer trims older ones
modelExportFrequency       kept and returned; Grove's trainer publishes a new model at
                           least every ``GROVE_SNAPSHOT_INTERVAL`` seconds (1 s by default),
                           which is never slower than the frequency asked for
modelRetrainDays,          kept and returned; Grove learns online from every event, it
isAutoOptimizationEnabled  has no retraining window or auto-optimization (auto-optimization:
                           400)
learningMode               ``Online`` (the default) or ``Apprentice`` (below); ``LoggingOnly``
                           is a 400
=========================  ===========================================================

**Apprentice mode** (Personalizer's, for an app whose existing logic keeps choosing while the
model learns). A rank answers the baseline as ``rewardActionId``: the request's first action, a
slot's ``baselineAction`` (an excluded baseline is a 400). The ranking lists the actions in the
request's order with the model's probabilities. The model still draws its own action as in
Online mode, and that draw is what the event records, with its probability. What it learns
is learning-loop's rule (microsoft/learning-loop, the open successor of Personalizer, whose
joiner and client do exactly this): the reward the client reports when the draw was the
baseline, else the app's default reward; the reported reward is kept in the log as
``observed``.

Why this rule and not "the baseline was shown, learn it with probability 1": the mode's purpose
is that the model comes to choose what the existing logic chooses, and a rule that only ever
learns the baseline's rewards never learns that another action is not the baseline's choice
for a context (a model fitted per action predicts the baseline's reward of one context for an
action shown only in other contexts). Under this rule every event is a properly randomized
bandit event for a surrogate reward (the reported one if the draw matches, the default
otherwise): its propensity is the true probability of the draw, so the app's log stays fit for
counterfactual evaluation, of that surrogate. The app's stats count ``apprenticeDecisions`` and
``apprenticeMatches`` (draws that were the baseline): the share Personalizer's portal showed
before an app was switched to Online. Grove's native decide is not affected by the mode.

The values that are not fields of :class:`service.records.AppConfig` live in its ``extra``
under ``"personalizer"``; :func:`exploration_floor` and :func:`event_retention` read them for
the parts of Grove that apply them.
"""

from __future__ import annotations

import math
import time
from typing import Any

from online.policies.auto import check_floor
from service.personalizer import durations
from service.records import Aggregation, AppConfig

EXTRA = "personalizer"
#: Personalizer's defaults for a new resource (its portal's): 20% exploration, logs kept 90
#: days (Grove: its event_retention setting unless set here), export every 5 minutes
DEFAULT_EXPLORATION = 0.2
DEFAULT_EXPORT = 300.0
_AGGREGATIONS = {a.value: a for a in Aggregation}
_MODES = ("Online", "Apprentice")
APPRENTICE = "Apprentice"


class ConfigurationError(ValueError):
    """A configuration Grove cannot take (the API answers 400 InvalidServiceConfiguration)."""


def stored(config: AppConfig) -> dict[str, Any]:
    """The app's Personalizer-only settings (a copy)."""
    return dict(config.extra.get(EXTRA, {}))


#: the constructor parameters that are a policy's exploration floor, by preference
FLOOR_PARAMS = ("floor", "epsilon")


def floor_param(kind: str) -> str | None:
    """The parameter of ``kind``'s learner that is its exploration floor, if it has one."""
    from service.personalizer.learning_settings import parameters

    try:
        accepted = parameters(kind)
    except ValueError:
        return None
    return next((p for p in FLOOR_PARAMS if p in accepted), None)


def exploration_floor(config: AppConfig) -> float:
    """The app's exploration floor: its policy's floor parameter if given, else the stored
    ``explorationPercentage``, else Personalizer's default (0.2)."""
    param = floor_param(config.policy_kind)
    if param is not None and param in config.policy_params:
        return float(config.policy_params[param])
    return float(stored(config).get("explorationPercentage", DEFAULT_EXPLORATION))


def with_floor(kind: str, params: dict[str, Any], floor: float | None) -> dict[str, Any]:
    """``params`` with ``floor`` as the kind's floor parameter (unchanged if it has none)."""
    param = floor_param(kind)
    if floor is None or param is None:
        return dict(params)
    return {**params, param: floor}


def learning_mode(config: AppConfig) -> str:
    """The app's ``learningMode``: ``Online`` unless set (see the module doc)."""
    return str(stored(config).get("learningMode", "Online"))


def apprentice(config: AppConfig) -> bool:
    """Whether the app's Personalizer rank answers the baseline (Apprentice mode)."""
    return config.extra.get(EXTRA, {}).get("learningMode") == APPRENTICE


def event_retention(config: AppConfig, default: float) -> float:
    """Seconds the app's learned events are kept (``math.inf``: never trimmed)."""
    days = stored(config).get("logRetentionDays")
    if days is None:
        return default
    return math.inf if days == -1 else days * 86_400.0


def public(config: AppConfig, retention_default: float) -> dict[str, Any]:
    """The ``ServiceConfiguration`` Personalizer's clients read."""
    extra = stored(config)
    retention = event_retention(config, retention_default)
    return {
        "rewardWaitTime": durations.format(config.reward_wait_time),
        "defaultReward": config.default_reward,
        "rewardAggregation": config.reward_aggregation.value,
        "explorationPercentage": exploration_floor(config),
        "modelExportFrequency": durations.format(extra.get("modelExportFrequency", DEFAULT_EXPORT)),
        "logRetentionDays": -1 if math.isinf(retention) else math.ceil(retention / 86_400),
        "modelRetrainDays": int(extra.get("modelRetrainDays", 0)),
        "lastConfigurationEditDate": durations.instant(config.updated_at),
        "learningMode": learning_mode(config),
        "isAutoOptimizationEnabled": False,
        "logMirrorEnabled": False,
    }


def _duration(body: dict, name: str) -> float | None:
    if body.get(name) is None:
        return None
    try:
        return durations.parse(body[name])
    except ValueError as exc:
        raise ConfigurationError(f"{name}: {exc}") from None


#: the longest log retention a number of days gives (-1 keeps the log for good)
MAX_RETENTION_DAYS = 36_500


def _number(body: dict, name: str, low: float, high: float) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ConfigurationError(f"{name} must be a number in [{low}, {high}], got {value!r}")
    return float(value)


def changes(config: AppConfig, body: dict[str, Any]) -> dict[str, Any]:
    """The :class:`AppConfig` fields a ``ServiceConfiguration`` body changes (checked first,
    all or none); fields it leaves out keep their values. ConfigurationError says what's wrong.

    >>> from service.records import Action
    >>> app = AppConfig("a", "u", "trees", {}, (Action("x"),), 600.0, 0.0, (0.0, 1.0),
    ...                 Aggregation.earliest, "h", 0.0, 0.0)
    >>> c = changes(app, {"rewardWaitTime": "PT5M", "explorationPercentage": 0.1})
    >>> c["reward_wait_time"], c["extra"]["personalizer"]["explorationPercentage"]
    (300.0, 0.1)
    """
    out: dict[str, Any] = {}
    extra = stored(config)
    wait = _duration(body, "rewardWaitTime")
    if wait is not None:
        if not 0.001 <= wait <= 30 * 86_400:  # (service.api.schemas.MIN_REWARD_WAIT)
            raise ConfigurationError(
                f"rewardWaitTime must be at least 1 ms and at most 30 days, got {wait} s"
            )
        out["reward_wait_time"] = wait
    default = _number(body, "defaultReward", -math.inf, math.inf)
    if default is not None:
        low, high = config.reward_range
        if not low <= default <= high:
            raise ConfigurationError(
                f"defaultReward {default} is outside the app's rewardRange {[low, high]}"
            )
        out["default_reward"] = default
    aggregation = body.get("rewardAggregation")
    if aggregation is not None:
        chosen = _AGGREGATIONS.get(str(aggregation).lower())
        if chosen is None:
            raise ConfigurationError(
                f"rewardAggregation {aggregation!r}: Grove aggregates with "
                f"{', '.join(sorted(_AGGREGATIONS))}"
            )
        out["reward_aggregation"] = chosen
    exploration = _number(body, "explorationPercentage", 0.0, 1.0)
    if exploration is not None:
        if floor_param(config.policy_kind) == "floor":  # (the auto policy's, set live)
            try:
                check_floor(exploration)
            except ValueError as exc:
                raise ConfigurationError(f"explorationPercentage {exploration}: an "
                                         f"{config.policy_kind!r} app's {exc}") from None
        extra["explorationPercentage"] = exploration
        if floor_param(config.policy_kind) is not None:  # the next model's floor
            out["policy_params"] = with_floor(config.policy_kind, config.policy_params, exploration)
    export = _duration(body, "modelExportFrequency")
    if export is not None:
        if export <= 0:
            raise ConfigurationError("modelExportFrequency must be over 0")
        extra["modelExportFrequency"] = export
    retention = body.get("logRetentionDays")
    if retention is not None:
        if isinstance(retention, bool) or not isinstance(retention, int) or not (
            retention == -1 or 1 <= retention <= MAX_RETENTION_DAYS
        ):
            raise ConfigurationError(
                f"logRetentionDays must be -1 (keep the log) or a whole number of days from 1 to "
                f"{MAX_RETENTION_DAYS}, "
                f"got {retention!r}"
            )
        extra["logRetentionDays"] = retention
    retrain = body.get("modelRetrainDays")
    if retrain is not None:
        if isinstance(retrain, bool) or not isinstance(retrain, int) or retrain < 0:
            raise ConfigurationError(
                f"modelRetrainDays must be a whole number >= 0, got {retrain!r}"
            )
        extra["modelRetrainDays"] = retrain
    mode = body.get("learningMode")
    if mode is not None:
        if mode not in _MODES:
            raise ConfigurationError(
                f"learningMode {mode!r}: Grove takes 'Online' or 'Apprentice'; logging-only has "
                "no Grove counterpart"
            )
        extra["learningMode"] = mode
    if body.get("isAutoOptimizationEnabled"):
        raise ConfigurationError(
            "isAutoOptimizationEnabled: Grove has no periodic auto-optimization; run an "
            "evaluation and apply its policy (POST /configurations/applyFromEvaluation), or "
            "give the app the 'auto' policy kind"
        )
    if body.get("logMirrorEnabled"):
        raise ConfigurationError("logMirrorEnabled: Grove does not mirror logs to Azure storage")
    out["extra"] = {**config.extra, EXTRA: extra}
    return out


def touched(config: AppConfig, **fields: Any) -> dict[str, Any]:
    """``extra`` with Personalizer-only ``fields`` set (e.g. ``modelCreatedAt``)."""
    return {**config.extra, EXTRA: {**stored(config), **fields}}


def model_created_at(config: AppConfig) -> float:
    """When the app's current model started (created, reset, imported or re-policied)."""
    return float(stored(config).get("modelCreatedAt", config.created_at))


def now() -> float:
    return time.time()
