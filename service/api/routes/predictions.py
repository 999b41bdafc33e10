"""/apps/{app}/predict, /learn and /interactions: apps of a supervised kind (``mcts-is``).

``learn`` queues a labeled event in the app's learning stream (Lua ``LABEL``); the trainer
learns it with the kind's ``learn_labeled`` and publishes snapshots exactly as it does for
rewards (same consumer group, same exactly-once resume from the snapshot's offset).
``predict`` and ``interactions`` read the latest snapshot through the model cache. A route the
app's kind does not serve (predict on a bandit app, ...) is a 422 naming the routes it serves.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, status

from service.api.deps import AppVersionDep, ModelsDep, SettingsDep, StoreDep
from service.api.schemas import (
    InteractionsResponse,
    LearnRequest,
    LearnResponse,
    PredictRequest,
    PredictResponse,
)
from service.logs import events
from service.models import WrongKind, model_kind
from service.records import AppConfig

router = APIRouter(prefix="/apps/{app}", tags=["predictions"])


def _require(config: AppConfig, operation: str) -> Callable[..., Any]:
    try:
        return model_kind(config.policy_kind).require(operation, config.name)
    except WrongKind as exc:
        raise HTTPException(422, str(exc)) from None


def _check_size(x: dict, max_features: int) -> None:
    if len(x) > max_features:
        raise HTTPException(
            422,
            f"x has {len(x)} fields, over the limit of {max_features} (GROVE_MAX_FEATURES)",
        )


@router.post("/predict", response_model=PredictResponse)
def predict(
    body: PredictRequest,
    app_version: AppVersionDep,
    store: StoreDep,
    models: ModelsDep,
    settings: SettingsDep,
) -> dict:
    """P(y = 1 | x) from the latest snapshot, with the leaf interactions ``x`` falls in."""
    config, version = app_version
    predict_fn = _require(config, "predict")
    _check_size(body.x, settings.max_features)
    model = models.get(store, config, version)
    try:
        with model.lock:  # the learner caches its extracted trees: one request at a time
            answer = predict_fn(model.learner, body.x)
    except (ValueError, TypeError) as exc:
        raise HTTPException(422, f"cannot predict for this x: {exc}") from None
    return {
        "probability": answer.probability,
        "interactions": answer.interactions,
        "trees": answer.trees,
        "model_version": model.version,
    }


@router.post("/learn", status_code=status.HTTP_202_ACCEPTED, response_model=LearnResponse)
def learn(
    body: LearnRequest, app_version: AppVersionDep, store: StoreDep, settings: SettingsDep
) -> dict:
    """Queue a labeled event (x, y); the trainer learns it and publishes a new snapshot."""
    config, _ = app_version
    _require(config, "learn_labeled")
    _check_size(body.x, settings.max_features)
    event_id = body.event_id or uuid.uuid4().hex
    store.learn_labeled(config, event_id, body.x, body.y)
    events.info("learn", extra={"app": config.name, "eventId": event_id, "label": body.y})
    return {"event_id": event_id, "state": "queued"}


@router.get("/interactions", response_model=InteractionsResponse)
def interactions(
    app_version: AppVersionDep,
    store: StoreDep,
    models: ModelsDep,
    top: Annotated[int, Query(ge=1, le=1000, description="at most this many")] = 100,
    alpha: Annotated[
        float, Query(gt=0, le=1, description="level of the Bonferroni-corrected chi-square test")
    ] = 0.05,
    leaves_only: Annotated[
        bool,
        Query(alias="leavesOnly", description="only the leaves of the extracted trees"),
    ] = False,
    max_leaves: Annotated[
        int, Query(alias="maxLeaves", ge=0, le=100_000, description="leaves listed per tree")
    ] = 100,
) -> dict:
    """The selected interactions ranked by chi-square, and each extracted tree's leaves."""
    config, version = app_version
    interactions_fn = _require(config, "interactions")
    model = models.get(store, config, version)
    with model.lock:
        found = interactions_fn(model.learner, top, alpha, leaves_only)
    trees = [
        {**tree, "leaves": tree["leaves"][:max_leaves], "n_leaves": len(tree["leaves"])}
        for tree in found["trees"]
    ]
    return {"interactions": found["interactions"], "trees": trees, "model_version": model.version}
