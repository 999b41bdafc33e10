"""The Personalizer SDK fixtures: uvicorn serving Grove's API in a thread, an app's key, and the
current SDK's clients (``client`` here is the SDK's, not the TestClient of tests/service/)."""

from __future__ import annotations

import pytest
from azure.ai.personalizer import PersonalizerAdministrationClient
from azure.ai.personalizer import PersonalizerClient as Client
from azure.core.credentials import AzureKeyCredential

from service.api.main import create_app
from tests.helpers.personalizer_sdk import make_app
from tests.helpers.served import served


@pytest.fixture
def api(settings):
    """Grove's API (the FastAPI app ``server`` serves)."""
    return create_app(settings)


@pytest.fixture
def server(api):
    """uvicorn serving Grove's API on a free port, in a thread; its base URL."""
    with served(api) as url:
        yield url


@pytest.fixture
def key(server) -> str:
    return make_app(server)


@pytest.fixture
def client(server, key) -> Client:
    with Client(server, AzureKeyCredential(key), retry_total=0) as sdk:
        yield sdk


@pytest.fixture
def admin(server, key) -> PersonalizerAdministrationClient:
    with PersonalizerAdministrationClient(server, AzureKeyCredential(key), retry_total=0) as sdk:
        yield sdk
