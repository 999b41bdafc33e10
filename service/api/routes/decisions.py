"""/apps/{app}/decide, /decide/batch, /reward and /activate (the app's API key)."""

from __future__ import annotations

import uuid

from fastapi import APIRouter, HTTPException
from fastapi.concurrency import run_in_threadpool

from service.api.deps import (
    AppName,
    AppVersionDep,
    BearerDep,
    ModelsDep,
    SettingsDep,
    StoreDep,
    app_with_version,
)
from service.api.model_cache import ServedModel
from service.api.schemas import (
    ActivateRequest,
    ActivateResponse,
    BatchDecideRequest,
    BatchDecideResponse,
    DecideRequest,
    DecideResponse,
    RewardRequest,
    RewardResponse,
)
from service.logs import events
from service.models import WrongKind
from service.records import AppConfig, NewDecision

router = APIRouter(prefix="/apps/{app}", tags=["decisions"])


def log_decision(config: AppConfig, answer: dict, deferred: bool) -> None:
    """One structured line per recorded decision (the eventId links it to its reward)."""
    events.info(
        "decide",
        extra={
            "app": config.name,
            "eventId": answer["event_id"],
            "action": answer["action"],
            "probability": answer["probability"],
            "modelVersion": answer["model_version"],
            "deferred": deferred,
        },
    )


def log_event(what: str, config: AppConfig, event_id: str, **fields) -> None:
    events.info(what, extra={"app": config.name, "eventId": event_id, **fields})


def _decide_one(
    config: AppConfig, model: ServedModel, body: DecideRequest, max_features: int
) -> tuple[NewDecision, dict]:
    if len(body.context) > max_features:
        raise HTTPException(
            422,
            f"the context has {len(body.context)} features, over the limit of {max_features} "
            "(GROVE_MAX_FEATURES)",
        )
    try:  # an app of a supervised kind (mcts-is) has no decide: say which routes it serves
        decide = model.kind.require("decide", config.name)
    except WrongKind as exc:
        raise HTTPException(422, str(exc)) from None
    actions = [a.id for a in body.actions] if body.actions is not None else config.action_ids
    if not actions:
        raise HTTPException(
            422,
            f"no actions to choose from: app {config.name!r} has none and the request gives none",
        )
    excluded = set(body.excluded_actions)
    if not [a for a in actions if a not in excluded]:
        raise HTTPException(422, "every action is excluded (excludedActions)")
    try:
        with model.lock:
            choice = decide(model.learner, body.context, actions, list(excluded))
    except (ValueError, TypeError) as exc:
        raise HTTPException(422, f"cannot decide for this context: {exc}") from None
    event_id = body.event_id or uuid.uuid4().hex
    record = NewDecision(
        event_id,
        body.context,
        choice.action,
        choice.probability,
        model.version,
        deferred=body.defer_activation,
    )
    answer = {
        "event_id": event_id,
        "action": choice.action,
        "probability": choice.probability,
        "ranking": [{"id": a, "probability": p} for a, p in choice.ranking],
        "model_version": model.version,
    }
    return record, answer


# decide and reward are the hot path: ``async`` routes whose blocking part (auth, model, Redis)
# runs in ONE thread-pool call. As sync routes with the sync AppVersionDep, FastAPI made two
# thread hops per request (the dependency, then the route); on a busy machine each hop waits for
# the GIL and the pool's queue (bench/README_http.md).
@router.post("/decide", response_model=DecideResponse)
async def decide(
    app: AppName,
    body: DecideRequest,
    credentials: BearerDep,
    store: StoreDep,
    models: ModelsDep,
    settings: SettingsDep,
) -> dict:
    """Choose an action for a context; the decision waits ``rewardWaitTime`` for its reward."""
    return await run_in_threadpool(_decide, app, body, credentials, store, models, settings)


def _decide(app, body, credentials, store, models, settings) -> dict:
    config, version = app_with_version(app, credentials, settings, store)
    model = models.get(store, config, version)
    record, answer = _decide_one(config, model, body, settings.max_features)
    store.record_decisions(config, [record])
    log_decision(config, answer, body.defer_activation)
    return answer


@router.post("/decide/batch", response_model=BatchDecideResponse)
def decide_batch(
    body: BatchDecideRequest,
    app_version: AppVersionDep,
    store: StoreDep,
    models: ModelsDep,
    settings: SettingsDep,
) -> dict:
    """Up to 1000 decisions in one call, recorded all or none."""
    if len(body.requests) > settings.max_batch:
        raise HTTPException(422, f"at most {settings.max_batch} requests per batch")
    given = [r.event_id for r in body.requests if r.event_id is not None]
    if len(given) != len(set(given)):
        raise HTTPException(422, "the batch repeats an eventId")
    config, version = app_version
    model = models.get(store, config, version)
    pairs = []
    for i, request in enumerate(body.requests):
        try:
            pairs.append(_decide_one(config, model, request, settings.max_features))
        except HTTPException as exc:  # say which request of the batch is wrong
            raise HTTPException(exc.status_code, f"requests[{i}]: {exc.detail}") from None
    store.record_decisions(config, [record for record, _ in pairs])
    for record, answer in pairs:
        log_decision(config, answer, record.deferred)
    return {"responses": [answer for _, answer in pairs]}


@router.post("/reward", response_model=RewardResponse)
async def reward(
    app: AppName,
    body: RewardRequest,
    credentials: BearerDep,
    store: StoreDep,
    settings: SettingsDep,
) -> dict:
    """Report the reward of a decision; it joins the decision atomically and is queued to learn."""
    return await run_in_threadpool(_reward, app, body, credentials, store, settings)


def _reward(app, body, credentials, store, settings) -> dict:
    config, _ = app_with_version(app, credentials, settings, store)
    low, high = config.reward_range
    if not low <= body.reward <= high:
        raise HTTPException(
            422, f"reward {body.reward} is outside the app's rewardRange {[low, high]}"
        )
    outcome = store.reward(config, body.event_id, body.reward)
    log_event("reward", config, body.event_id, reward=body.reward, state=outcome.state)
    return {
        "event_id": body.event_id,
        "state": outcome.state,
        "reward_sum": outcome.reward_sum,
        "reward_count": outcome.reward_count,
    }


@router.post("/activate", response_model=ActivateResponse)
def activate(body: ActivateRequest, app_version: AppVersionDep, store: StoreDep) -> dict:
    """Activate a decision made with ``deferActivation``: from now on it waits for its reward."""
    config, _ = app_version
    store.activate(config, body.event_id)
    log_event("activate", config, body.event_id)
    return {"event_id": body.event_id, "activated": True}
