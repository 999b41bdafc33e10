"""The `grove` command: the one-command default (`grove serve`) and the single roles."""

import re
import signal
import subprocess
import sys

import httpx
import pytest
import redis

from service.cli import admin_key_from
from service.redis_server import free_port
from tests.helpers.factories import app_body
from tests.helpers.processes import REPO, service_env, spawn, wait_until


def test_admin_key_is_generated_once_and_kept_private(tmp_path):
    key = admin_key_from(tmp_path / "data")
    assert key.startswith("grove_admin_") and len(key) > 40
    assert admin_key_from(tmp_path / "data") == key
    assert (tmp_path / "data" / "admin-key").stat().st_mode & 0o777 == 0o600


def test_single_roles_need_an_external_redis():
    env = service_env(None)
    roles = {
        role: subprocess.Popen(
            [sys.executable, "-m", "service.cli", role],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for role in ("trainer", "worker")
    }
    for role, proc in roles.items():
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2 and "REDIS_URL" in err, (role, err)


@pytest.mark.slow
def test_grove_serve_runs_everything_in_one_command_and_keeps_its_data(tmp_path):
    """`grove serve` without REDIS_URL: embedded redis-server (AOF), API, trainer; Ctrl-C stops
    it all; started again on the same data dir, the app and the admin key are still there."""
    data, log, port = tmp_path / "grove-data", tmp_path / "serve.log", free_port()
    env = service_env(None)
    url = f"http://127.0.0.1:{port}"

    def serve(*extra):
        proc = spawn(
            ["-m", "service.cli", "serve", "--port", str(port), "--data-dir", str(data), *extra],
            env,
            log,
        )
        wait_until(lambda: _ready(url), proc, log, timeout=60, what="grove serve to be ready")
        return proc

    proc = serve()
    key = (data / "admin-key").read_text().strip()
    assert key in log.read_text()  # printed at start
    http = httpx.Client(base_url=url, timeout=10)
    created = http.post("/apps", json=app_body("shop"), headers={"Authorization": f"Bearer {key}"})
    assert created.status_code == 201, created.text
    shop = {"Authorization": f"Bearer {created.json()['apiKey']}"}
    event = http.post("/apps/shop/decide", json={"context": {"x": 1}}, headers=shop).json()
    reward = {"eventId": event["eventId"], "reward": 1}
    assert http.post("/apps/shop/reward", json=reward, headers=shop).status_code == 200
    learned = lambda: http.get("/apps/shop", headers=shop).json()["eventsLearned"] == 1  # noqa: E731
    wait_until(learned, proc, log, what="the embedded trainer to learn")

    proc.send_signal(signal.SIGINT)  # Ctrl-C
    assert proc.wait(30) == 0
    redis_url = re.search(r"redis://[\d.]+:\d+/0", log.read_text()).group(0)
    with pytest.raises(redis.ConnectionError):  # the embedded redis-server stopped too
        redis.Redis.from_url(redis_url, socket_connect_timeout=1).ping()
    assert list((data / "redis").glob("appendonly*")), "no append-only file"

    env["GROVE_REDIS_APPENDFSYNC"] = "always"
    proc = serve("--workers", "2")  # two API processes on one socket this time
    try:
        assert (data / "admin-key").read_text().strip() == key
        redis_url = re.findall(r"redis://[\d.]+:\d+/0", log.read_text())[-1]
        embedded = redis.Redis.from_url(redis_url)
        assert embedded.config_get("appendfsync") == {"appendfsync": "always"}
        embedded.close()
        again = http.get("/apps/shop", headers=shop).json()
        assert again["eventsLearned"] == 1 and again["name"] == "shop"
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
        http.close()


def _ready(url: str) -> bool:
    try:
        return httpx.get(url + "/readyz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def test_grove_bench_lists_runs_and_rejects_unknown_scripts(capsys):
    from service.cli import main

    assert main(["bench"]) == 0
    listing = capsys.readouterr().out
    assert re.search(r"^bandit_forest\.speed +How fast is Bandit Forest", listing, re.M)
    assert main(["bench", "no_such_bench"]) == 2
    assert "no script 'no_such_bench'" in capsys.readouterr().err
    # arguments after the name go to the script (its own argparse answers --help)
    run = subprocess.run(
        [sys.executable, "-m", "service.cli", "bench", "bandit_forest.speed", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "--events" in run.stdout


def test_help_speaks_of_the_product_and_every_command_has_help(capsys):
    from service.cli import parser

    with pytest.raises(SystemExit) as exit_:
        parser().parse_args(["--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "decision service" in text and "issue" not in text.lower()
    commands = ["serve", "api", "trainer", "worker", "healthcheck", "jobs", "replay", "bench"]
    for command in commands:
        assert f"    {command}" in text, command  # listed with its one-line help
        with pytest.raises(SystemExit) as exit_:
            parser().parse_args([command, "--help"])
        assert exit_.value.code == 0
        sub = capsys.readouterr().out
        assert sub.startswith(f"usage: grove {command}") and "issue" not in sub.lower(), sub
    assert "api-process" not in text  # started by `serve` itself, not a command for people
