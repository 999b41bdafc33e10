"""decide / decide/batch / reward / activate through the API, with the real Bandit Forest."""

import math

import pytest

from service import keys
from tests.helpers.factories import create, drain


@pytest.fixture
def shop(client):
    return create(client, "shop")


def test_decide_returns_an_action_its_propensity_and_the_ranking(client, shop, store):
    answer = client.post(
        "/apps/shop/decide",
        json={"context": {"age": 31, "site": "news", "mobile": True}},
        headers=shop,
    )
    assert answer.status_code == 200, answer.text
    d = answer.json()
    assert d["action"] in {"a", "b", "c"} and 0 < d["probability"] <= 1
    assert [r["id"] for r in d["ranking"]][0] in {"a", "b", "c"}
    assert math.isclose(sum(r["probability"] for r in d["ranking"]), 1.0)
    assert dict((r["id"], r["probability"]) for r in d["ranking"])[d["action"]] == d["probability"]
    assert d["modelVersion"] == 0
    record = store.redis.hgetall(keys.decision("shop", d["eventId"]))
    assert record[b"action"].decode() == d["action"] and record[b"state"] == b"pending"


def test_client_event_ids_are_unique(client, shop):
    body = {"eventId": "ev-1", "context": {"x": 1}}
    assert client.post("/apps/shop/decide", json=body, headers=shop).json()["eventId"] == "ev-1"
    again = client.post("/apps/shop/decide", json={**body, "context": {"x": 2}}, headers=shop)
    assert again.status_code == 409 and "ev-1" in again.json()["detail"]


def test_a_request_repeated_with_its_event_id_gets_the_first_answer(client, shop, store):
    """A client's retry (an answer lost, a 503 whose write had happened) is not a conflict,
    and is not recorded twice. The new app explores uniformly among three actions: twelve
    fresh draws would all equal the first with probability 3^-12."""
    body = {"eventId": "ev-1", "context": {"x": 1}, "excludedActions": ["c"]}
    first = client.post("/apps/shop/decide", json=body, headers=shop).json()
    for _ in range(12):
        again = client.post("/apps/shop/decide", json=body, headers=shop)
        assert again.status_code == 200 and again.json() == first
    assert int(store.redis.hget(keys.stats("shop"), "decisions")) == 1
    reward = client.post("/apps/shop/reward", json={"eventId": "ev-1", "reward": 1}, headers=shop)
    assert reward.json()["state"] == "joined"
    late = client.post("/apps/shop/decide", json=body, headers=shop)  # rewarded: a new request
    assert late.status_code == 409 and "ev-1" in late.json()["detail"]
    batch = {"requests": [{"eventId": "b1", "context": {"x": 1}},
                          {"eventId": "b2", "context": {"x": 2}}]}
    answers = client.post("/apps/shop/decide/batch", json=batch, headers=shop).json()
    for _ in range(6):
        assert client.post("/apps/shop/decide/batch", json=batch, headers=shop).json() == answers
    batch["requests"][1]["excludedActions"] = ["a"]  # another request with those eventIds
    assert client.post("/apps/shop/decide/batch", json=batch, headers=shop).status_code == 409
    # the answer of a decision among more than 64 actions is not kept (~13 bytes an action)
    many = {"eventId": "ev-2", "context": {"x": 1}, "actions": [{"id": f"n{i}"} for i in range(65)]}
    assert client.post("/apps/shop/decide", json=many, headers=shop).status_code == 200
    assert not store.redis.exists(keys.answer("shop", "ev-2"))
    assert client.post("/apps/shop/decide", json=many, headers=shop).status_code == 409
    assert (
        client.post(
            "/apps/shop/decide", json={"eventId": "bad id!", "context": {}}, headers=shop
        ).status_code
        == 422
    )


def test_request_actions_and_exclusions(client, shop):
    for _ in range(20):
        d = client.post(
            "/apps/shop/decide",
            json={
                "context": {"x": 1},
                "actions": ["b", "c", {"id": "z"}],
                "excludedActions": ["c"],
            },
            headers=shop,
        ).json()
        assert d["action"] in {"b", "z"} and {r["id"] for r in d["ranking"]} <= {"b", "z"}
    answer = client.post(
        "/apps/shop/decide", json={"context": {}, "excludedActions": ["a", "b", "c"]}, headers=shop
    )
    assert answer.status_code == 422 and "excluded" in answer.json()["detail"]


def test_bad_contexts_are_422_not_500(client, shop):
    for raw in (
        '{"context": {"x": NaN}}',
        '{"context": {"x": Infinity}}',
        '{"context": {"x": [1]}}',
        '{"context": 3}',
        "not json",
        # finite, but past what a learner can sum (1e308 made a LinUCB app's statistics NaN)
        '{"context": {"x": 1e308}}',
        '{"context": {"x": 123456789012345678901234567890}}',  # past the records' 64 bits
        # lone surrogates: no record holds them, and the 422 that echoes one is written too
        '{"context": {"x": "\\ud800"}}',
        '{"context": {"\\udfff": 1}}',
        '{"context": {}, "actions": ["\\ud800"]}',
        '{"context": {}, "actions": [{"id": "n", "features": {"f": "\\ud800"}}]}',
        '{"context": {}, "excludedActions": ["\\ud800"]}',
        '{"eventId": "\\ud800", "context": {}}',
    ):
        answer = client.post(
            "/apps/shop/decide", content=raw, headers={**shop, "Content-Type": "application/json"}
        )
        assert answer.status_code == 422, (raw, answer.text)
        assert answer.json()["detail"]
    reward = client.post("/apps/shop/reward", content='{"eventId": "\\ud800", "reward": 1}',
                         headers={**shop, "Content-Type": "application/json"})
    assert reward.status_code == 422, reward.text
    # a pair of surrogates is one character (an emoji), not an error
    fine = client.post("/apps/shop/decide", content='{"context": {"x": "\\ud83d\\ude00"}}',
                       headers={**shop, "Content-Type": "application/json"})
    assert fine.status_code == 200, fine.text


def test_batch_decides_and_records_all_or_nothing(client, shop, store):
    answer = client.post(
        "/apps/shop/decide/batch",
        json={"requests": [{"context": {"x": i}} for i in range(50)]},
        headers=shop,
    )
    assert answer.status_code == 200, answer.text
    responses = answer.json()["responses"]
    assert len(responses) == 50 and len({r["eventId"] for r in responses}) == 50
    assert store.redis.zcard(keys.deadlines("shop")) == 50

    too_many = {"requests": [{"context": {}}] * 1001}
    assert client.post("/apps/shop/decide/batch", json=too_many, headers=shop).status_code == 422
    repeated = {"requests": [{"eventId": "e", "context": {}}, {"eventId": "e", "context": {}}]}
    assert (
        "repeats"
        in client.post("/apps/shop/decide/batch", json=repeated, headers=shop).json()["detail"]
    )
    clash = {
        "requests": [
            {"eventId": "new", "context": {}},
            {"eventId": responses[0]["eventId"], "context": {}},
        ]
    }
    assert client.post("/apps/shop/decide/batch", json=clash, headers=shop).status_code == 409
    excluded = {"requests": [{"context": {}}, {"context": {}, "excludedActions": ["a", "b", "c"]}]}
    answer = client.post("/apps/shop/decide/batch", json=excluded, headers=shop)
    assert answer.status_code == 422 and answer.json()["detail"].startswith("requests[1]:")
    assert not store.redis.exists(keys.decision("shop", "new"))


def test_reward_joins_once(client, shop):
    event = client.post("/apps/shop/decide", json={"context": {"x": 1}}, headers=shop).json()[
        "eventId"
    ]
    for typed in (True, "1", " 1 "):  # a number, not what JSON or a string may be read as
        wrong = client.post("/apps/shop/reward", json={"eventId": event, "reward": typed},
                            headers=shop)
        assert wrong.status_code == 422, typed
    answer = client.post("/apps/shop/reward", json={"eventId": event, "reward": 1}, headers=shop)
    assert answer.status_code == 200 and answer.json()["state"] == "joined"
    again = client.post("/apps/shop/reward", json={"eventId": event, "reward": 0}, headers=shop)
    assert again.status_code == 409 and "already has its reward" in again.json()["detail"]
    unknown = client.post("/apps/shop/reward", json={"eventId": "nope", "reward": 1}, headers=shop)
    assert unknown.status_code == 404 and "unknown" in unknown.json()["detail"]
    out = client.post("/apps/shop/reward", json={"eventId": event, "reward": 1.5}, headers=shop)
    assert out.status_code == 422 and "outside" in out.json()["detail"]


def test_deferred_decisions_wait_for_activation(client, shop):
    d = client.post(
        "/apps/shop/decide", json={"context": {}, "deferActivation": True}, headers=shop
    ).json()
    early = client.post(
        "/apps/shop/reward", json={"eventId": d["eventId"], "reward": 1}, headers=shop
    )
    assert early.status_code == 409 and "activate" in early.json()["detail"]
    assert client.post("/apps/shop/activate", json={"eventId": d["eventId"]}, headers=shop).json()[
        "activated"
    ]
    assert (
        client.post("/apps/shop/activate", json={"eventId": d["eventId"]}, headers=shop).status_code
        == 409
    )
    assert (
        client.post(
            "/apps/shop/reward", json={"eventId": d["eventId"], "reward": 1}, headers=shop
        ).status_code
        == 200
    )
    assert (
        client.post("/apps/shop/activate", json={"eventId": "nope"}, headers=shop).status_code
        == 404
    )


def test_decide_serves_the_newest_snapshot(client, shop, trainer):
    events = client.post(
        "/apps/shop/decide/batch",
        json={"requests": [{"context": {"x": i % 2}} for i in range(30)]},
        headers=shop,
    ).json()["responses"]
    for e in events:
        client.post(
            "/apps/shop/reward", json={"eventId": e["eventId"], "reward": 1.0}, headers=shop
        )
    drain(trainer)
    status = client.get("/apps/shop", headers=shop).json()
    assert status["eventsLearned"] == 30 and status["modelVersion"] >= 1
    assert (
        client.post("/apps/shop/decide", json={"context": {"x": 1}}, headers=shop).json()[
            "modelVersion"
        ]
        == status["modelVersion"]
    )


def test_an_unreadable_snapshot_is_503_with_a_reason_not_500(client, shop, store, trainer):
    store.redis.hset(
        keys.snapshot("shop"),
        mapping={"version": 7, "serving": b"\x80\x04junk", "state": b"\x80\x04junk"},
    )
    answer = client.post("/apps/shop/decide", json={"context": {}}, headers=shop)
    assert answer.status_code == 503 and "snapshot" in answer.json()["detail"]
    trainer.refresh_leases()  # the trainer skips the app instead of crashing
    assert "shop" not in trainer.owned


def test_each_api_process_explores_with_its_own_randomness(client, shop, store):
    """Two serving copies of one snapshot (two API processes) give the same probabilities but
    draw their exploration independently (the snapshot's generator is not replayed)."""
    from service.api.model_cache import ModelCache

    config = store.require_app("shop")
    first, second = ModelCache().get(store, config, 0), ModelCache().get(store, config, 0)

    def draws(model):
        return [model.kind.decide(model.learner, {"x": 1}, ["a", "b", "c"], []) for _ in range(40)]

    a, b = draws(first), draws(second)
    assert [d.ranking for d in a] == [d.ranking for d in b]
    assert [d.action for d in a] != [d.action for d in b]


def test_the_decide_answer_is_written_as_json_dumps_would():
    import json

    from service.api.usecases import Decision

    ranking = [('a"x', 0.5), ("é", 0.25), ("b", 1e-05), ("c", 1e-05), ("d", 0.0)]
    ranking += [(f"ad{i}", 1 / (i + 3)) for i in range(20)]
    decision = Decision("e1", 'a"x', 0.5, ranking, 7)
    want = {
        "eventId": "e1",
        "action": 'a"x',
        "probability": 0.5,
        "ranking": [{"id": a, "probability": p} for a, p in ranking],
        "modelVersion": 7,
    }
    assert decision.as_json() == json.dumps(
        want, ensure_ascii=False, separators=(",", ":")
    ).encode()


def test_a_failure_of_grove_itself_is_a_json_500_in_each_route_s_shape(settings, monkeypatch):
    """A bug answers a 500 that says so, in JSON (Personalizer's error shape on its routes),
    through the fast path and FastAPI's alike: Starlette's plain text made the SDKs raise a
    connection error instead of an HTTP one."""
    from fastapi.testclient import TestClient

    from service.api import usecases
    from service.api.main import create_app

    async def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(usecases, "decide", broken)
    monkeypatch.setattr(usecases, "decide_batch", broken)
    with TestClient(create_app(settings), raise_server_exceptions=False) as client:
        shop = create(client, "shop")
        for path, body in (("/apps/shop/decide", {"context": {}}),  # (the fast path)
                           ("/apps/shop/decide/batch", {"requests": [{"context": {}}]})):
            answer = client.post(path, json=body, headers=shop)
            assert answer.status_code == 500, path
            assert "RuntimeError" in answer.json()["detail"]
    # and the connection stays open (uvicorn closed it when the 500 was raised on to it): the
    # middleware answers without raising, so a client that raises server errors sees none
    with TestClient(create_app(settings)) as client:  # (raise_server_exceptions: True)
        shop = {"Authorization": shop["Authorization"]}
        answer = client.post("/apps/shop/decide/batch", json={"requests": [{"context": {}}]},
                             headers=shop)
        assert answer.status_code == 500
        key = {"Ocp-Apim-Subscription-Key": shop["Authorization"].removeprefix("Bearer ")}
        rank = client.post("/personalizer/v1.0/rank", json={"actions": [{"id": "a"}]},
                           headers=key)
        assert rank.status_code == 500
        assert rank.json()["error"]["code"] == "InternalServerError"
