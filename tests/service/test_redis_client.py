"""service.redis_client against real redis-servers: plain or cluster by asking the node, a
client built on first use when Redis is not up yet (the API answers 503, then serves), and the
job queue refusing a cluster."""

from __future__ import annotations

import pytest
import redis
from fastapi.testclient import TestClient

from service.api.main import create_app
from service.redis_client import (
    UNAVAILABLE,
    Deferred,
    JobsNeedPlainRedis,
    connect,
    connect_jobs,
    is_cluster,
)
from service.redis_server import RedisServer, free_port
from service.settings import Settings
from tests.helpers.factories import ADMIN, app_body, make_settings


def test_a_plain_server_gets_a_plain_client(redis_url):
    settings = Settings(redis_url=redis_url)
    assert not is_cluster(settings)
    client = connect(settings)
    assert type(client) is redis.Redis and client.ping()
    client.close()
    # the setting overrides the question (a cluster client cannot use a plain server)
    with pytest.raises(UNAVAILABLE):
        connect(Settings(redis_url=redis_url, redis_cluster="yes")).ping()


def test_redis_not_up_yet_then_up(tmp_path):
    port = free_port()
    settings = make_settings(f"redis://127.0.0.1:{port}/0", redis_timeout=0.2)
    client = connect(settings)
    assert isinstance(client, Deferred)
    with pytest.raises(UNAVAILABLE):
        client.ping()
    with TestClient(create_app(settings)) as api:
        answer = api.get("/apps", headers=ADMIN)
        assert answer.status_code == 503 and "unavailable" in answer.json()["detail"]
        with RedisServer(tmp_path / "late", port=port, appendonly=False):
            assert client.ping()  # built now
            assert type(client.resolve()) is redis.Redis
            assert api.get("/apps", headers=ADMIN).status_code == 200
    client.close()


def test_decide_and_reward_while_redis_is_down_are_503_then_served(tmp_path):
    """The request path's asyncio client is built on first use too (and registers its scripts
    before): 503 while Redis is away, then the one-round-trip decide and reward work."""
    port = free_port()
    settings = make_settings(f"redis://127.0.0.1:{port}/0", redis_timeout=0.2)
    shop = {"Authorization": "Bearer some-key"}
    with TestClient(create_app(settings)) as api:
        down = api.post("/apps/shop/decide", json={"context": {}}, headers=shop)
        assert down.status_code == 503 and "unavailable" in down.json()["detail"]
        with RedisServer(tmp_path / "late", port=port, appendonly=False):
            created = api.post("/apps", json=app_body("shop"), headers=ADMIN)
            assert created.status_code == 201, created.text
            shop = {"Authorization": f"Bearer {created.json()['apiKey']}"}
            decided = api.post("/apps/shop/decide", json={"context": {"x": 1}}, headers=shop)
            assert decided.status_code == 200, decided.text
            body = {"eventId": decided.json()["eventId"], "reward": 1}
            assert api.post("/apps/shop/reward", json=body, headers=shop).status_code == 200
        gone = api.post("/apps/shop/decide", json={"context": {"x": 1}}, headers=shop)
        assert gone.status_code == 503


def test_scripts_registered_before_redis_is_up_run_after(tmp_path):
    port = free_port()
    client = connect(make_settings(f"redis://127.0.0.1:{port}/0", redis_timeout=0.2))
    script = client.register_script("return redis.call('INCR', KEYS[1])")
    with RedisServer(tmp_path / "late", port=port, appendonly=False):
        assert script(keys=["n"]) == 1 and script(keys=["n"]) == 2
    client.close()


def test_the_job_queue_refuses_a_cluster(tmp_path, redis_url):
    from service.redis_cluster import LocalCluster

    with LocalCluster(tmp_path / "cluster", appendonly=False) as cluster:
        with pytest.raises(JobsNeedPlainRedis, match="GROVE_JOB_REDIS_URL"):
            connect_jobs(Settings(redis_url=cluster.url))
        jobs = connect_jobs(Settings(redis_url=cluster.url, job_redis_url=redis_url))
        assert jobs.ping()
        jobs.close()
