"""Submit, cancel and reap jobs: the job records (:class:`JobStore`) plus the rq queue.

rq carries one message per attempt, ``service.jobs.worker.execute(job_id, attempt)``, with
its ``JSONSerializer`` (no pickle; the dataset itself stays in the job's Redis key as the bytes
that were uploaded). Why Grove keeps its own record beside rq's job: progress and cancel at
the next progress report, and a lost worker noticed within seconds (rq's abandoned-job
cleanup waits for a heartbeat TTL of at least a minute plus its maintenance interval, and
its retry would run the job twice if the lost horse were still alive).
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import redis
from rq import Queue
from rq.serializers import JSONSerializer

from service.jobs.records import JobRecord, JobState
from service.jobs.store import JobStore
from service.settings import Settings

log = logging.getLogger("grove.jobs")

#: the function an rq worker runs for one attempt of a job
EXECUTE = "service.jobs.worker.execute"


def rq_queue(client: redis.Redis, settings: Settings) -> Queue:
    return Queue(settings.job_queue, connection=client, serializer=JSONSerializer)


class JobQueue:
    """The jobs API of the service (used by the API routes, the workers and the CLI)."""

    def __init__(self, client: redis.Redis, settings: Settings):
        self.settings = settings
        self.store = JobStore(client, settings)
        self.queue = rq_queue(client, settings)

    def _enqueue(self, job_id: str, attempt: int, pipeline=None) -> None:
        self.queue.enqueue(
            EXECUTE,
            args=(job_id, attempt),
            job_id=f"{job_id}-{attempt}",
            description=f"grove job {job_id} attempt {attempt}",
            job_timeout=int(self.settings.job_timeout),
            result_ttl=0,  # the outcome is in Grove's record
            failure_ttl=int(self.settings.job_retention),
            pipeline=pipeline,
        )

    def submit(
        self,
        kind: str,
        params: dict[str, Any],
        source: dict[str, Any],
        app: str | None = None,
        data: bytes | None = None,
    ) -> str:
        """Store the job (and its uploaded bytes) and queue its first attempt, in one MULTI."""
        job_id = uuid.uuid4().hex
        with self.store.redis.pipeline(transaction=True) as pipe:
            pipe.multi()  # rq's enqueue joins an explicit MULTI
            self.store.create(job_id, kind, app, params, source, data, pipe)
            self._enqueue(job_id, 1, pipeline=pipe)
            pipe.execute()
        return job_id

    def get(self, job_id: str, reap: bool = True) -> JobRecord | None:
        """The job's record; a running job whose heartbeat stopped is reaped on the way, so a
        reader never sees ``running`` for a job nobody runs (even with no worker left)."""
        record = self.store.get(job_id)
        running = record is not None and record.state is JobState.running
        if reap and running and self.reap(job_id) != "alive":
            record = self.store.get(job_id)
        return record

    def cancel(self, job_id: str) -> str:
        """'cancelled' (it was queued), 'cancelling' (running: it stops at its next progress
        report), 'gone', or the state of a job that had already ended."""
        return self.store.cancel(job_id)

    def reap(
        self,
        job_id: str,
        reason: str = "its worker stopped sending heartbeats",
        attempt: int | None = None,
        lost_after: float | None = None,
    ) -> str:
        """'retry' (requeued), 'failed' or 'cancelled' (just ended: lost), 'alive', or the
        state of a job that is not running ('queued', 'done', ..., 'gone')."""
        outcome, detail = self.store.reap(job_id, reason, attempt, lost_after)
        if outcome == "retry":
            log.warning("job %s: %s; requeued as attempt %s", job_id, reason, detail)
            self._enqueue(job_id, detail)
        elif outcome in ("failed", "cancelled"):
            log.warning("job %s: %s; now %s", job_id, reason, outcome)
        elif outcome == "unchanged":
            return detail
        return outcome

    def workers(self) -> list[dict[str, Any]]:
        """The rq workers registered on the queue (they expire when they stop beating)."""
        from rq import Worker

        return [
            {
                "name": w.name,
                "hostname": w.hostname,
                "pid": w.pid,
                "state": w.get_state(),
                "currentJob": w.get_current_job_id(),
                "lastHeartbeat": w.last_heartbeat.timestamp() if w.last_heartbeat else None,
            }
            for w in Worker.all(queue=self.queue)
        ]

    def reap_all(self) -> None:
        """Reap every lost running job; forget the ids of jobs that have ended."""
        ended = []
        for job_id in self.store.active_ids():
            outcome = self.reap(job_id)
            if outcome not in ("alive", "retry", JobState.queued.value):
                ended.append(job_id)
        self.store.forget_active(ended)
