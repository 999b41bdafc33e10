"""The ``progress(fraction, message)`` callable a running job reports through, and its
heartbeat thread: both keep the job's record alive; a report is where a cancel takes effect."""

from __future__ import annotations

import logging
import threading
import time

import redis

from service.jobs.store import JobStore

log = logging.getLogger("grove.jobs")


class JobCancelled(Exception):
    """Raised by ``progress`` when the job was cancelled (DELETE /jobs/{id}): stop the work."""


class JobLost(Exception):
    """Raised by ``progress`` when this attempt no longer owns the job (it was declared lost
    and requeued, or its record is gone): stop without writing anything."""


class Reporter:
    """``reporter(fraction, message)``: writes at most every ``min_interval`` seconds (and
    always the first and the final report); each write also checks for a cancel."""

    def __init__(self, store: JobStore, job_id: str, attempt: int, min_interval: float = 0.2):
        self.store, self.job_id, self.attempt = store, job_id, attempt
        self.min_interval = min_interval
        self._last = -float("inf")

    def __call__(self, fraction: float, message: str = "") -> None:
        now = time.monotonic()
        if now - self._last < self.min_interval and fraction < 1.0:
            return
        self._last = now
        try:
            answer = self.store.progress(self.job_id, self.attempt, fraction, str(message)[:500])
        except redis.RedisError as exc:  # a report is not worth failing the job for
            log.warning("job %s: progress not recorded (%s)", self.job_id, exc)
            return
        if answer == "cancel":
            raise JobCancelled("cancelled on request")
        if answer == "lost":
            raise JobLost(f"job {self.job_id} attempt {self.attempt} no longer owns the job")


class Heartbeat:
    """A thread that refreshes the job's ``heartbeat_at`` every ``interval`` seconds while a
    long step runs between progress reports (the reaper declares silent jobs lost)."""

    def __init__(self, store: JobStore, job_id: str, attempt: int, interval: float):
        self.store, self.job_id, self.attempt, self.interval = store, job_id, attempt, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="grove-job-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if self.store.progress(self.job_id, self.attempt, None, "") == "lost":
                    return
            except redis.RedisError as exc:
                log.warning("job %s: heartbeat failed (%s)", self.job_id, exc)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
