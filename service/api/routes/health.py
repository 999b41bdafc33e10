"""/healthz (the process answers) and /readyz (Redis reachable and a trainer alive)."""

from __future__ import annotations

from fastapi import APIRouter, HTTPException

from service.api.deps import SettingsDep, StoreDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict:
    return {"status": "ok"}


@router.get("/readyz")
def readyz(store: StoreDep, settings: SettingsDep) -> dict:
    store.redis.ping()  # Redis errors answer 503 through the app's handler
    trainers = store.trainers_alive(within=settings.trainer_lease)
    if not trainers:
        raise HTTPException(
            503,
            f"no trainer has reported in the last {settings.trainer_lease:g}s: "
            "start one with `grove trainer` (grove serve runs one)",
        )
    return {"status": "ready", "redis": "ok", "trainers": trainers}
