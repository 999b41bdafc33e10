"""Personalizer's rank and reward on the fast path (``service/api/fast.py``) answer as FastAPI's
stack does: each request is sent twice, once as the fast path takes it and once with the fast
path turned off, and the answers compared."""

from __future__ import annotations

import dataclasses

import pytest

from service.api import fast as fast_path
from tests.helpers.factories import create
from tests.service.api.test_observability import metric

ACTIONS = [{"id": f"a{i}", "features": [{"topic": f"t{i % 2}"}, {"words": 3 + i}]}
           for i in range(3)]


@pytest.fixture(autouse=True)
def served(monkeypatch) -> list[str]:
    """The routes the fast path called, in order (each request's answer is compared with the
    stack's; this says which of the two the fast path served)."""
    calls: list[str] = []
    for name in ("rank", "events", "multislot/rank", "multislot/events"):
        route = fast_path._ROUTES[name]

        async def spy(*args, _call=route.call, _name=name):
            calls.append(_name)
            return await _call(*args)

        monkeypatch.setitem(fast_path._ROUTES, name, dataclasses.replace(route, call=spy))
    return calls


@pytest.fixture
def key(client):
    headers = create(client, "news", actions=[])
    return {"Ocp-Apim-Subscription-Key": headers["Authorization"].removeprefix("Bearer ")}


def both(client, path: str, body, headers: dict, query: str = ""):
    """The fast path's answer and the stack's (the fast path declining every request)."""
    fast_answer = client.post(path + query, json=body, headers=headers)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fast_path, "_match", lambda scope, limit: None)
        stack_answer = client.post(path + query, json=body, headers=headers)
    return fast_answer, stack_answer


@pytest.mark.parametrize("path, query", [
    ("/personalizer/v1.0/rank", ""), ("/personalizer/v1.1-preview.3/rank", ""),
    ("/personalizer/rank", ""), ("/personalizer/rank", "?api-version=2022-09-01-preview"),
])
def test_a_rank_answers_the_same_in_each_path_style(client, key, served, path, query):
    body = {"contextFeatures": [{"user": {"segment": "s1"}}], "actions": ACTIONS,
            "excludedActions": ["a2"]}
    fast, stack = both(client, path, body, key, query)
    assert served == ["rank"]  # the first, not the second
    assert fast.status_code == stack.status_code == 201, (fast.text, stack.text)
    assert fast.headers["content-type"] == stack.headers["content-type"]
    for answer in (fast, stack):
        ranking = answer.json()["ranking"]
        assert [r["id"] for r in ranking][-1] == "a2" and ranking[-1]["probability"] == 0.0
        assert sorted(r["id"] for r in ranking) == ["a0", "a1", "a2"]
    assert set(fast.json()) == set(stack.json()) == {"eventId", "rewardActionId", "ranking"}


@pytest.mark.parametrize("body, headers, status", [
    ({"actions": ACTIONS, "eventId": "bad id!"}, "key", 400),  # the body's own pattern
    ({"actions": "a0"}, "key", 400),  # not Personalizer's shape
    ({"actions": [{"id": "a0"}, {"id": "a0"}]}, "key", 400),  # the route's own check
    ({"actions": [{"id": "a0", "features": [{"x": {"y": {"z": {"w": {"v": 1}}}}}]}]}, "key",
     400),
    ({"actions": ACTIONS}, {}, 401),
    ({"actions": ACTIONS}, {"Ocp-Apim-Subscription-Key": "not-a-key"}, 401),
])
def test_a_refused_rank_answers_the_stack_s_error(client, key, body, headers, status):
    headers = key if headers == "key" else headers
    fast, stack = both(client, "/personalizer/v1.0/rank", body, headers)
    assert fast.status_code == stack.status_code == status, (fast.text, stack.text)
    assert fast.json() == stack.json() and "error" in fast.json()


def test_rewards_answer_the_same_and_an_unknown_version_is_the_stack_s(client, key, served):
    for event_id in ("e-1", "e-2"):
        rank = client.post("/personalizer/v1.0/rank", headers=key,
                           json={"actions": ACTIONS, "eventId": event_id})
        assert rank.status_code == 201
    fast = client.post("/personalizer/v1.0/events/e-1/reward", json={"value": 1}, headers=key)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fast_path, "_match", lambda scope, limit: None)
        stack = client.post("/personalizer/v1.0/events/e-2/reward", json={"value": 1},
                            headers=key)
    assert fast.status_code == stack.status_code == 204 and fast.content == stack.content == b""
    assert served == ["rank", "rank", "events"]
    # an eventId never ranked: ignored with 204 either way (as Personalizer answered it)
    fast, stack = both(client, "/personalizer/v1.0/events/nope/reward", {"value": 1}, key)
    assert fast.status_code == stack.status_code == 204 and fast.content == stack.content == b""
    for path, body in (("/personalizer/v1.0/events/e-1/reward", {"value": "1"}),  # 400
                       ("/personalizer/v1.0/events/bad%20id/reward", {"value": 1})):
        fast, stack = both(client, path, body, key)
        assert fast.status_code == stack.status_code != 204, path
        assert fast.json() == stack.json(), path
    unknown = client.post("/personalizer/rank?api-version=2099-01-01", json={"actions": ACTIONS},
                          headers=key)
    assert unknown.status_code == 400 and "2099-01-01" in unknown.json()["error"]["message"]
    text = client.get("/metrics").text  # the fast path's requests are counted by their route
    assert metric(text, "grove_http_requests_total", route="/personalizer/rank",
                  status="201") >= 2
    assert metric(text, "grove_http_requests_total",
                  route="/personalizer/events/{eventId}/reward", status="204") == 4


SLOTS = [{"id": "top", "baselineAction": "a0"}, {"id": "side", "baselineAction": "a1",
                                                "features": [{"size": "small"}]}]


@pytest.mark.parametrize("path, query", [
    ("/personalizer/v1.1-preview.3/multislot/rank", ""), ("/personalizer/multislot/rank", ""),
    ("/personalizer/multislot/rank", "?api-version=2022-09-01-preview"),
])
def test_a_multi_slot_rank_and_reward_answer_the_same(client, key, served, path, query):
    body = {"contextFeatures": [{"user": {"segment": "s1"}}], "actions": ACTIONS, "slots": SLOTS}
    fast, stack = both(client, path, body, key, query)  # (Grove makes each an eventId)
    assert served == ["multislot/rank"]
    assert fast.status_code == stack.status_code == 201, (fast.text, stack.text)
    assert fast.headers["content-type"] == stack.headers["content-type"]
    for answer in (fast, stack):
        slots = answer.json()["slots"]
        assert [s["id"] for s in slots] == ["top", "side"]
        assert len({s["rewardActionId"] for s in slots}) == 2
    assert set(fast.json()) == set(stack.json()) == {"eventId", "slots"}
    reward_path = path.replace("/rank", "/events/{}/reward") + query
    rewards = {"reward": [{"slotId": "top", "value": 1.0}, {"slotId": "side", "value": 0.0}]}
    fast = client.post(reward_path.format(fast.json()["eventId"]), json=rewards, headers=key)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fast_path, "_match", lambda scope, limit: None)
        stack = client.post(reward_path.format(stack.json()["eventId"]), json=rewards,
                            headers=key)
    assert fast.status_code == stack.status_code == 204 and fast.content == stack.content == b""
    assert served == ["multislot/rank", "multislot/events"]
    for bad_path, bad in ((reward_path.format("m-1"), {"reward": [{"slotId": "top"}]}),
                          (reward_path.format("a%23b"), rewards),  # outside the pattern
                          (path + query, {**body, "slots": [{"id": "top"}]})):
        fast, stack = both(client, bad_path, bad, key)
        assert fast.status_code == stack.status_code and fast.status_code >= 400, bad_path
        assert fast.json() == stack.json()
    assert served == ["multislot/rank", "multislot/events"]  # the stack answered those
