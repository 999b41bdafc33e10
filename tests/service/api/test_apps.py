"""/apps: administration with the admin key, validation, app keys stored hashed."""

import hashlib
import json

from service import keys
from tests.helpers.factories import ADMIN, app_body, create


def test_create_returns_the_app_and_its_key_once(client, store):
    answer = client.post(
        "/apps",
        json=app_body("shop", rewardRange=[0, 10], defaultReward=1, rewardAggregation="sum"),
        headers=ADMIN,
    )
    assert answer.status_code == 201, answer.text
    app = answer.json()
    assert app["name"] == "shop" and [a["id"] for a in app["actions"]] == ["a", "b", "c"]
    assert app["rewardRange"] == [0, 10] and app["rewardAggregation"] == "sum"
    assert app["modelVersion"] == 0 and app["eventsLearned"] == 0 and app["pendingDecisions"] == 0
    key = app["apiKey"]
    stored = store.redis.hget(keys.config("shop"), "json").decode()
    assert key not in stored and hashlib.sha256(key.encode()).hexdigest() in stored
    again = client.get("/apps/shop", headers={"Authorization": f"Bearer {key}"}).json()
    assert "apiKey" not in again and again["name"] == "shop"


def test_admin_routes_need_the_admin_key(client):
    headers = create(client, "shop")
    assert client.post("/apps", json=app_body("x")).status_code == 401
    assert (
        client.post(
            "/apps", json=app_body("x"), headers={"Authorization": "Bearer nope"}
        ).status_code
        == 401
    )
    answer = client.post("/apps", json=app_body("x"), headers=headers)  # an app key: forbidden
    assert answer.status_code == 403 and "admin key" in answer.json()["detail"]
    answer = client.get("/apps")
    assert answer.status_code == 401 and "Authorization: Bearer" in answer.json()["detail"]
    assert client.delete("/apps/shop", headers=headers).status_code == 403
    assert client.patch("/apps/shop", json={"defaultReward": 1}, headers=headers).status_code == 403


def test_app_keys_only_open_their_own_app(client):
    shop = create(client, "shop")
    create(client, "news")
    assert client.get("/apps/shop", headers=shop).status_code == 200
    answer = client.get("/apps/news", headers=shop)
    assert answer.status_code == 403 and "news" in answer.json()["detail"]
    for route in ("decide", "reward", "activate"):
        body = {"decide": {"context": {}}, "reward": {"eventId": "e1", "reward": 1}}.get(
            route, {"eventId": "e1"}
        )
        assert client.post(f"/apps/news/{route}", json=body, headers=shop).status_code == 403
    # another app's key is 403 whether or not the app exists: names are not probed
    assert client.get("/apps/nope", headers=shop).status_code == 403
    assert client.get("/apps/shop", headers=ADMIN).status_code == 200  # admin may read any
    assert client.get("/apps/nope", headers=ADMIN).status_code == 404


def test_invalid_apps_are_refused_with_a_clear_message(client):
    def detail(body):
        answer = client.post("/apps", json=body, headers=ADMIN)
        assert answer.status_code == 422, answer.text
        return str(answer.json()["detail"])

    assert "pattern" in detail(app_body("bad name{}"))
    assert "unknown policy kind 'svm'" in detail(app_body(policy={"kind": "svm"}))
    assert "n_trees" in detail(app_body(policy={"kind": "bandit-forest", "params": {"n_trees": 0}}))
    assert "invalid policy params" in detail(
        app_body(policy={"kind": "bandit-forest", "params": {"trees": 5}})
    )
    assert "duplicate action ids" in detail(app_body(actions=["a", "a"]))
    assert "outside rewardRange" in detail(app_body(rewardRange=[0, 1], defaultReward=2))
    assert "low < high" in detail(app_body(rewardRange=[1, 1]))
    assert "rewardWaitTime" in detail(app_body(rewardWaitTime=0))
    assert "rewardWaitTime" in detail(app_body(rewardWaitTime=1e-7))  # (Grove counts ms)
    # (its width overflowed: every reward was learned as 0; a sum of two was a 500)
    assert "within +-1e+38" in detail(app_body(rewardRange=[-1e308, 1e308]))
    assert "extra" in detail(app_body(rewardWait=3))  # typos are not silently ignored


def test_policy_params_of_the_wrong_type_are_refused_before_the_app_exists(client):
    """A value the constructor's annotation does not allow is a 422 naming it: before, "no" was
    a true ``weigh_trees``, Infinity a 500, and an MCTS-IS app with ``max_nodes`` Infinity was
    created and then refused every label it had accepted."""

    def detail(kind, actions=("a", "b"), **params):
        body = app_body("typed", actions=list(actions), policy={"kind": kind, "params": params})
        answer = client.post("/apps", content=json.dumps(body),  # (Infinity as JS writes it)
                             headers={**ADMIN, "Content-Type": "application/json"})
        assert answer.status_code == 422, answer.text
        return str(answer.json()["detail"])

    assert "'weigh_trees': Input should be a valid boolean" in detail("trees", weigh_trees="no")
    assert "'window' is inf" in detail("trees", window=float("inf"))
    assert "'window': Input should be a valid integer" in detail("trees", window=1e5)
    assert "64 bits" in detail("linucb", seed=10**30)
    assert "'min_events' is inf" in detail("auto", min_events=float("inf"))
    assert "'candidates'[0]['params']['window'] is inf" in detail(
        "auto", candidates=[{"kind": "trees", "params": {"window": float("inf")}}])
    assert "candidate 1 (trees): parameter 'weigh_trees'" in detail(
        "auto", candidates=[{"kind": "linucb"}, {"kind": "trees", "params": {"weigh_trees": 1}}])
    assert "'max_nodes' is inf" in detail("mcts-is", actions=(), max_nodes=float("inf"))
    assert "max_nodes must be >= 1" in detail("mcts-is", actions=(), max_nodes=0)
    # finite, but past what the learners' arithmetic holds (a 500 at every decide after)
    assert "'alpha' is 1e+308" in detail("linucb", alpha=1e308)
    assert "'ridge' is 1e-320" in detail("linucb", ridge=1e-320)
    assert "'gamma_scale'" in detail("trees", gamma_scale=1e300)
    assert "floor must be in [1e-06, 1)" in detail("auto", floor=1e-9)  # (rewards refused)
    assert client.get("/apps/typed", headers=ADMIN).status_code == 404
    # an int is a float: JSON has one number type, and 4 is a gamma_scale as 4.0 is
    create(client, "typed", policy={"kind": "trees", "params": {"gamma_scale": 4}})
    # a 422 that echoes a lone surrogate is written with ASCII escapes, not a 500
    answer = client.post("/apps", content='{"name": "\\ud800"}',
                         headers={**ADMIN, "Content-Type": "application/json"})
    assert answer.status_code == 422 and "\\ud800" in answer.text


def test_duplicate_name_conflicts(client):
    create(client, "shop")
    answer = client.post("/apps", json=app_body("shop"), headers=ADMIN)
    assert answer.status_code == 409 and "already exists" in answer.json()["detail"]


def test_list_patch_and_delete(client, store):
    create(client, "shop")
    create(client, "news")
    assert [a["name"] for a in client.get("/apps", headers=ADMIN).json()] == ["news", "shop"]

    answer = client.patch(
        "/apps/shop",
        json={
            "actions": ["a", {"id": "d", "features": {"size": 3}}],
            "rewardWaitTime": 5,
            "defaultReward": 0.5,
        },
        headers=ADMIN,
    )
    assert answer.status_code == 200, answer.text
    app = answer.json()
    assert app["actions"] == [{"id": "a", "features": None}, {"id": "d", "features": {"size": 3}}]
    assert (app["rewardWaitTime"], app["defaultReward"]) == (5, 0.5)
    assert client.patch("/apps/shop", json={"defaultReward": 7}, headers=ADMIN).status_code == 422
    assert client.patch("/apps/nope", json={"defaultReward": 0}, headers=ADMIN).status_code == 404

    assert client.delete("/apps/shop", headers=ADMIN).status_code == 204
    assert client.get("/apps/shop", headers=ADMIN).status_code == 404
    assert client.delete("/apps/shop", headers=ADMIN).status_code == 404
    assert store.redis.keys("*{shop}*") == []
    assert [a["name"] for a in client.get("/apps", headers=ADMIN).json()] == ["news"]


def test_without_a_configured_admin_key_admin_routes_say_so(redis_url):
    from fastapi.testclient import TestClient

    from service.api.main import create_app
    from tests.helpers.factories import make_settings

    with TestClient(create_app(make_settings(redis_url, admin_key=None))) as client:
        answer = client.post("/apps", json=app_body(), headers={"Authorization": "Bearer x"})
        assert answer.status_code == 503 and "GROVE_ADMIN_KEY" in answer.json()["detail"]


def test_openapi_describes_every_route(client):
    paths = client.get("/openapi.json").json()["paths"]
    assert {
        "/apps",
        "/apps/{app}",
        "/apps/{app}/decide",
        "/apps/{app}/decide/batch",
        "/apps/{app}/reward",
        "/apps/{app}/activate",
        "/healthz",
        "/readyz",
    } <= set(paths)
    assert client.get("/docs").status_code == 200


def test_app_names_cannot_be_probed_without_the_admin_key(client):
    shop = create(client, "shop")
    for name in ("shop", "nope"):
        answer = client.post(
            f"/apps/{name}/decide", json={"context": {}}, headers={"Authorization": "Bearer guess"}
        )
        assert answer.status_code == 401 and "or no such app" in answer.json()["detail"]
    assert client.get("/apps/nope", headers=shop).status_code == 403
    assert client.get("/apps/nope", headers=ADMIN).status_code == 404
