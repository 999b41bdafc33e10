"""Typed job records: the states a job goes through and what its Redis hash holds."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from typing import Any

from service.redis_text import as_str


class JobState(str, Enum):
    """queued -> running -> done | failed | cancelled (a lost attempt goes back to queued)."""

    queued = "queued"
    running = "running"
    done = "done"
    failed = "failed"
    cancelled = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (JobState.done, JobState.failed, JobState.cancelled)


def _ms(value: str | None) -> float | None:
    return int(value) / 1000 if value else None


@dataclass(frozen=True)
class JobRecord:
    """One job as stored in ``keys.record(id)``; times are unix seconds (Redis server clock)."""

    id: str
    kind: str
    app: str | None
    params: dict[str, Any]
    source: dict[str, Any]
    state: JobState
    fraction: float
    message: str
    attempt: int
    max_attempts: int
    cancel_requested: bool
    created_at: float
    started_at: float | None
    heartbeat_at: float | None
    finished_at: float | None
    worker: str | None
    error: str | None
    result: Any

    @classmethod
    def from_hash(cls, raw: dict) -> JobRecord:
        h = {as_str(k): as_str(v) for k, v in raw.items()}
        return cls(
            id=h["id"],
            kind=h["kind"],
            app=h.get("app") or None,
            params=json.loads(h.get("params") or "{}"),
            source=json.loads(h.get("source") or "{}"),
            state=JobState(h["state"]),
            fraction=float(h.get("fraction") or 0.0),
            message=h.get("message") or "",
            attempt=int(h.get("attempt") or 1),
            max_attempts=int(h.get("max_attempts") or 1),
            cancel_requested=h.get("cancel") == "1",
            created_at=_ms(h["created_at"]),
            started_at=_ms(h.get("started_at")),
            heartbeat_at=_ms(h.get("heartbeat_at")),
            finished_at=_ms(h.get("finished_at")),
            worker=h.get("worker") or None,
            error=h.get("error") or None,
            result=json.loads(h["result"]) if h.get("result") else None,
        )

    def public(self, with_result: bool = True) -> dict[str, Any]:
        """The GET /jobs/{id} answer, camelCase like the rest of the API (``with_result=False``:
        the lighter GET /jobs entry)."""
        end = self.finished_at
        timings = {
            "createdAt": self.created_at,
            "startedAt": self.started_at,
            "finishedAt": end,
            "queuedSeconds": round(self.started_at - self.created_at, 3)
            if self.started_at
            else None,
            "runSeconds": round((end or self.heartbeat_at) - self.started_at, 3)
            if self.started_at and (end or self.heartbeat_at)
            else None,
        }
        answer = {
            "id": self.id,
            "kind": self.kind,
            "app": self.app,
            "state": self.state.value,
            "progress": {"fraction": self.fraction, "message": self.message},
            "attempt": self.attempt,
            "maxAttempts": self.max_attempts,
            "cancelRequested": self.cancel_requested,
            "timings": timings,
            "input": self.source,
            "params": self.params,
            "error": self.error,
        }
        if with_result:
            answer["result"] = self.result
        return answer
