"""/healthz, /readyz, and Redis outages: 503 at once with a clear message, then recovery."""

import threading
import time

import pytest
from fastapi.testclient import TestClient

from service.api.main import create_app
from service.redis_client import connect
from service.redis_server import RedisServer
from service.trainer import Trainer
from tests.helpers.factories import ADMIN, app_body, make_settings


def test_healthz_and_readyz_need_a_trainer(client, trainer):
    assert client.get("/healthz").json() == {"status": "ok"}
    answer = client.get("/readyz")
    assert answer.status_code == 503 and "grove trainer" in answer.json()["detail"]
    trainer.refresh_leases()  # heartbeat
    assert client.get("/readyz").json() == {"status": "ready", "redis": "ok", "trainers": 1}


@pytest.mark.slow
def test_redis_down_answers_503_fast_and_recovers_by_itself(tmp_path):
    server = RedisServer(tmp_path / "redis", appendonly=True).start()
    settings = make_settings(server.url)
    trainer = Trainer(connect(settings), settings)
    stop = threading.Event()
    thread = threading.Thread(target=trainer.run, args=(stop,), daemon=True)
    thread.start()
    try:
        with TestClient(create_app(settings)) as client:
            created = client.post("/apps", json=app_body("shop", rewardWaitTime=60), headers=ADMIN)
            shop = {"Authorization": f"Bearer {created.json()['apiKey']}"}
            event = client.post(
                "/apps/shop/decide", json={"context": {"x": 1}}, headers=shop
            ).json()["eventId"]

            server.stop()
            for method, path, body in [
                ("post", "/apps/shop/decide", {"context": {"x": 1}}),
                ("post", "/apps/shop/reward", {"eventId": event, "reward": 1}),
                ("get", "/apps/shop", None),
                ("get", "/readyz", None),
            ]:
                start = time.monotonic()
                answer = client.request(method, path, json=body, headers=shop)
                assert time.monotonic() - start < 1.5, path
                assert answer.status_code == 503, (path, answer.text)
                assert "Redis" in answer.json()["detail"] and answer.headers["Retry-After"] == "1"
            assert client.get("/healthz").status_code == 200  # the process itself is fine

            server.start()  # same port and data dir: the app comes back from the AOF
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                answer = client.post(
                    "/apps/shop/reward", json={"eventId": event, "reward": 1}, headers=shop
                )
                if answer.status_code != 503:
                    break
                time.sleep(0.1)
            assert answer.status_code == 200, answer.text
            assert (
                client.post(
                    "/apps/shop/decide", json={"context": {"x": 0}}, headers=shop
                ).status_code
                == 200
            )
            while (
                time.monotonic() < deadline
                and client.get("/apps/shop", headers=shop).json()["eventsLearned"] < 1
            ):
                time.sleep(0.1)
            assert (
                client.get("/apps/shop", headers=shop).json()["eventsLearned"] == 1
            )  # trainer recovered too
            assert client.get("/readyz").status_code == 200
    finally:
        stop.set()
        thread.join(10)
        server.stop()


def test_metrics_report_requests_and_app_state(client):
    from tests.helpers.factories import create

    shop = create(client, "shop")
    client.post("/apps/shop/decide", json={"context": {"x": 1}}, headers=shop)
    text = client.get("/metrics").text
    assert 'grove_http_requests_total{route="/apps/{app}/decide",status="200"} 1.0' in text
    assert 'grove_app_pending_decisions{app="shop"} 1.0' in text
    assert 'grove_app_events_learned_total{app="shop"} 0.0' in text
