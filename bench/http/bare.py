"""The floor of the HTTP benchmark: FastAPI answering Grove's decide and reward with constants.

No auth, no Redis, no model: what one uvicorn process running FastAPI can do with requests of
the same shape (same paths, Personalizer's rank and multi-slot rank among them, a JSON body
parsed, a JSON answer with a ranking as long as the Grove app's). ``BENCH_ACTIONS``
(environment) sets the ranking's length (default 10).

    python -m uvicorn bench.http.bare:app --port 8001 --no-access-log --log-level warning
"""

from __future__ import annotations

import os
import uuid

from fastapi import FastAPI, Request

app = FastAPI()
_N = int(os.environ.get("BENCH_ACTIONS", "10"))
_RANKING = [{"id": f"ad{k}", "probability": 1.0 / _N} for k in range(_N)]


@app.post("/apps/{app_name}/decide")
async def decide(app_name: str, request: Request) -> dict:
    body = await request.json()
    return {
        "eventId": body.get("eventId") or uuid.uuid4().hex,
        "action": "ad0",
        "probability": 1.0 / _N,
        "ranking": _RANKING,
        "modelVersion": 1,
    }


@app.post("/apps/{app_name}/reward")
async def reward(app_name: str, request: Request) -> dict:
    body = await request.json()
    return {"eventId": body["eventId"], "state": "joined", "rewardSum": 1.0, "rewardCount": 1}


@app.post("/personalizer/v1.0/rank", status_code=201)
async def rank(request: Request) -> dict:
    body = await request.json()
    return {"eventId": body.get("eventId") or uuid.uuid4().hex, "rewardActionId": "ad0",
            "ranking": _RANKING}


@app.post("/personalizer/v1.1-preview.1/multislot/rank", status_code=201)
async def rank_multi_slot(request: Request) -> dict:
    body = await request.json()
    return {"eventId": body.get("eventId") or uuid.uuid4().hex,
            "slots": [{"id": slot["id"], "rewardActionId": f"ad{k}"}
                      for k, slot in enumerate(body["slots"])]}


@app.get("/healthz")
async def healthz() -> dict:
    return {"status": "ok"}
