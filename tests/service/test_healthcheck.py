"""grove healthcheck (the compose healthchecks) and grove api without Redis."""

import argparse
import socket
import time

from service import keys
from service.cli import api_alone
from service.healthcheck import main as healthcheck


def check(role: str, port: int = 1) -> int:
    return healthcheck(argparse.Namespace(role=role, port=port))


def test_trainer_is_healthy_only_with_a_recent_heartbeat_of_this_host(redis_url, monkeypatch):
    monkeypatch.setenv("REDIS_URL", redis_url)
    import redis

    client = redis.Redis.from_url(redis_url)
    assert check("trainer") == 1
    now_ms = int(time.time() * 1000)
    client.zadd(keys.TRAINERS, {"another-host:1:abc": now_ms})
    assert check("trainer") == 1
    client.zadd(keys.TRAINERS, {f"{socket.gethostname()}:1:abc": now_ms - 3_600_000})
    assert check("trainer") == 1  # too old
    client.zadd(keys.TRAINERS, {f"{socket.gethostname()}:2:abc": now_ms})
    assert check("trainer") == 0
    client.close()


def test_api_and_worker_checks_fail_when_nothing_runs(redis_url, monkeypatch):
    monkeypatch.setenv("REDIS_URL", redis_url)
    assert check("api") == 1
    assert check("worker") == 1


def test_grove_api_needs_redis_url(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    monkeypatch.delenv("GROVE_REDIS_URL", raising=False)
    assert api_alone(argparse.Namespace(host="127.0.0.1", port=0, workers=1)) == 2
