"""Helpers to run the service as real processes (uvicorn API, trainer, grove serve) in tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx

from service.redis_server import free_port

from .factories import ADMIN_KEY

REPO = Path(__file__).resolve().parents[2]


def service_env(redis_url: str | None, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROVE_") and k != "REDIS_URL"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    if redis_url:
        env["REDIS_URL"] = redis_url
        env["GROVE_ADMIN_KEY"] = ADMIN_KEY
    env.update(
        {
            "GROVE_TRAINER_LEASE": "1",
            "GROVE_SNAPSHOT_INTERVAL": "0.2",
            "GROVE_TRAINER_POLL": "0.01",
            "GROVE_REDIS_TIMEOUT": "0.5",
        }
    )
    env.update(extra)
    return env


def spawn(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    out = open(log, "ab")
    return subprocess.Popen(
        [sys.executable, *args],
        env=env,
        cwd=REPO,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def start_apis(
    env: dict[str, str], logs: list[Path], ports: list[int] | None = None
) -> list[tuple[subprocess.Popen, str]]:
    """Start uvicorn API processes side by side, then wait until each answers /healthz."""
    ports = ports or [free_port() for _ in logs]
    started = []
    for log, port in zip(logs, ports, strict=True):
        proc = spawn(
            [
                "-m",
                "uvicorn",
                "service.api.main:create_app",
                "--factory",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            env,
            log,
        )
        started.append((proc, f"http://127.0.0.1:{port}", log))
    for proc, url, log in started:
        wait_until(lambda u=url: _answers(u + "/healthz"), proc, log, what=f"API on {url}")
    return [(proc, url) for proc, url, _ in started]


def start_trainer(env: dict[str, str], log: Path) -> subprocess.Popen:
    return spawn(["-m", "service.cli", "trainer"], env, log)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def wait_until(
    condition,
    proc: subprocess.Popen | None = None,
    log: Path | None = None,
    timeout: float = 30.0,
    what="condition",
):
    """Until ``condition()`` is true (returned); ``what`` names it in the failure (a callable:
    its text, made then, e.g. with the last values the condition saw)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"{what}: process exited ({proc.returncode}):\n"
                + (log.read_text()[-3000:] if log else "")
            )
        time.sleep(0.05)
    what = what() if callable(what) else what
    raise AssertionError(
        f"timed out waiting for {what}" + (f":\n{log.read_text()[-3000:]}" if log else "")
    )


def kill(proc: subprocess.Popen, sig: int = signal.SIGKILL, timeout: float = 15.0) -> int:
    if proc.poll() is None:
        proc.send_signal(sig)
    return proc.wait(timeout)


def stop_all(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
