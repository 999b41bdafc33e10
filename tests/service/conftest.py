"""Fixtures for the service tests: settings, a store, an API client and a trainer, all against
the real redis-server of ``tests/conftest.py``; the factories are in tests/helpers/factories.py."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from service import codec
from service.api.main import create_app
from service.redis_client import connect
from service.settings import Settings
from service.store import Store
from service.trainer import Trainer
from tests.helpers.factories import make_settings


@pytest.fixture
def settings(redis_url) -> Settings:
    return make_settings(redis_url)


@pytest.fixture
def store(settings):
    client = connect(settings)
    yield Store(client, settings)
    client.close()


@pytest.fixture
def client(settings):
    with TestClient(create_app(settings)) as test_client:
        yield test_client


@pytest.fixture
def trainer(settings):
    redis_client = connect(settings)
    yield Trainer(redis_client, settings, trainer_id="test-trainer")
    redis_client.close()


@pytest.fixture
def empty_state() -> bytes:
    return codec.encode({"format": "none", "version": 1})
