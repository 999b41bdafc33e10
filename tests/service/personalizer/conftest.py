"""The Personalizer SDK fixtures: uvicorn serving Grove's API in a thread, an app's key, and the
current SDK's clients (``client`` here is the SDK's, not the TestClient of tests/service/)."""

from __future__ import annotations

import threading
import time

import pytest
import uvicorn
from azure.ai.personalizer import PersonalizerAdministrationClient
from azure.ai.personalizer import PersonalizerClient as Client
from azure.core.credentials import AzureKeyCredential

from service.api.main import create_app
from service.redis_server import free_port
from tests.helpers.personalizer_sdk import make_app


@pytest.fixture
def api(settings):
    """Grove's API (the FastAPI app ``server`` serves)."""
    return create_app(settings)


@pytest.fixture
def server(api):
    """uvicorn serving Grove's API on a free port, in a thread; its base URL."""
    port = free_port()
    config = uvicorn.Config(api, host="127.0.0.1", port=port, log_level="warning")
    served = uvicorn.Server(config)
    thread = threading.Thread(target=served.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not served.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    served.should_exit = True
    thread.join(10)


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
