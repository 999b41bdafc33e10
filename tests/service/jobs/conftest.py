"""The ``grove`` fixture: one `grove serve` (API + trainer + embedded job worker) per module."""

from __future__ import annotations

import signal
import uuid

import httpx
import pytest
import redis

from service.redis_server import free_port
from tests.helpers.factories import ADMIN
from tests.helpers.jobs import LOST_AFTER, MAX_UPLOAD, RETENTION, _worker_pid
from tests.helpers.processes import service_env, spawn, wait_until


@pytest.fixture(scope="module")
def grove(redis_server, tmp_path_factory):
    """(http client with base URL, redis client, serve process, log path)."""
    log = tmp_path_factory.mktemp("grove-jobs") / "serve.log"
    port = free_port()
    env = service_env(
        redis_server.url,
        GROVE_JOB_HEARTBEAT="0.5",
        GROVE_JOB_LOST_AFTER=str(LOST_AFTER),
        GROVE_JOB_MAX_UPLOAD=str(MAX_UPLOAD),
        GROVE_JOB_RETENTION=str(RETENTION),
        GROVE_JOB_QUEUE=f"test-jobs-{uuid.uuid4().hex[:8]}",
    )
    proc = spawn(["-m", "service.cli", "serve", "--port", str(port)], env, log)
    url = f"http://127.0.0.1:{port}"
    http = httpx.Client(base_url=url, timeout=10)
    client = redis.Redis.from_url(redis_server.url)

    def worker_ready():
        try:
            return http.get("/healthz").status_code == 200 and _worker_pid(client, env) is not None
        except httpx.HTTPError:
            return False

    wait_until(worker_ready, proc, log, timeout=60, what="grove serve with its job worker")
    yield http, client, proc, log, env
    for job in http.get("/jobs", headers=ADMIN).json():  # leave no running job behind
        if job["state"] in ("queued", "running"):
            http.delete(f"/jobs/{job['id']}", headers=ADMIN)
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(40) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
        http.close()
        client.close()
