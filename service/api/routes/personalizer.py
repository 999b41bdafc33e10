"""Azure Personalizer v1.0 compatibility: rank, reward and activate in Personalizer's shape.

Personalizer's clients (SDKs, REST code) point their endpoint at Grove and send an app's API key
as ``Ocp-Apim-Subscription-Key``; the key names the app (Personalizer had one model per
resource, Grove one per app). Requests map onto Grove's decide/reward/activate:

- ``contextFeatures`` -> the flat context (:mod:`service.api.personalizer_map`);
- ``actions`` -> the request's actions (ids; their flattened features are validated and logged
  with the request but the ``bandit-forest`` kind does not use them: it learns one model per
  action id, so a new id starts untrained whatever its features);
- ``excludedActions``, ``eventId``, ``deferActivation`` -> the same Grove fields;
- the answer (201) lists the chosen action first, then the others by probability, then the
  excluded ones with probability 0, as Personalizer did.

Errors answer Personalizer's shape ``{"error": {"code", "message"}}`` (see
:mod:`service.api.errors`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Path, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.security import APIKeyHeader
from pydantic import BaseModel, ConfigDict, Field

from service.api.deps import BearerDep, ModelsDep, SettingsDep, StoreDep, _authorized_app, hash_key
from service.api.personalizer_map import FeatureShapeError, flatten
from service.api.routes.decisions import _decide_one, log_decision, log_event
from service.api.schemas import EVENT_ID, ActionSpec, DecideRequest
from service.records import AppConfig
from service.settings import Settings
from service.store import Conflict, Store

PREFIX = "/personalizer/v1.0"
router = APIRouter(prefix=PREFIX, tags=["personalizer"])

_subscription_key = APIKeyHeader(
    name="Ocp-Apim-Subscription-Key",
    auto_error=False,
    description="an app's API key (Personalizer's subscription key)",
)


class _Lenient(BaseModel):
    # Personalizer clients may send fields Grove does not know: ignore them, do not refuse
    model_config = ConfigDict(extra="ignore")


class RankableAction(_Lenient):
    id: str = Field(min_length=1, max_length=128)
    features: list[dict[str, Any]] | None = None


class RankRequest(_Lenient):
    contextFeatures: list[dict[str, Any]] | None = Field(default=None, max_length=1000)
    actions: list[RankableAction] = Field(min_length=1, max_length=10_000)
    excludedActions: list[str] | None = Field(default=None, max_length=10_000)
    eventId: str | None = Field(default=None, pattern=EVENT_ID)
    deferActivation: bool | None = None


class RankedAction(BaseModel):
    id: str
    probability: float


class RankResponse(BaseModel):
    eventId: str
    rewardActionId: str
    ranking: list[RankedAction]


class RewardRequest(_Lenient):
    value: float


EventId = Annotated[str, Path(pattern=EVENT_ID, description="the eventId of a rank call")]


async def personalizer_key(
    credentials: BearerDep,
    subscription_key: Annotated[str | None, Depends(_subscription_key)],
) -> str:
    """The key in ``Ocp-Apim-Subscription-Key`` (or ``Authorization: Bearer``); no I/O."""
    key = subscription_key or (credentials.credentials if credentials else None)
    if not key:
        raise HTTPException(
            401, "missing key: send the app's API key as 'Ocp-Apim-Subscription-Key'"
        )
    return key


KeyDep = Annotated[str, Depends(personalizer_key)]


def _app_of(key: str, store: Store, settings: Settings) -> tuple[AppConfig, int]:
    """The app whose API key ``key`` is, and its model version (two Redis reads)."""
    name = store.key_owner(hash_key(key))
    if name is None:
        raise HTTPException(401, "unknown key: use the API key of a Grove app (not the admin key)")
    config, version = store.get_app_and_version(name)
    return _authorized_app(name, config, key, settings, store), version


def personalizer_app(key: KeyDep, store: StoreDep, settings: SettingsDep) -> tuple[AppConfig, int]:
    return _app_of(key, store, settings)


PersonalizerAppDep = Annotated[tuple[AppConfig, int], Depends(personalizer_app)]


def _ranking(answer: dict, excluded: list[str]) -> list[dict]:
    chosen = answer["action"]
    others = [r for r in answer["ranking"] if r["id"] != chosen]
    others.sort(key=lambda r: -r["probability"])  # stable: ties keep Grove's order
    ranked = [{"id": chosen, "probability": answer["probability"]}, *others]
    seen = {r["id"] for r in ranked}
    return ranked + [
        {"id": a, "probability": 0.0} for a in dict.fromkeys(excluded) if a not in seen
    ]


@router.post("/rank", status_code=201, response_model=RankResponse)
async def rank(
    body: RankRequest, key: KeyDep, store: StoreDep, models: ModelsDep, settings: SettingsDep
) -> dict:
    """Personalizer's Rank: choose among ``actions`` for ``contextFeatures``."""
    # like /apps/{app}/decide: key lookup, model and Redis work in one thread-pool call
    return await run_in_threadpool(_rank, body, key, store, models, settings)


def _rank(body: RankRequest, key: str, store: Store, models, settings: Settings) -> dict:
    config, version = _app_of(key, store, settings)
    try:
        context = flatten(body.contextFeatures)
        actions = [ActionSpec(id=a.id, features=flatten(a.features)) for a in body.actions]
    except FeatureShapeError as exc:
        raise HTTPException(422, str(exc)) from None
    ids = [a.id for a in actions]
    if len(set(ids)) != len(ids):
        raise HTTPException(422, "actions repeat an id")
    try:
        request = DecideRequest(
            event_id=body.eventId,
            context=context,
            actions=actions,
            excluded_actions=body.excludedActions or [],
            defer_activation=bool(body.deferActivation),
        )
    except ValueError as exc:  # pydantic's ValidationError: flattened names or values too long
        raise HTTPException(422, f"features Grove cannot take: {exc}") from None
    model = models.get(store, config, version)
    record, answer = _decide_one(config, model, request, settings.max_features)
    store.record_decisions(config, [record])
    log_decision(config, answer, record.deferred)
    return {
        "eventId": answer["event_id"],
        "rewardActionId": answer["action"],
        "ranking": _ranking(answer, body.excludedActions or []),
    }


@router.post("/events/{eventId}/reward", status_code=204, response_class=Response)
async def reward(
    eventId: EventId, body: RewardRequest, key: KeyDep, store: StoreDep, settings: SettingsDep
) -> Response:
    """Personalizer's Reward: ``{"value": x}`` for the event (the app's rewardRange applies)."""
    return await run_in_threadpool(_reward, eventId, body, key, store, settings)


def _reward(
    eventId: str, body: RewardRequest, key: str, store: Store, settings: Settings
) -> Response:
    config, _ = _app_of(key, store, settings)
    low, high = config.reward_range
    if not low <= body.value <= high:  # also refuses NaN
        raise HTTPException(
            422, f"reward value {body.value} is outside the app's rewardRange {[low, high]}"
        )
    outcome = store.reward(config, eventId, body.value)
    log_event("reward", config, eventId, reward=body.value, state=outcome.state)
    return Response(status_code=204)


@router.post("/events/{eventId}/activate", status_code=204, response_class=Response)
def activate(eventId: EventId, app_version: PersonalizerAppDep, store: StoreDep) -> Response:
    """Personalizer's Activate: a ``deferActivation`` event now waits for its reward."""
    config, _ = app_version
    try:
        store.activate(config, eventId)
    except Conflict:  # already active: Personalizer's activate could be repeated
        pass
    log_event("activate", config, eventId)
    return Response(status_code=204)
