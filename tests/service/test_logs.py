"""Every line a running Grove writes is one JSON object (GROVE_LOG_FORMAT=json, the default):
Grove's own lines, uvicorn's access and error lines, the trainer's and the job worker's."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import sys

import httpx
import pytest

from service import logs
from service.redis_server import free_port
from tests.helpers.factories import app_body
from tests.helpers.processes import REPO, service_env, wait_until


def _json_lines(text: str) -> list[dict]:
    entries = []
    for n, line in enumerate(text.splitlines(), 1):
        try:
            entry = json.loads(line)
        except ValueError:
            raise AssertionError(f"line {n} is not JSON: {line!r}") from None
        assert isinstance(entry, dict), line
        entries.append(entry)
    return entries


def _serve(tmp_path, port: int, **env: str) -> tuple[subprocess.Popen, str]:
    out, err = (tmp_path / "out.log").open("wb"), (tmp_path / "err.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "service.cli",
            "serve",
            "--port",
            str(port),
            "--data-dir",
            str(tmp_path / "data"),
        ],
        env=service_env(None, **env),
        cwd=REPO,
        stdout=out,
        stderr=err,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        try:
            return httpx.get(url + "/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(ready, proc, tmp_path / "err.log", timeout=60, what="grove serve to be ready")
    return proc, url


def _traffic(url: str, admin_key: str) -> None:
    http = httpx.Client(base_url=url, timeout=10)
    admin = {"Authorization": f"Bearer {admin_key}"}
    created = http.post("/apps", json=app_body("shop"), headers=admin)
    assert created.status_code == 201, created.text
    shop = {"Authorization": f"Bearer {created.json()['apiKey']}"}
    event = http.post("/apps/shop/decide", json={"context": {"x": 1}}, headers=shop).json()
    assert (
        http.post(
            "/apps/shop/reward", json={"eventId": event["eventId"], "reward": 1}, headers=shop
        ).status_code
        == 200
    )
    bad = http.post("/apps/shop/decide", json={"context": {"x": [1]}}, headers=shop)
    assert bad.status_code == 422
    assert http.get("/apps/nope", headers=shop).status_code == 403  # another app's key
    http.close()


@pytest.mark.slow
def test_every_line_of_grove_serve_is_json_access_lines_included(tmp_path):
    proc, url = _serve(tmp_path, free_port())
    try:
        _traffic(url, (tmp_path / "data" / "admin-key").read_text().strip())
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    out, err = (tmp_path / "out.log").read_text(), (tmp_path / "err.log").read_text()
    entries = _json_lines(out) + _json_lines(err)
    access = [e for e in entries if e["logger"] == "uvicorn.access"]
    assert {(e["method"], e["path"], e["status"]) for e in access} >= {
        ("POST", "/apps", 201),
        ("POST", "/apps/shop/decide", 200),
        ("POST", "/apps/shop/reward", 200),
        ("POST", "/apps/shop/decide", 422),
    }
    decided = [e for e in entries if e["logger"] == "grove.events" and e["message"] == "decide"]
    assert len(decided) == 1 and decided[0]["app"] == "shop" and decided[0]["eventId"]
    assert any(e["logger"].startswith("uvicorn.error") for e in entries)  # "Application startup"
    assert any(e["message"] == "Grove stopped." for e in entries)


@pytest.mark.slow
def test_access_lines_can_be_turned_off(tmp_path):
    proc, url = _serve(tmp_path, free_port(), GROVE_ACCESS_LOG="false")
    try:
        _traffic(url, (tmp_path / "data" / "admin-key").read_text().strip())
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
    entries = _json_lines((tmp_path / "out.log").read_text())
    entries += _json_lines((tmp_path / "err.log").read_text())
    assert not [e for e in entries if e["logger"] == "uvicorn.access"]
    assert [e for e in entries if e["logger"] == "grove.events"]  # the event lines stay


def test_records_are_written_in_batches_with_their_fields_and_tracebacks(capsys):
    previous = logging.getLogger().handlers[:], logging.getLogger().level
    try:
        logs.setup("INFO", "json")
        logs.events.info("decide", extra={"app": "shop", "eventId": "e1"})
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("grove.api").exception("failed")
        logs._writer.close()  # writes what is buffered
        entries = _json_lines(capsys.readouterr().err)
    finally:
        logging.getLogger().handlers[:], level = previous
        logging.getLogger().setLevel(level)
    assert entries[0]["eventId"] == "e1" and entries[0]["app"] == "shop"
    assert entries[1]["message"] == "failed" and "ValueError: boom" in entries[1]["exception"]
