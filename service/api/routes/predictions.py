"""/apps/{app}/predict, /learn and /interactions: apps of a supervised kind (``mcts-is``).

``learn`` queues a labeled event in the app's learning stream (Lua ``LABEL``); the trainer
learns it with the kind's ``learn_labeled`` and publishes snapshots exactly as it does for
rewards (same consumer group, same exactly-once resume from the snapshot's offset).
``predict`` and ``interactions`` read the latest snapshot through the model cache. A route the
app's kind does not serve (predict on a bandit app, ...) is a 422 naming the routes it serves.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from service.api import usecases
from service.api.deps import CallerDep, ServicesDep
from service.api.schemas import (
    InteractionsResponse,
    LearnRequest,
    LearnResponse,
    PredictRequest,
    PredictResponse,
)

router = APIRouter(prefix="/apps/{app}", tags=["predictions"])


@router.post("/predict", response_model=PredictResponse)
async def predict(body: PredictRequest, caller: CallerDep, services: ServicesDep) -> dict:
    """P(y = 1 | x) from the latest snapshot, with the leaf interactions ``x`` falls in."""
    predicted = await usecases.predict(services, caller, body.x)
    answer = predicted.prediction
    return {
        "probability": answer.probability,
        "interactions": answer.interactions,
        "trees": answer.trees,
        "model_version": predicted.model_version,
    }


@router.post("/learn", status_code=status.HTTP_202_ACCEPTED, response_model=LearnResponse)
async def learn(body: LearnRequest, caller: CallerDep, services: ServicesDep) -> dict:
    """Queue a labeled event (x, y); the trainer learns it and publishes a new snapshot."""
    event_id = await usecases.learn(services, caller, body.x, body.y, body.event_id)
    return {"event_id": event_id, "state": "queued"}


@router.get("/interactions", response_model=InteractionsResponse)
async def interactions(
    caller: CallerDep,
    services: ServicesDep,
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
    found, version = await usecases.interactions(services, caller, top, alpha, leaves_only)
    trees = [
        {**tree, "leaves": tree["leaves"][:max_leaves], "n_leaves": len(tree["leaves"])}
        for tree in found["trees"]
    ]
    return {"interactions": found["interactions"], "trees": trees, "model_version": version}
