"""/apps/{app}/decide, /decide/batch, /reward and /activate (the app's API key).

Each route translates its body into :mod:`service.api.usecases` arguments and the result back;
the checks and the work live there. ``decide`` and ``reward`` answer JSON built once (no second
validation of the answer by its response model, which stays for the OpenAPI schema); the same
two functions also serve the fast path of :mod:`service.api.fast`.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Response

from service.api import usecases
from service.api.deps import CallerDep, ServicesDep
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
from service.api.usecases import DecideQuery

router = APIRouter(prefix="/apps/{app}", tags=["decisions"])


def json_response(content: dict) -> Response:
    """A 200 JSON answer, rendered as Starlette's JSONResponse renders."""
    body = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return Response(body.encode(), media_type="application/json")


@router.post("/decide", response_model=DecideResponse)
async def decide(body: DecideRequest, caller: CallerDep, services: ServicesDep) -> Response:
    """Choose an action for a context; the decision waits ``rewardWaitTime`` for its reward."""
    decision = await usecases.decide(services, caller, DecideQuery.of(body))
    return Response(decision.as_json(), media_type="application/json")


@router.post("/decide/batch", response_model=BatchDecideResponse)
async def decide_batch(body: BatchDecideRequest, caller: CallerDep, services: ServicesDep) -> dict:
    """Up to 1000 decisions in one call, recorded all or none."""
    queries = [DecideQuery.of(r) for r in body.requests]
    decisions = await usecases.decide_batch(services, caller, queries)
    return {"responses": [d.as_answer() for d in decisions]}


@router.post("/reward", response_model=RewardResponse)
async def reward(body: RewardRequest, caller: CallerDep, services: ServicesDep) -> Response:
    """Report the reward of a decision; it joins the decision atomically and is queued to learn."""
    outcome = await usecases.reward(services, caller, body.event_id, body.reward)
    return json_response(
        {
            "eventId": body.event_id,
            "state": outcome.state,
            "rewardSum": outcome.reward_sum,
            "rewardCount": outcome.reward_count,
        }
    )


@router.post("/activate", response_model=ActivateResponse)
async def activate(body: ActivateRequest, caller: CallerDep, services: ServicesDep) -> dict:
    """Activate a decision made with ``deferActivation``: from now on it waits for its reward."""
    await usecases.activate(services, caller, body.event_id)
    return {"event_id": body.event_id, "activated": True}
