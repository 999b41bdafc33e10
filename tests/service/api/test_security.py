"""Security and bad input: keys per app, the admin key, body limits, bad contexts and names."""

import json

import pytest
from fastapi.testclient import TestClient

from service import keys
from service.api.main import create_app
from tests.helpers.factories import ADMIN, create, make_settings


@pytest.fixture
def shop(client):
    return create(client, "shop")


def test_keys_are_stored_hashed_and_indexed_by_hash(client, store):
    answer = client.post("/apps", json={"name": "news", "actions": ["a"]}, headers=ADMIN)
    key = answer.json()["apiKey"]
    index = {k.decode(): v.decode() for k, v in store.redis.hgetall(keys.API_KEYS).items()}
    assert list(index.values()) == ["news"] and key not in json.dumps(index)
    assert client.delete("/apps/news", headers=ADMIN).status_code == 204
    assert store.redis.hlen(keys.API_KEYS) == 0
    # the key of a deleted app is just a wrong key
    gone = client.get("/apps/news", headers={"Authorization": f"Bearer {key}"})
    assert gone.status_code == 401


def test_another_apps_key_is_403_a_wrong_key_401(client, shop):
    news = create(client, "news")
    assert client.post("/apps/shop/decide", json={"context": {}}, headers=news).status_code == 403
    wrong = {"Authorization": "Bearer grove_wrong"}
    assert client.post("/apps/shop/decide", json={"context": {}}, headers=wrong).status_code == 401
    assert client.get("/apps", headers=shop).status_code == 403  # admin route, app key
    assert client.get("/apps", headers=wrong).status_code == 401


def test_bodies_over_the_limit_are_413_also_when_chunked(redis_url):
    settings = make_settings(redis_url, max_body=2000)
    with TestClient(create_app(settings)) as client:
        headers = create(client, "shop")
        small = {"context": {f"f{i}": i for i in range(10)}}
        assert client.post("/apps/shop/decide", json=small, headers=headers).status_code == 200
        big = json.dumps({"context": {f"f{i}": i for i in range(400)}}).encode()
        answer = client.post(
            "/apps/shop/decide",
            content=big,
            headers={**headers, "Content-Type": "application/json"},
        )
        assert answer.status_code == 413 and "GROVE_MAX_BODY" in answer.json()["detail"]

        def chunks():  # no Content-Length: Transfer-Encoding: chunked
            for i in range(0, len(big), 500):
                yield big[i : i + 500]

        answer = client.post(
            "/apps/shop/decide",
            content=chunks(),
            headers={**headers, "Content-Type": "application/json"},
        )
        assert answer.status_code == 413, answer.text
        lying = client.post(
            "/apps/shop/decide",
            content=big,
            headers={**headers, "Content-Type": "application/json", "Content-Length": "x"},
        )
        assert lying.status_code in (400, 413)


def test_too_many_features_nested_or_non_finite_are_422_with_a_message(redis_url):
    with TestClient(create_app(make_settings(redis_url, max_features=5))) as client:
        headers = create(client, "shop")
        many = {"context": {f"f{i}": i for i in range(6)}}
        answer = client.post("/apps/shop/decide", json=many, headers=headers)
        assert answer.status_code == 422 and "GROVE_MAX_FEATURES" in answer.json()["detail"]
        nested = client.post(
            "/apps/shop/decide", json={"context": {"user": {"age": 3}}}, headers=headers
        )
        assert nested.status_code == 422 and "flat" in json.dumps(nested.json()["detail"])
        for raw in ('{"context": {"x": NaN}}', '{"context": {"x": -Infinity}}'):
            answer = client.post(
                "/apps/shop/decide",
                content=raw,
                headers={**headers, "Content-Type": "application/json"},
            )
            assert answer.status_code == 422 and "finite" in json.dumps(answer.json()["detail"])
        long_name = client.post(
            "/apps/shop/decide", json={"context": {"x" * 300: 1}}, headers=headers
        )
        assert long_name.status_code == 422


@pytest.mark.parametrize("name", ["a b", "-lead", "x" * 65, "{shop}", "ä"])
def test_app_names_are_validated_in_bodies_and_paths(client, name):
    assert client.post("/apps", json={"name": name}, headers=ADMIN).status_code == 422
    assert client.get(f"/apps/{name}", headers=ADMIN).status_code in (404, 422)
    assert client.delete(f"/apps/{name}", headers=ADMIN).status_code in (404, 405, 422)


@pytest.mark.parametrize("event_id", ["", "a b", "x" * 129, "ev/1", "ev\n"])
def test_event_ids_are_validated(client, shop, event_id):
    for route, body in (
        ("decide", {"eventId": event_id, "context": {}}),
        ("reward", {"eventId": event_id, "reward": 1}),
        ("activate", {"eventId": event_id}),
    ):
        answer = client.post(f"/apps/shop/{route}", json=body, headers=shop)
        assert answer.status_code == 422, (route, event_id, answer.text)
