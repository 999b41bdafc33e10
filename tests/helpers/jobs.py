"""Batch jobs against a real `grove serve` (the ``grove`` fixture of tests/service/jobs/
conftest.py): its settings, its worker, and uploading and following jobs over HTTP."""

from __future__ import annotations

import json
import os
import time

import pandas as pd
import redis

from .factories import ADMIN

MAX_UPLOAD = 200_000
LOST_AFTER = 2.0
RETENTION = 120


def _worker_pid(client: redis.Redis, env: dict) -> int | None:
    """pid of the (live) rq worker listening on this module's queue."""
    from rq import Queue, Worker

    queue = Queue(env["GROVE_JOB_QUEUE"], connection=client)
    for worker in Worker.all(queue=queue):
        if worker.pid and _alive(worker.pid):
            return worker.pid
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def csv_bytes(frame: pd.DataFrame) -> bytes:
    return frame.to_csv(index=False).encode()


def submit(
    http, data: bytes, params: dict, headers=ADMIN, filename="data.csv",
    kind="feature-selection", **fields,
):
    return http.post(
        f"/jobs/{kind}",
        files={"file": (filename, data)},
        data={"params": json.dumps(params), **fields},
        headers=headers,
    )


def follow(http, job_id: str, until=("done", "failed", "cancelled"), timeout=40.0, headers=ADMIN):
    """Poll the job until its state is in ``until``; returns (last answer, answers seen)."""
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = http.get(f"/jobs/{job_id}", headers=headers).json()
        seen.append(job)
        if job["state"] in until:
            return job, seen
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} still {seen[-1]['state']} after {timeout}s: {seen[-1]}")
