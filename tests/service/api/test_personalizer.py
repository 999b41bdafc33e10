"""Azure Personalizer v1.0 compatibility: the documentation's examples replayed, the feature
mapping, keys, and the error shape."""

import json
import logging
import math
from pathlib import Path

import pytest

from service import codec, keys
from tests.helpers.factories import ADMIN, create, drain

EXAMPLES = json.loads((Path(__file__).parent / "data" / "personalizer_examples.json").read_text())


def subscription(headers: dict) -> dict:
    """The app's key as Personalizer clients send it."""
    return {"Ocp-Apim-Subscription-Key": headers["Authorization"].removeprefix("Bearer ")}


@pytest.fixture
def news(client):
    # an app with no actions of its own: Personalizer clients send them with every rank
    return subscription(create(client, "news", actions=[]))


def _check_rank(answer: dict, request: dict, documented: dict) -> None:
    assert set(answer) == set(documented)
    assert answer["eventId"] == documented["eventId"]
    ids = [a["id"] for a in request["actions"]]
    excluded = set(request.get("excludedActions") or [])
    assert sorted(r["id"] for r in answer["ranking"]) == sorted(ids)  # every action, once
    assert answer["rewardActionId"] in set(ids) - excluded
    assert answer["ranking"][0]["id"] == answer["rewardActionId"]
    probability = {r["id"]: r["probability"] for r in answer["ranking"]}
    assert all(probability[a] == 0.0 for a in excluded)
    assert math.isclose(sum(probability.values()), 1.0)
    assert probability[answer["rewardActionId"]] > 0


def test_the_documented_examples_replay(client, news, store):
    for example in EXAMPLES["examples"]:
        request, documented = example["request"], example["response"]
        answer = client.request(
            request["method"], request["path"], json=request.get("body"), headers=news
        )
        assert answer.status_code == documented["status"], (example["name"], answer.text)
        if "body" in documented:
            _check_rank(answer.json(), request["body"], documented["body"])
        else:
            assert answer.content == b""
    # both events are joined and queued for learning, the deferred one after its activation
    assert store.redis.xlen(keys.stream("news")) == 2


def test_namespaced_features_become_dotted_context_keys(client, news, store):
    body = EXAMPLES["examples"][2]["request"]["body"]
    answer = client.post("/personalizer/v1.0/rank", json={**body, "eventId": "e-1"}, headers=news)
    assert answer.status_code == 201, answer.text
    record = store.redis.hgetall(keys.decision("news", "e-1"))
    assert codec.unpack(record[b"context"]) == {
        "user.profileType": "AnonymousUser",
        "user.latLong": "47.6,-122.1",
        "environment.dayOfMonth": "28",
        "environment.monthOfYear": "8",
        "environment.weather": "Sunny",
        "device.mobile": True,
        "device.windows": True,
        "recentActivity.itemsInCart": 3,
    }


def test_rank_reward_learns_through_the_trainer(client, news, trainer, store):
    body = {"contextFeatures": [{"user": {"tier": "pro"}}], "actions": [{"id": "x"}, {"id": "y"}]}
    for i in range(30):
        answer = client.post(
            "/personalizer/v1.0/rank", json={**body, "eventId": f"ev{i}"}, headers=news
        )
        assert answer.status_code == 201
        reward = client.post(
            f"/personalizer/v1.0/events/ev{i}/reward", json={"value": 1.0}, headers=news
        )
        assert reward.status_code == 204
    drain(trainer)
    assert store.snapshot_info("news").events_learned == 30


def test_keys_and_errors_in_personalizers_shape(client, news, caplog):
    body = {"actions": [{"id": "x"}]}
    missing = client.post("/personalizer/v1.0/rank", json=body)
    assert missing.status_code == 401 and missing.json()["error"]["code"] == "Unauthorized"
    admin = {"Ocp-Apim-Subscription-Key": ADMIN["Authorization"].removeprefix("Bearer ")}
    assert client.post("/personalizer/v1.0/rank", json=body, headers=admin).status_code == 401
    bearer = {"Authorization": "Bearer " + news["Ocp-Apim-Subscription-Key"]}
    assert client.post("/personalizer/v1.0/rank", json=body, headers=bearer).status_code == 201
    bad = client.post("/personalizer/v1.0/rank", json={"actions": []}, headers=news)
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "BadRequest"
    assert "actions" in bad.json()["error"]["message"]
    # an eventId never ranked: ignored with 204 and logged, as Personalizer answered it; Grove's
    # own route says 404
    with caplog.at_level(logging.INFO, logger="grove.events"):
        unknown = client.post("/personalizer/v1.0/events/nope/reward", json={"value": 1},
                              headers=news)
        inactive = client.post("/personalizer/v1.0/events/nope/activate", headers=news)
    assert unknown.status_code == inactive.status_code == 204
    ignored = {(r.getMessage(), r.eventId) for r in caplog.records if "ignored" in r.getMessage()}
    assert ignored == {("reward-ignored", "nope"), ("activate-ignored", "nope")}
    native = {"Authorization": "Bearer " + news["Ocp-Apim-Subscription-Key"]}
    assert client.get("/apps/news", headers=native).json()["stats"]["unmatched"] == 1
    assert 'grove_app_unmatched_rewards_total{app="news"} 1.0' in client.get("/metrics").text
    unknown = client.post("/apps/news/reward", json={"eventId": "nope", "reward": 1},
                          headers=native)
    assert unknown.status_code == 404 and "nope" in unknown.json()["detail"]
    for typed in (True, "1"):  # a reward is a number
        wrong = client.post("/personalizer/v1.0/events/nope/reward", json={"value": typed},
                            headers=news)
        assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "BadRequest", typed
    deep = {"contextFeatures": [{"a": {"b": {"c": {"d": {"e": 1}}}}}], "actions": [{"id": "x"}]}
    answer = client.post("/personalizer/v1.0/rank", json=deep, headers=news)
    assert answer.status_code == 400 and "deeper" in answer.json()["error"]["message"]
    assert answer.json()["error"]["code"] == "InvalidRankRequest"
    twice = {"contextFeatures": [{"a": 1}, {"a": 2}], "actions": [{"id": "x"}]}
    assert client.post("/personalizer/v1.0/rank", json=twice, headers=news).status_code == 400
    for raw in ('{"contextFeatures": [{"a": 1e308}], "actions": [{"id": "x"}]}',
                '{"contextFeatures": [{"a": 123456789012345678901234567890}], '
                '"actions": [{"id": "x"}]}',
                '{"contextFeatures": [{"a": "\\ud800"}], "actions": [{"id": "x"}]}',
                '{"actions": [{"id": "x", "features": [{"\\ud800": 1}]}]}',
                # each checked as the native decide checks it: exclusions as text,
                # flattened names and strings by length, action features' numbers
                '{"actions": [{"id": "x"}], "excludedActions": ["\\ud800"]}',
                '{"actions": [{"id": "x", "features": [{"n": {"%s": 1}}]}]}' % ("k" * 255),
                '{"actions": [{"id": "x", "features": [{"s": "%s"}]}]}' % ("v" * 4097),
                '{"contextFeatures": [{"s": "%s"}], "actions": [{"id": "x"}]}' % ("v" * 4097),
                '{"actions": [{"id": "x", "features": [{"p": 1e39}]}]}'):
        answer = client.post("/personalizer/v1.0/rank", content=raw,
                             headers={**news, "Content-Type": "application/json"})
        assert answer.status_code == 400, (raw, answer.text)
        assert answer.json()["error"]["code"] == "InvalidRankRequest"
    lone = client.post("/personalizer/v1.0/rank", content='{"actions": [{"id": "\\ud800"}]}',
                       headers={**news, "Content-Type": "application/json"})
    assert lone.status_code == 400 and lone.json()["error"]["code"] == "BadRequest"  # (parsing)


def test_activate_is_idempotent_and_reward_needs_activation(client, news, store):
    body = {"actions": [{"id": "x"}, {"id": "y"}], "eventId": "d1", "deferActivation": True}
    assert client.post("/personalizer/v1.0/rank", json=body, headers=news).status_code == 201
    # Personalizer ignored the reward of an event not activated (204): so does Grove
    early = client.post("/personalizer/v1.0/events/d1/reward", json={"value": 1}, headers=news)
    assert early.status_code == 204
    assert store.redis.xlen(keys.stream("news")) == 0
    for _ in range(2):
        answer = client.post("/personalizer/v1.0/events/d1/activate", headers=news)
        assert answer.status_code == 204
    assert (
        client.post(
            "/personalizer/v1.0/events/d1/reward", json={"value": 1}, headers=news
        ).status_code
        == 204
    )


def test_names_that_are_stored_must_be_unicode(client, news, store):
    """A lone surrogate in a name Grove stores and writes back later is a 400 before anything is
    written: an evaluation's name made every later read of the job list a 500, a policy's name
    was applied and then unreadable."""
    json_headers = {**news, "Content-Type": "application/json"}
    for method, path, raw in (
        ("PUT", "/personalizer/v1.1-preview.3/evaluations/ev1",
         '{"name": "\\ud800", "startTime": "2020-01-01T00:00:00Z", '
         '"endTime": "2030-01-01T00:00:00Z"}'),
        ("PUT", "/personalizer/v1.0/configurations/policy",
         '{"name": "\\ud800", "arguments": "--kind linucb"}'),
    ):
        answer = client.request(method, path, content=raw, headers=json_headers)
        assert answer.status_code == 400, (path, answer.text)
        assert "lone surrogate" in answer.json()["error"]["message"]
    assert client.get("/personalizer/v1.0/configurations/policy",
                      headers=news).json()["arguments"].find("linucb") < 0  # not applied
    upload = client.post("/jobs/feature-selection", headers=ADMIN,
                         files={"file": ("d.csv", b"a,b\n1,2\n")},
                         data={"params": '{"target": "\\ud800"}'})
    assert upload.status_code == 422 and "lone surrogate" in upload.text



def test_a_feasible_multi_slot_rank_is_never_refused(client, news):
    """Slots are decided in order, each without the earlier slots' actions; slot x must leave
    a1 to slot y, which can take nothing else (before: a 400 whenever x's draw took a1)."""
    body = {"actions": [{"id": "a0"}, {"id": "a1"}, {"id": "a2"}],
            "slots": [{"id": "x", "baselineAction": "a0"},
                      {"id": "y", "baselineAction": "a1", "excludedActions": ["a0", "a2"]}]}
    for _ in range(20):
        answer = client.post("/personalizer/v1.1-preview.3/multislot/rank", json=body,
                             headers=news)
        assert answer.status_code == 201, answer.text
        chosen = {s["id"]: s["rewardActionId"] for s in answer.json()["slots"]}
        assert chosen["y"] == "a1" and chosen["x"] in {"a0", "a2"}
    impossible = {**body, "slots": [*body["slots"], {"id": "z", "baselineAction": "a1",
                                                      "excludedActions": ["a0", "a2"]}]}
    refused = client.post("/personalizer/v1.1-preview.3/multislot/rank", json=impossible,
                          headers=news)
    assert refused.status_code == 400
    # a slot's id is a feature of its decision's context (slot.id): the parse takes Unicode
    # text only, so the context is not checked again
    lone = client.post("/personalizer/v1.1-preview.3/multislot/rank", headers={
        **news, "Content-Type": "application/json"}, content='{"actions": [{"id": "a0"}], '
        '"slots": [{"id": "\\ud800", "baselineAction": "a0"}]}')
    assert lone.status_code == 400 and "slots.0.id" in lone.json()["error"]["message"]


def test_the_ranking_lists_the_offered_actions_only(client, news):
    body = {"actions": [{"id": "x"}, {"id": "y"}], "excludedActions": ["x", "not-offered"]}
    answer = client.post("/personalizer/v1.0/rank", json=body, headers=news).json()
    assert answer["rewardActionId"] == "y"
    assert [(r["id"], r["probability"]) for r in answer["ranking"]] == [("y", 1.0), ("x", 0.0)]
    everything = {"actions": [{"id": "x"}], "excludedActions": ["x"]}
    refused = client.post("/personalizer/v1.0/rank", json=everything, headers=news)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "InvalidRankRequest"
