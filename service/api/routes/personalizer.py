"""Azure Personalizer's Rank, Reward and Activate, single-slot and multi-slot.

Personalizer's clients (SDKs, REST code) point their endpoint at Grove and send an app's API key
as ``Ocp-Apim-Subscription-Key``; the key names the app (Personalizer had one model per
resource, Grove one per app). Every path version is served by these routes (see
:mod:`service.personalizer.versions`); requests map onto Grove's decide/reward/activate:

- ``contextFeatures`` -> the flat context (:mod:`service.api.personalizer_map`);
- ``actions`` -> the request's actions (ids; their flattened features are validated);
- ``excludedActions``, ``eventId``, ``deferActivation`` -> the same Grove fields;
- the answer (201) lists the chosen action first, then the others by probability, then the
  excluded ones with probability 0, as Personalizer did;
- multi-slot: one decision per slot (:mod:`service.personalizer.slots`).

Rewards: Personalizer took values in [-1, 1]. An app whose ``rewardRange`` is Grove's default
[0, 1] accepts [-1, 1] here, and a value below 0 is learned as 0 (Grove's learners take rewards
rescaled into [0, 1]); create the app with ``rewardRange: [-1, 1]`` to learn negative rewards
as worse than 0. An app with another range takes rewards in that range. Under 'earliest'
aggregation a second reward is ignored with 204, and a reward for a deferred event that was not
activated is ignored with 204 (both Personalizer's documented behaviour, logged). So are a
reward or an activation for an eventId never ranked or past its reward wait time: Personalizer
answered them 204 (its SDKs' own tests reward and activate ids they never ranked), and a
client written for it must not meet an exception for a late reward. Each is logged
(``reward-ignored``, ``activate-ignored``, with the reason); Grove's native routes answer 404.

Errors answer Personalizer's shape ``{"error": {"code", "message"}}``, 400 for a malformed
request (see :mod:`service.personalizer.errors`).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from contextlib import contextmanager
from typing import Annotated, Any, NamedTuple

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Path, Request, Response
from fastapi.security import APIKeyHeader
from pydantic import BaseModel, ConfigDict, Field
from starlette.routing import Match

from service import keys
from service.api import usecases
from service.api.deps import BearerDep, ServicesDep
from service.api.personalizer_map import FeatureShapeError, flatten
from service.api.schemas import EVENT_ID, flat_features
from service.api.usecases import Caller, DecideQuery, Decision, Services
from service.feature_checks import check_text
from service.logs import events
from service.personalizer.errors import PersonalizerError, bad_request
from service.personalizer.slots import (
    MULTI_SLOT_EVENT_ID,
    Slot,
    SlotError,
    check_slots,
    slot_context,
    slot_event_id,
)
from service.personalizer.versions import PREFIX, PersonalizerPaths
from service.store import Conflict, Gone, NotFound

router = APIRouter(prefix=PREFIX, tags=["personalizer"])

#: Personalizer's reward bounds, for apps on Grove's default range
PERSONALIZER_REWARDS = (-1.0, 1.0)
DEFAULT_RANGE = (0.0, 1.0)

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
    value: float = Field(strict=True)  # a JSON number (true or "1" was taken as 1.0)


class SlotRequest(_Lenient):
    id: str = Field(min_length=1, max_length=256)
    baselineAction: str = Field(min_length=1, max_length=128)
    features: list[dict[str, Any]] | None = Field(default=None, max_length=1000)
    excludedActions: list[str] | None = Field(default=None, max_length=10_000)


class MultiSlotRankRequest(_Lenient):
    contextFeatures: list[dict[str, Any]] | None = Field(default=None, max_length=1000)
    actions: list[RankableAction] = Field(min_length=1, max_length=10_000)
    slots: list[SlotRequest] = Field(min_length=1, max_length=50)
    eventId: str | None = Field(default=None, pattern=MULTI_SLOT_EVENT_ID)
    deferActivation: bool | None = None


class SlotResponse(BaseModel):
    id: str
    rewardActionId: str


class MultiSlotRankResponse(BaseModel):
    eventId: str
    slots: list[SlotResponse]


class SlotReward(_Lenient):
    slotId: str = Field(min_length=1, max_length=256)
    value: float = Field(strict=True)


class MultiSlotRewardRequest(_Lenient):
    reward: list[SlotReward] = Field(min_length=1, max_length=50)


EventId = Annotated[str, Path(pattern=EVENT_ID, description="the eventId of a rank call")]
MultiSlotEventId = Annotated[
    str,
    Path(pattern=MULTI_SLOT_EVENT_ID, description="the eventId of a multi-slot rank call"),
]


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


# -- rank ---------------------------------------------------------------------------------------
class Offered(NamedTuple):
    """An action of a rank request: its id and its features, flattened (None: none)."""

    id: str
    features: dict[str, Any] | None


def _actions(actions: list[RankableAction]) -> list[Offered]:
    """The actions with their features flattened and checked as the native decide checks
    them (``flatten``: each feature's value; ``flat_features``: names' and strings' lengths);
    the ids are ``RankableAction``'s, with the same bounds as the native ``ActionSpec``'s."""
    try:
        offered = []
        for a in actions:
            features = flatten(a.features) if a.features is not None else None
            offered.append(Offered(a.id, flat_features(features)))
    except FeatureShapeError as exc:
        raise bad_request(str(exc), "InvalidRankRequest") from None
    except ValueError as exc:  # flattened names or values too long
        message = f"action features Grove cannot take: {exc}"
        raise bad_request(message, "InvalidRankRequest") from None
    ids = [a.id for a in offered]
    if len(set(ids)) != len(ids):
        raise bad_request("actions repeat an id", "InvalidRankRequest")
    return offered


def _context(features: list[dict[str, Any]] | None) -> dict[str, Any]:
    try:
        return flatten(features)
    except FeatureShapeError as exc:
        raise bad_request(str(exc), "InvalidRankRequest") from None


def _query(
    event_id: str | None,
    context: dict[str, Any],
    actions: list[Offered],
    excluded: list[str],
    deferred: bool,
    baseline: str | None,
) -> DecideQuery:
    """The use case's query, after the checks of the native body (``DecideRequest``) that the
    request's own model, :func:`_context` and :func:`_actions` did not make: the context's
    names' and strings' lengths (its values were checked by ``flatten``; a slot adds its
    features, flattened too, and its id, which the request's parse takes as Unicode text
    only), the ids' and exclusions' text."""
    try:
        flat_features(context)
        for action in actions:
            check_text("action id", action.id)
        for action in excluded:
            check_text("excluded action", action)
    except ValueError as exc:
        raise bad_request(f"features Grove cannot take: {exc}", "InvalidRankRequest") from None
    return DecideQuery(
        context=context,
        actions=[a.id for a in actions],
        excluded=tuple(excluded),
        event_id=event_id,
        deferred=deferred,
        action_features={a.id: a.features for a in actions if a.features} or None,
        baseline=baseline,  # (Apprentice mode's: the use case drops it in Online mode)
    )


@contextmanager
def _rank_refusals(suffix: str = ""):
    """A decide the request's own contents make impossible (422: every action excluded, ...)
    answers Personalizer's InvalidRankRequest."""
    try:
        yield
    except HTTPException as exc:
        if exc.status_code != 422:
            raise
        raise bad_request(f"{exc.detail}{suffix}", "InvalidRankRequest") from None


def _ranking(decision: Decision, excluded: list[str], offered: list[str]) -> list[dict]:
    """Every offered action once, the chosen first; an excluded one with probability 0 (one the
    request did not offer is not in the ranking). Apprentice mode: the offered actions in the
    request's order (the baseline first), with the policy's probabilities (learning-loop's)."""
    if decision.baseline is not None:
        probability = dict(decision.ranking)
        return [{"id": a, "probability": probability.get(a, 0.0)} for a in offered]
    chosen = decision.action
    others = [{"id": a, "probability": p} for a, p in decision.ranking if a != chosen]
    others.sort(key=lambda r: -r["probability"])  # stable: ties keep Grove's order
    ranked = [{"id": chosen, "probability": decision.probability}, *others]
    if not excluded:
        return ranked
    seen, known = {r["id"] for r in ranked}, set(offered)
    return ranked + [
        {"id": a, "probability": 0.0} for a in dict.fromkeys(excluded)
        if a not in seen and a in known
    ]


@router.post("/rank", status_code=201, response_model=RankResponse)
async def rank(body: RankRequest, caller: CallerDep, services: ServicesDep) -> dict:
    """Personalizer's Rank: choose among ``actions`` for ``contextFeatures``."""
    actions = _actions(body.actions)
    query = _query(
        body.eventId,
        _context(body.contextFeatures),
        actions,
        body.excludedActions or [],
        bool(body.deferActivation),
        actions[0].id,
    )
    with _rank_refusals():
        decision = await usecases.decide(services, caller, query)
    return {
        "eventId": decision.event_id,
        "rewardActionId": decision.baseline or decision.action,
        "ranking": _ranking(decision, body.excludedActions or [], [a.id for a in actions]),
    }


@router.post("/multislot/rank", status_code=201, response_model=MultiSlotRankResponse)
async def rank_multi_slot(
    body: MultiSlotRankRequest, caller: CallerDep, services: ServicesDep
) -> dict:
    """Personalizer's multi-slot Rank: one action per slot, never one action twice."""
    context = _context(body.contextFeatures)
    actions = _actions(body.actions)
    slots = [
        Slot(s.id, s.baselineAction, s.features, tuple(s.excludedActions or ()))
        for s in body.slots
    ]
    try:
        check_slots(slots, [a.id for a in actions])
        contexts = [slot_context(context, slot) for slot in slots]
    except (SlotError, FeatureShapeError) as exc:
        raise bad_request(str(exc), "InvalidRankRequest") from None
    event_id = body.eventId or uuid.uuid4().hex
    queries = []
    for slot, slot_features in zip(slots, contexts, strict=True):
        deferred = bool(body.deferActivation)
        query = _query(None, slot_features, actions, list(slot.excluded), deferred,
                       slot.baseline)
        # the slot's own eventId ('#' is outside the pattern a client's eventId must match),
        # repeatable if the client named the event
        queries.append(dataclasses.replace(query, event_id=slot_event_id(event_id, slot.id),
                                           repeatable=body.eventId is not None))
    # slots in order, each excluding the earlier slots' actions; all recorded or none
    with _rank_refusals(" (requests[i] is slots[i])"):
        decisions = await usecases.decide_batch(services, caller, queries, distinct=True)
    await _remember_slots(services, caller, event_id, decisions)
    return {
        "eventId": event_id,
        "slots": [
            {"id": slot.id, "rewardActionId": decision.baseline or decision.action}
            for slot, decision in zip(slots, decisions, strict=True)
        ],
    }


async def _remember_slots(
    services: Services, caller: Caller, event_id: str, decisions: list[Decision]
) -> None:
    """The event's slot decisions, for multi-slot activate (which names the event only)."""
    config = await usecases.app_of(services, caller)
    store = services.store
    await store.bounded(
        store.aio.set(
            keys.slots(config.name, event_id),
            json.dumps([d.event_id for d in decisions]),
            px=config.wait_ms + int(services.settings.decision_grace * 1000),
        )
    )


# -- reward and activate ------------------------------------------------------------------------
async def _accepted_value(services: Services, caller: Caller, value: float) -> float:
    """The reward to hand to the use case. In [0, 1] it goes as is (the app's range is checked
    there); outside, an app on Grove's default range takes Personalizer's [-1, 1], a negative
    value clipped to 0 as the learner would (see the module doc)."""
    if 0.0 <= value <= 1.0:
        return value
    config = await usecases.app_of(services, caller)
    if tuple(config.reward_range) != DEFAULT_RANGE:
        return value
    low, high = PERSONALIZER_REWARDS
    if not low <= value <= high:  # also refuses NaN
        raise bad_request(
            f"reward value {value} is outside [-1, 1] (Personalizer's range)",
            "InvalidRewardRequest",
        )
    return min(DEFAULT_RANGE[1], max(DEFAULT_RANGE[0], value))


async def _join_reward(services: Services, caller: Caller, event_id: str, value: float) -> None:
    """Record one reward; Personalizer's ignored cases answer 204 (see the module doc)."""
    try:
        await usecases.reward(services, caller, event_id, value)
    except Gone:  # (the app, not the event)
        raise
    except (Conflict, NotFound) as exc:
        # the store's two conflicts (a second reward under 'earliest', a deferred event not
        # activated) and an eventId unknown or past its wait: Personalizer accepted and
        # ignored them all
        events.info("reward-ignored", extra={"eventId": event_id, "reason": exc.detail})
    except HTTPException as exc:
        if exc.status_code != 422:
            raise
        raise bad_request(str(exc.detail), "InvalidRewardRequest") from None


@router.post("/events/{eventId}/reward", status_code=204, response_class=Response)
async def reward(
    eventId: EventId, body: RewardRequest, caller: CallerDep, services: ServicesDep
) -> Response:
    """Personalizer's Reward: ``{"value": x}`` for the event."""
    value = body.value
    if not 0.0 <= value <= 1.0:
        value = await _accepted_value(services, caller, value)
    await _join_reward(services, caller, eventId, value)
    return Response(status_code=204)


@router.post("/multislot/events/{eventId}/reward", status_code=204, response_class=Response)
async def reward_multi_slot(
    eventId: MultiSlotEventId,
    body: MultiSlotRewardRequest,
    caller: CallerDep,
    services: ServicesDep,
) -> Response:
    """Personalizer's multi-slot Reward: ``{"reward": [{"slotId", "value"}, ...]}``."""
    slot_ids = [r.slotId for r in body.reward]
    if len(set(slot_ids)) != len(slot_ids):
        raise bad_request("the reward list repeats a slotId", "InvalidRewardRequest")
    values = [r.value for r in body.reward]
    if not all(0.0 <= v <= 1.0 for v in values):  # all checked before any is recorded
        values = [await _accepted_value(services, caller, v) for v in values]
    for slot_id, value in zip(slot_ids, values, strict=True):
        await _join_reward(services, caller, slot_event_id(eventId, slot_id), value)
    return Response(status_code=204)


async def _activate(services: Services, caller: Caller, event_id: str) -> None:
    try:
        await usecases.activate(services, caller, event_id)
    except Conflict:  # already active: Personalizer's activate could be repeated
        pass
    except Gone:  # (the app, not the event)
        raise
    except NotFound as exc:  # unknown or past its wait: Personalizer ignored it (module doc)
        events.info("activate-ignored", extra={"eventId": event_id, "reason": exc.detail})


@router.post("/events/{eventId}/activate", status_code=204, response_class=Response)
async def activate(eventId: EventId, caller: CallerDep, services: ServicesDep) -> Response:
    """Personalizer's Activate: a ``deferActivation`` event now waits for its reward."""
    await _activate(services, caller, eventId)
    return Response(status_code=204)


async def _slot_events(services: Services, caller: Caller, event_id: str) -> list[str]:
    config = await usecases.app_of(services, caller)
    store = services.store
    known = await store.bounded(store.aio.get(keys.slots(config.name, event_id)))
    if known is None:  # ignored, as Personalizer did (see the module doc)
        reason = f"multi-slot eventId {event_id!r} is unknown or its reward wait time is over"
        events.info("activate-ignored", extra={"eventId": event_id, "reason": reason})
        return []
    return json.loads(known)


@router.post("/multislot/events/{eventId}/activate", status_code=204, response_class=Response)
async def activate_multi_slot(
    eventId: MultiSlotEventId, caller: CallerDep, services: ServicesDep
) -> Response:
    """Personalizer's multi-slot Activate: every slot of the event waits for its reward."""
    for event_id in await _slot_events(services, caller, eventId):
        await _activate(services, caller, event_id)
    return Response(status_code=204)


# -- what Grove does not serve ------------------------------------------------------------------
def _routers() -> list[APIRouter]:
    """Every Personalizer router: this module's, configuration/model/logs, jobs."""
    # they import this module's CallerDep
    from service.api.routes import personalizer_admin, personalizer_jobs

    return [router, personalizer_admin.router, personalizer_jobs.router]


_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


async def unsupported(request: Request) -> None:
    """Any other ``/personalizer`` route: 405 if the path exists with other methods, else 501
    ``UnsupportedOperation`` (not 404: a client can tell it from a missing resource)."""
    allowed = set()
    for served in _routers():
        for route in served.routes:
            match, _ = route.matches(request.scope)
            if match == Match.PARTIAL:
                allowed |= set(getattr(route, "methods", ()) or ())
    if allowed:
        raise PersonalizerError(
            405,
            "MethodNotAllowed",
            f"{request.method} is not allowed on {request.url.path}; "
            f"allowed: {', '.join(sorted(allowed))}",
            headers={"Allow": ", ".join(sorted(allowed))},
        )
    raise PersonalizerError(
        501,
        "UnsupportedOperation",
        f"Grove does not serve {request.method} {request.url.path} (a Personalizer operation "
        "Grove has no counterpart for, or no Personalizer operation at all); see the README's "
        "Personalizer compatibility table",
    )


def install(app: FastAPI) -> None:
    """Serve Personalizer's routes on ``app``: the routers, both path styles, the rest 501."""
    for served in _routers():
        app.include_router(served)
    app.add_api_route(PREFIX, unsupported, methods=_METHODS, include_in_schema=False)
    app.add_api_route(
        PREFIX + "/{rest:path}", unsupported, methods=_METHODS, include_in_schema=False
    )
    app.add_middleware(PersonalizerPaths)
