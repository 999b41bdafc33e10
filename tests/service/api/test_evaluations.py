"""An auto app through the API: evaluations, switches in /metrics, candidate changes (PATCH)."""

from __future__ import annotations

import random
import re

import pytest

from service import codec
from service.models import model_kind
from tests.helpers.factories import ADMIN, create, drain

ACTIONS = [f"a{i}" for i in range(5)]
FOREST = {"kind": "bandit-forest", "params": {"n_trees": 5, "warmup": 20}}
LINUCB = {"kind": "linucb"}
CANDIDATE_KEYS = {"name", "kind", "params", "estimate", "lower", "upper", "events", "serving"}
SWITCH_KEYS = {"at", "from", "to", "estimates"}


def _auto(client, name: str = "ads", min_events: int = 200, **params) -> dict:
    """An auto app on the five-action problem, Bandit Forest serving first, LinUCB second."""
    policy = {"kind": "auto", "params": {"candidates": [FOREST, LINUCB], "min_events": min_events,
                                         "seed": 7, **params}}
    return create(client, name, policy=policy, actions=ACTIONS, rewardWaitTime=600)


def _play(client, headers, app: str, n: int, rng: random.Random) -> float:
    """``n`` decide/reward rounds (reward 1 for the context's favourite); the mean reward."""
    requests = []
    for _ in range(n):
        favorite = rng.choice(ACTIONS)
        requests.append({"context": {"favorite": favorite,
                                     "device": rng.choice(["pc", "phone", "tablet"])}})
    answer = client.post(f"/apps/{app}/decide/batch", json={"requests": requests},
                         headers=headers)
    assert answer.status_code == 200, answer.text
    earned = 0.0
    for request, decision in zip(requests, answer.json()["responses"], strict=True):
        reward = float(decision["action"] == request["context"]["favorite"])
        earned += reward
        answer = client.post(f"/apps/{app}/reward", headers=headers,
                             json={"eventId": decision["eventId"], "reward": reward})
        assert answer.status_code == 200, answer.text
    return earned / n


def _evaluations(client, app: str, headers: dict = ADMIN) -> dict:
    answer = client.get(f"/apps/{app}/evaluations", headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _by_name(figures: dict) -> dict:
    return {c["name"]: c for c in figures["candidates"]}


def _patch(client, app: str, body: dict, headers: dict = ADMIN):
    return client.patch(f"/apps/{app}/candidates", json=body, headers=headers)


def _switch_metric(client, app: str) -> float | None:
    text = client.get("/metrics").text
    found = re.search(rf'^grove_app_policy_switches_total{{app="{app}"}} (\S+)$', text, re.M)
    return None if found is None else float(found.group(1))


def test_evaluations_of_an_app_that_is_not_auto_is_a_422(client):
    shop = create(client)
    answer = client.get("/apps/shop/evaluations", headers=shop)
    assert answer.status_code == 422 and "'auto' apps" in answer.text


def test_a_new_auto_app_has_figures_before_any_event(client):
    """No event yet: every candidate has 0 events and a finite band (JSON has no inf)."""
    headers = _auto(client)
    figures = _evaluations(client, "ads", headers)
    assert [c["name"] for c in figures["candidates"]] == ["bandit-forest", "linucb"]
    for c in figures["candidates"]:
        assert CANDIDATE_KEYS <= set(c) and c["events"] == 0
        assert 0.0 <= c["lower"] <= c["upper"] <= 1.0
    assert figures["switches"] == [] and figures["serving"] == "bandit-forest"
    assert figures["held"] is None  # (no action features: the bands alone decide)


def test_evaluations_say_why_young_actions_hold_the_feature_candidate(client, trainer):
    """Requests that bring new actions with their features: the default kind's ``adf``
    candidate serves, and while most plays are of young actions the figures say that no
    per-id candidate may replace it."""
    headers = create(client, "news", policy={"kind": "auto", "params": {"seed": 3}},
                     actions=[], rewardWaitTime=600)
    rng = random.Random(4)
    requests = [{"context": {"likes": f"t{rng.randrange(5)}"},
                 "actions": [{"id": f"d{i // 20}-{j}", "features": {"topic": f"t{j}"}}
                             for j in range(5)]} for i in range(60)]
    answer = client.post("/apps/news/decide/batch", json={"requests": requests},
                         headers=headers)
    assert answer.status_code == 200, answer.text
    for request, decision in zip(requests, answer.json()["responses"], strict=True):
        reward = float(decision["action"].endswith(request["context"]["likes"][1:]))
        answer = client.post("/apps/news/reward", headers=headers,
                             json={"eventId": decision["eventId"], "reward": reward})
        assert answer.status_code == 200, answer.text
    drain(trainer)
    figures = _evaluations(client, "news")
    assert figures["serving"] == "adf"
    assert figures["held"].startswith("young actions: 100% of the recent events"), figures


def test_evaluations_with_the_apps_key_and_with_admin(client, trainer):
    headers = _auto(client)
    other = create(client, "other", policy={"kind": "auto"}, actions=ACTIONS)
    _play(client, headers, "ads", 300, random.Random(1))
    drain(trainer)
    figures = _evaluations(client, "ads", headers)
    assert figures == _evaluations(client, "ads", ADMIN)
    assert set(figures) >= {"candidates", "switches"}
    assert [c["serving"] for c in figures["candidates"]].count(True) == 1
    for c in figures["candidates"]:
        assert CANDIDATE_KEYS <= set(c)
        assert c["events"] == 300 and isinstance(c["params"], dict)
        assert c["lower"] <= c["estimate"] <= c["upper"]
    assert _by_name(figures)["bandit-forest"]["kind"] == "bandit-forest"
    assert _by_name(figures)["bandit-forest"]["params"]["n_trees"] == 5
    # another app's key, no key, a wrong key
    assert client.get("/apps/ads/evaluations", headers=other).status_code in (401, 403)
    assert client.get("/apps/ads/evaluations").status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert client.get("/apps/ads/evaluations", headers=wrong).status_code == 401
    assert client.get("/apps/nope/evaluations", headers=ADMIN).status_code == 404


def test_a_switch_shows_in_the_switches_list_and_in_metrics(client, trainer):
    """Bandit Forest serves first; LinUCB learns the same events and takes over."""
    headers = _auto(client)
    rng = random.Random(2)
    for _ in range(30):
        _play(client, headers, "ads", 100, rng)
        drain(trainer)
        if _evaluations(client, "ads")["switches"]:
            break
    figures = _evaluations(client, "ads", headers)
    assert figures["serving"] == "linucb"
    assert _by_name(figures)["linucb"]["serving"] and not _by_name(figures)["bandit-forest"][
        "serving"]
    [switch] = figures["switches"]
    assert SWITCH_KEYS <= set(switch)
    assert (switch["from"], switch["to"], switch["reason"]) == ("bandit-forest", "linucb",
                                                                "evaluation")
    assert 200 <= switch["at"] <= 3000
    both = switch["estimates"]
    assert set(both) == {"bandit-forest", "linucb"}
    assert both["linucb"]["lower"] > both["bandit-forest"]["upper"]  # the switching rule
    assert _switch_metric(client, "ads") == 1.0
    # LinUCB now serves the problem well (once this API process has loaded the new snapshot:
    # a decide serves the old one while the new one loads; GET /apps/{app} waits for it), and
    # the two do not trade places afterwards
    for _ in range(4):
        client.get("/apps/ads", headers=headers)
        assert _play(client, headers, "ads", 300, rng) >= 0.8
        drain(trainer)
    assert len(_evaluations(client, "ads")["switches"]) == 1
    assert _switch_metric(client, "ads") == 1.0


def test_patch_candidates_keeps_what_the_others_learned(client, trainer, store):
    headers = _auto(client)
    rng = random.Random(3)
    _play(client, headers, "ads", 400, rng)
    drain(trainer)
    before = _by_name(_evaluations(client, "ads"))
    _, state = store.load_snapshot("ads")
    learned = {c: model_kind("auto").load(state).candidate(c).n_learned for c in before}
    body = {"candidates": [{"kind": "bandit-forest"}, {"kind": "linucb", "name": "linucb"},
                           {"kind": "linucb", "name": "greedy", "params": {"alpha": 0.1}}]}
    answer = _patch(client, "ads", body)
    assert answer.status_code == 200, answer.text
    after = _by_name(answer.json())
    assert list(after) == ["bandit-forest", "linucb", "greedy"]
    for name in ("bandit-forest", "linucb"):
        assert after[name]["events"] == before[name]["events"] == 400
        assert after[name]["estimate"] == before[name]["estimate"]
    assert after["greedy"]["events"] == 0 and after["greedy"]["params"]["alpha"] == 0.1
    assert answer.json() == _evaluations(client, "ads", headers)  # published at once
    _, state = store.load_snapshot("ads")
    auto = model_kind("auto").load(state)
    assert {c: auto.candidate(c).n_learned for c in learned} == learned
    # the app's config lists the new candidates; the trainer goes on from the new model
    app = client.get("/apps/ads", headers=ADMIN).json()
    assert [c["name"] for c in app["policy"]["params"]["candidates"]] == list(after)
    _play(client, headers, "ads", 100, rng)
    drain(trainer)  # the publish fails on the version: the trainer drops the app...
    drain(trainer)  # ...takes it again from the changed snapshot and re-learns the 100 events
    final = _by_name(_evaluations(client, "ads"))
    assert final["greedy"]["events"] == 100 and final["linucb"]["events"] == 500
    # a changed param is a new candidate under that name: it starts empty
    answer = _patch(client, "ads", {"candidates": [
        {"kind": "bandit-forest"}, {"kind": "linucb", "params": {"alpha": 3.0}}]})
    assert answer.status_code == 200, answer.text
    assert _by_name(answer.json())["linucb"]["events"] == 0
    assert _by_name(answer.json())["bandit-forest"]["events"] == 500


def test_removing_the_serving_candidate_is_a_409_unless_another_is_named(client, trainer):
    headers = _auto(client)
    _play(client, headers, "ads", 100, random.Random(4))
    drain(trainer)
    answer = _patch(client, "ads", {"candidates": [LINUCB]})
    assert answer.status_code == 409 and "bandit-forest" in answer.json()["detail"]
    assert _evaluations(client, "ads")["serving"] == "bandit-forest"  # nothing changed
    assert len(_evaluations(client, "ads")["candidates"]) == 2
    answer = _patch(client, "ads", {"candidates": [LINUCB], "serving": "linucb"})
    assert answer.status_code == 200, answer.text
    figures = answer.json()
    assert [c["name"] for c in figures["candidates"]] == ["linucb"]
    assert figures["serving"] == "linucb" and figures["candidates"][0]["events"] == 100
    assert figures["switches"][-1]["from"] == "bandit-forest"
    assert figures["switches"][-1]["to"] == "linucb"
    assert figures["switches"][-1]["reason"] == "operator"
    # serving alone, and the floor
    answer = _patch(client, "ads", {"candidates": [LINUCB, FOREST]})
    assert answer.status_code == 200, answer.text
    answer = _patch(client, "ads", {"serving": "bandit-forest", "floor": 0.2})
    assert answer.status_code == 200, answer.text
    assert answer.json()["serving"] == "bandit-forest" and answer.json()["floor"] == 0.2
    decision = client.post("/apps/ads/decide", json={"context": {"favorite": "a1"}},
                           headers=headers).json()
    assert min(r["probability"] for r in decision["ranking"]) >= 0.2 / 5 - 1e-12


@pytest.mark.parametrize(("body", "status", "says"), [
    ({"candidates": [{"kind": "nope"}]}, 422, "nope"),
    ({"candidates": [{"kind": "linucb", "params": {"depth": 3}}]}, 422, "depth"),
    ({"candidates": [{"kind": "linucb", "params": {"alpha": -1}}]}, 422, "alpha"),
    ({"candidates": [{"kind": "linucb", "params": {"alpha": "high"}}]}, 422, "alpha"),
    ({"candidates": [{"kind": "bandit-forest", "params": {"n_trees": 0}}]}, 422, "n_trees"),
    ({"candidates": [{"kind": "auto"}]}, 422, "auto"),
    ({"candidates": [LINUCB, LINUCB]}, 422, "differ"),
    ({"candidates": []}, 422, "candidates"),
    ({"candidates": [{"params": {}}]}, 422, "kind"),
    ({"candidates": [{"kind": "linucb", "color": "red"}]}, 422, "color"),
    ({"candidates": "linucb"}, 422, "candidates"),
    ({"serving": "nope"}, 422, "nope"),
    ({"candidates": [FOREST, LINUCB], "serving": "nope"}, 422, "nope"),
    ({"floor": 0}, 422, "floor"),
    ({"floor": 1.5}, 422, "floor"),
    ({"floor": "NaN"}, 422, "floor"),
    ({"mystery": 1}, 422, "mystery"),
    ({}, 422, "nothing to change"),
    ({"candidates": [{"kind": "linucb", "name": "<b>"}]}, 422, "name"),
])
def test_bad_candidate_changes_are_4xx_naming_the_problem(client, body, status, says):
    _auto(client)
    answer = _patch(client, "ads", body)
    assert answer.status_code == status, answer.text
    assert says in answer.text
    figures = _evaluations(client, "ads")  # all or nothing: the app is as it was
    assert [c["name"] for c in figures["candidates"]] == ["bandit-forest", "linucb"]
    assert figures["serving"] == "bandit-forest" and figures["floor"] == 0.01


def test_candidate_changes_need_the_admin_key_and_an_auto_app(client):
    headers = _auto(client)
    shop = create(client)
    assert _patch(client, "ads", {"serving": "linucb"}, headers).status_code == 403
    assert _patch(client, "ads", {"serving": "linucb"}, {}).status_code == 401
    assert _patch(client, "nope", {"serving": "linucb"}).status_code == 404
    answer = _patch(client, "shop", {"serving": "linucb"})
    assert answer.status_code == 422 and "'auto' apps" in answer.text
    assert client.get("/apps/shop/evaluations", headers=shop).status_code == 422


def test_hostile_input_to_an_auto_app_is_refused_without_a_500(client, trainer):
    headers = _auto(client)
    decision = client.post("/apps/ads/decide", json={"context": {"favorite": "a1"}},
                           headers=headers).json()
    event = decision["eventId"]
    for reward in (2.0, -0.5, 1e308, "NaN", "Infinity", None, "one"):
        answer = client.post("/apps/ads/reward", json={"eventId": event, "reward": reward},
                             headers=headers)
        assert answer.status_code == 422, (reward, answer.text)
    assert client.post("/apps/ads/reward", json={"eventId": event, "reward": 1.0},
                       headers=headers).status_code == 200
    raw = {**headers, "Content-Type": "application/json"}
    for context in ('{"favorite": NaN}', '{"favorite": 1e400}', '{"%s": 1}' % ("x" * 10_000),
                    '{"deep": {"er": {"est": 1}}}', '{"list": [1, 2, 3]}', '[1, 2]', 'null'):
        answer = client.post("/apps/ads/decide", content=f'{{"context": {context}}}',
                             headers=raw)
        assert answer.status_code < 500, (context[:50], answer.text)
    infinite = '{"candidates": [{"kind": "linucb", "params": {"alpha": 1e400}}]}'
    answer = client.patch("/apps/ads/candidates", content=infinite,
                          headers={**ADMIN, "Content-Type": "application/json"})
    assert answer.status_code == 422, answer.text
    # hostile candidate changes
    for body in ({"candidates": [{"kind": "linucb", "name": ""}]},
                 {"candidates": [{"kind": "linucb", "params": {"alpha": [1, 2]}}]},
                 {"candidates": [{"kind": "linucb", "params": {"seed": -5}}]},
                 {"candidates": [{"kind": "bandit-forest", "params": {"n_trees": 1e12}}]},
                 {"candidates": [{"kind": "trees", "params": {"window": -1}}]},
                 {"candidates": [{"kind": "linucb", "name": f"c{j}"} for j in range(1000)]},
                 {"candidates": [{"kind": "linucb", "name": "n" * 100_000}]},
                 {"candidates": [{"kind": ["linucb"]}]}):
        answer = _patch(client, "ads", body)
        assert 400 <= answer.status_code < 500, (str(body)[:200], answer.text[:500])
    _play(client, headers, "ads", 50, random.Random(5))
    drain(trainer)
    assert _by_name(_evaluations(client, "ads"))["linucb"]["events"] == 51
    # a decision stored under the app can not be learned with a reward outside [0, 1]
    assert trainer.owned["ads"].learner.clipped_rewards == 0


def test_the_serving_snapshot_carries_the_candidates_state(store, client):
    """The published snapshot is the auto policy's own state (not pickled: grove's codec)."""
    _auto(client)
    _, state = store.load_snapshot("ads", serving=True)
    assert codec.decode(codec.encode(state))["format"] == "grove.auto"


@pytest.mark.parametrize(("params", "says"), [
    ({"candidates": [{"kind": "nope"}]}, "nope"),
    ({"candidates": [{"kind": "linucb", "params": {"depth": 3}}]}, "depth"),
    ({"candidates": []}, "at least one candidate"),
    ({"candidates": "linucb"}, "candidate"),
    ({"candidates": [{"kind": "linucb", "params": [1]}]}, "params"),
    ({"candidates": [LINUCB], "floor": 0}, "floor"),
    ({"candidates": [LINUCB], "estimator": "magic"}, "estimator"),
    ({"candidates": [LINUCB], "min_events": -1}, "min_events"),
    ({"candidates": [{"kind": "linucb", "name": f"c{j}"} for j in range(100)]}, "at most 8"),
    ({"candidates": [{"kind": "linucb", "name": "<b>"}]}, "candidate name"),
])
def test_creating_an_auto_app_with_bad_params_is_a_422_naming_them(client, params, says):
    answer = client.post("/apps", headers=ADMIN, json={
        "name": "bad", "actions": ACTIONS, "policy": {"kind": "auto", "params": params}})
    assert answer.status_code == 422, answer.text
    assert says in answer.text
