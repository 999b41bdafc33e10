"""Each API process caches app configs per rev: a change made through another process is seen
by the next request (the decide/reward scripts refuse a stale config), never served stale."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from service import keys
from service.api.main import create_app
from tests.helpers.factories import ADMIN, create


@pytest.fixture
def other(settings):
    """A second API process on the same Redis (its own caches)."""
    with TestClient(create_app(settings)) as second:
        yield second


def _decide(client, headers, **body):
    return client.post("/apps/shop/decide", json={"context": {"x": 1}, **body}, headers=headers)


def test_actions_changed_by_another_process_are_used_at_once(client, other):
    shop = create(client, "shop")
    assert _decide(client, shop).status_code == 200  # config now cached in `client`
    changed = other.patch("/apps/shop", json={"actions": ["z"]}, headers=ADMIN)
    assert changed.status_code == 200, changed.text
    for _ in range(5):
        d = _decide(client, shop).json()
        assert d["action"] == "z" and [r["id"] for r in d["ranking"]] == ["z"]


def test_a_reward_range_changed_elsewhere_is_checked_against_the_new_one(client, other, store):
    shop = create(client, "shop")
    event = _decide(client, shop).json()["eventId"]
    store.update_app("shop", reward_range=(0.0, 10.0))  # what any config writer does
    answer = client.post("/apps/shop/reward", json={"eventId": event, "reward": 5}, headers=shop)
    assert answer.status_code == 200, answer.text


def test_an_app_deleted_and_created_again_elsewhere_takes_only_its_new_key(client, other):
    old = create(client, "shop")
    assert _decide(client, old).status_code == 200
    assert other.delete("/apps/shop", headers=ADMIN).status_code == 204
    assert _decide(client, old).status_code == 401
    new = create(other, "shop")
    assert _decide(client, old).status_code == 401
    answer = _decide(client, new)
    assert answer.status_code == 200 and answer.json()["modelVersion"] == 0


def test_a_deleted_app_is_404_for_the_admin_and_its_reward_is_not_recorded(client, other, store):
    shop = create(client, "shop")
    event = _decide(client, shop).json()["eventId"]
    assert other.delete("/apps/shop", headers=ADMIN).status_code == 204
    assert _decide(client, ADMIN).status_code == 404
    answer = client.post("/apps/shop/reward", json={"eventId": event, "reward": 1}, headers=shop)
    assert answer.status_code == 401
    assert not store.redis.exists(keys.stream("shop"))


def test_bad_bodies_on_the_fast_path_get_fastapis_own_answers(client):
    shop = create(client, "shop")
    bad = client.post("/apps/shop/decide", content=b"{not json", headers=shop)
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][0] == "body"
    extra = _decide(client, shop, surprise=1)
    assert extra.status_code == 422 and extra.json()["detail"][0]["loc"] == ["body", "surprise"]
    nan = client.post(
        "/apps/shop/reward", content=b'{"eventId": "e1", "reward": NaN}', headers=shop
    )
    assert nan.status_code == 422
    no_key = client.post("/apps/shop/decide", json={"context": {}})
    assert no_key.status_code == 401 and no_key.headers["www-authenticate"] == "Bearer"
    assert _decide(client, {"Authorization": "Basic abc"}).status_code == 401
