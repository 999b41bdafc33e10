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
from fastapi.security import APIKeyHeader
from pydantic import BaseModel, ConfigDict, Field

from service.api import usecases
from service.api.deps import BearerDep, ServicesDep
from service.api.personalizer_map import FeatureShapeError, flatten
from service.api.schemas import EVENT_ID, ActionSpec, DecideRequest
from service.api.usecases import Caller, DecideQuery, Decision
from service.store import Conflict

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


async def personalizer_caller(
    credentials: BearerDep,
    subscription_key: Annotated[str | None, Depends(_subscription_key)],
) -> Caller:
    """The key in ``Ocp-Apim-Subscription-Key`` (or ``Authorization: Bearer``), which names the
    app; no I/O (the use case checks it)."""
    key = subscription_key or (credentials.credentials if credentials else None)
    if not key:
        raise HTTPException(
            401, "missing key: send the app's API key as 'Ocp-Apim-Subscription-Key'"
        )
    return Caller(key, app=None)


CallerDep = Annotated[Caller, Depends(personalizer_caller)]


def _ranking(decision: Decision, excluded: list[str]) -> list[dict]:
    chosen = decision.action
    others = [{"id": a, "probability": p} for a, p in decision.ranking if a != chosen]
    others.sort(key=lambda r: -r["probability"])  # stable: ties keep Grove's order
    ranked = [{"id": chosen, "probability": decision.probability}, *others]
    seen = {r["id"] for r in ranked}
    return ranked + [
        {"id": a, "probability": 0.0} for a in dict.fromkeys(excluded) if a not in seen
    ]


@router.post("/rank", status_code=201, response_model=RankResponse)
async def rank(body: RankRequest, caller: CallerDep, services: ServicesDep) -> dict:
    """Personalizer's Rank: choose among ``actions`` for ``contextFeatures``."""
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
    decision = await usecases.decide(services, caller, DecideQuery.of(request))
    return {
        "eventId": decision.event_id,
        "rewardActionId": decision.action,
        "ranking": _ranking(decision, body.excludedActions or []),
    }


@router.post("/events/{eventId}/reward", status_code=204, response_class=Response)
async def reward(
    eventId: EventId, body: RewardRequest, caller: CallerDep, services: ServicesDep
) -> Response:
    """Personalizer's Reward: ``{"value": x}`` for the event (the app's rewardRange applies)."""
    await usecases.reward(services, caller, eventId, body.value)
    return Response(status_code=204)


@router.post("/events/{eventId}/activate", status_code=204, response_class=Response)
async def activate(eventId: EventId, caller: CallerDep, services: ServicesDep) -> Response:
    """Personalizer's Activate: a ``deferActivation`` event now waits for its reward."""
    try:
        await usecases.activate(services, caller, eventId)
    except Conflict:  # already active: Personalizer's activate could be repeated
        pass
    return Response(status_code=204)
