"""Personalizer's Apprentice mode through the current SDK: rank answers the baseline, the
model's own draw is logged and learned as learning-loop learns it (the reported reward when the
draw was the baseline, the default reward otherwise), and the model comes to choose what the
baseline chooses."""

from __future__ import annotations

import time

import httpx
import pytest
from azure.core.exceptions import HttpResponseError

from service import keys
from tests.helpers.articles import serve_latest
from tests.helpers.factories import drain

ACTIONS = ["NewsArticle", "SportsArticle", "EntertainmentArticle"]
#: the existing logic the app follows: one article per segment
BASELINE = {"news": "NewsArticle", "sports": "SportsArticle", "fun": "EntertainmentArticle"}


def _apprentice(admin, **fields) -> None:
    config = admin.get_service_configuration()
    updated = admin.update_service_configuration({**config, "learningMode": "Apprentice",
                                                  **fields})
    assert updated["learningMode"] == "Apprentice"
    assert admin.get_service_configuration()["learningMode"] == "Apprentice"


def _request(segment: str, event_id: str) -> dict:
    """The baseline first, as Apprentice mode asks of a client."""
    first = BASELINE[segment]
    order = [first, *(a for a in ACTIONS if a != first)]
    return {"contextFeatures": [{"segment": segment}], "eventId": event_id,
            "actions": [{"id": a, "features": [{"kind": a[:4]}]} for a in order]}


def _entries(store) -> dict[str, dict[str, str]]:
    """The learning stream's entries by eventId, as text (the packed fields left out)."""
    out = {}
    for _, fields in store.redis.xrange(keys.stream("news")):
        f = {k.decode(): v for k, v in fields.items()}
        out[f["eventId"].decode()] = {k: v.decode() for k, v in f.items()
                                      if k not in ("context", "actionFeatures", "offered")}
    return out


def test_rank_answers_the_baseline_and_the_models_draw_is_learned(admin, client, store,
                                                                  server):
    _apprentice(admin)
    draws = {}
    for i in range(60):
        segment = list(BASELINE)[i % 3]
        request = _request(segment, f"e{i}")
        answer = client.rank(request)
        order = [a["id"] for a in request["actions"]]
        assert answer["rewardActionId"] == BASELINE[segment]  # what the client shows
        assert [r["id"] for r in answer["ranking"]] == order  # the request's order
        assert sum(r["probability"] for r in answer["ranking"]) == pytest.approx(1.0)
        record = store.redis.hgetall(keys.decision("news", f"e{i}"))
        assert record[b"baseline"].decode() == BASELINE[segment]
        draws[f"e{i}"] = record[b"action"].decode()
        # the logged propensity is the model's probability of its draw, as the ranking says
        probability = {r["id"]: r["probability"] for r in answer["ranking"]}[draws[f"e{i}"]]
        assert float(record[b"probability"]) == pytest.approx(probability)
        client.reward(f"e{i}", {"value": 0.75})
    baselines = {f"e{i}": BASELINE[list(BASELINE)[i % 3]] for i in range(60)}
    matched = {e for e, a in draws.items() if a == baselines[e]}
    assert 0 < len(matched) < 60  # an untrained model draws both (p of either way ~1e-10)
    stats = store.redis.hgetall(keys.stats("news"))
    assert int(stats[b"apprenticeDecisions"]) == 60
    assert int(stats[b"apprenticeMatches"]) == len(matched)
    metrics = httpx.get(server + "/metrics").text
    assert 'grove_app_apprentice_decisions_total{app="news"} 60.0' in metrics
    assert f'grove_app_apprentice_matches_total{{app="news"}} {len(matched)}.0' in metrics
    for event_id, entry in _entries(store).items():
        assert entry["action"] == draws[event_id] and entry["baseline"] == baselines[event_id]
        if event_id in matched:  # the reported reward, for the draw that was shown
            assert (entry["reward"], entry["source"]) == ("0.75", "reward")
            assert "observed" not in entry
        else:  # the app's default reward (0), the reported one kept as 'observed'
            assert (float(entry["reward"]), entry["source"]) == (0.0, "apprentice")
            assert entry["observed"] == "0.75"


def test_sums_are_learned_at_the_deadline_under_the_same_rule(admin, client, store, trainer):
    _apprentice(admin, rewardAggregation="sum", rewardWaitTime="PT1S", defaultReward=0.1)
    for i in range(30):
        client.rank(_request("news", f"s{i}"))
        client.reward(f"s{i}", {"value": 0.25})
        client.reward(f"s{i}", {"value": 0.5})
    time.sleep(1.2)
    drain(trainer)
    entries = _entries(store)
    assert len(entries) == 30
    sources = {e["source"] for e in entries.values()}
    assert sources == {"sum", "apprentice"}  # both (an untrained model: ~1e-5 otherwise)
    for entry in entries.values():
        if entry["action"] == "NewsArticle":
            assert float(entry["reward"]) == 0.75 and "observed" not in entry
        else:
            assert float(entry["reward"]) == 0.1 and float(entry["observed"]) == 0.75
    assert store.snapshot_info("news").events_learned == 30


def test_the_model_comes_to_choose_what_the_baseline_chooses(admin, client, store, trainer,
                                                              api):
    """The mode's purpose: the share of the model's draws that are the baseline's choice grows
    from chance (1/3) to nearly all, while every answer is the baseline. (All but the
    exploration floor: with Personalizer's default 20 %, at most 1 - 2 x 0.2 / 3 = 0.87 of the
    draws can be the baseline's; the test explores 5 %, at most 0.97.)"""
    _apprentice(admin, explorationPercentage=0.05)
    shares = []
    for block in range(6):
        matches = 0
        for i in range(60):
            segment = list(BASELINE)[i % 3]
            event_id = f"b{block}-{i}"
            assert client.rank(_request(segment, event_id))["rewardActionId"] == BASELINE[segment]
            record = store.redis.hgetall(keys.decision("news", event_id))
            matches += record[b"action"] == record[b"baseline"]
            client.reward(event_id, {"value": 1.0})
        shares.append(matches / 60)
        drain(trainer)
        serve_latest(api, store, "news")
    assert shares[0] < 0.6, shares
    assert min(shares[-2:]) >= 0.8, shares


def test_a_baseline_that_cannot_be_shown_is_refused(admin, client, store):
    _apprentice(admin)
    request = {**_request("news", "x1"), "excludedActions": ["NewsArticle"]}
    with pytest.raises(HttpResponseError) as bad:
        client.rank(request)
    assert bad.value.status_code == 400
    assert bad.value.error.code == "InvalidRankRequest"
    assert "baseline" in bad.value.error.message
    assert not store.redis.exists(keys.decision("news", "x1"))
    # other actions may be excluded: the ranking gives them 0, after the baseline
    answer = client.rank({**_request("news", "x2"), "excludedActions": ["SportsArticle"]})
    ranking = {r["id"]: r["probability"] for r in answer["ranking"]}
    assert answer["rewardActionId"] == "NewsArticle" and ranking["SportsArticle"] == 0.0


def test_multi_slot_answers_each_slots_baseline(admin, client, store):
    _apprentice(admin)
    for i in range(20):
        answer = client.rank_multi_slot({
            "contextFeatures": [{"segment": "news"}],
            "actions": [{"id": a} for a in ACTIONS],
            "slots": [{"id": "top", "baselineAction": "SportsArticle"},
                      {"id": "side", "baselineAction": "NewsArticle"}],
            "eventId": f"m{i}",
        })
        assert [(s["id"], s["rewardActionId"]) for s in answer["slots"]] == [
            ("top", "SportsArticle"), ("side", "NewsArticle")]
    side = [store.redis.hgetall(keys.decision("news", f"m{i}#side")) for i in range(20)]
    assert {r[b"baseline"] for r in side} == {b"NewsArticle"}
    # the side slot draws among what the top slot did not show (its baseline), so its own
    # baseline stays open to it whatever the top slot's draw was
    assert {r[b"action"] for r in side} <= {b"NewsArticle", b"EntertainmentArticle"}


def test_online_mode_is_unchanged_and_logging_only_is_refused(admin, client, store):
    answer = client.rank(_request("news", "o1"))
    assert answer["ranking"][0]["id"] == answer["rewardActionId"]
    record = store.redis.hgetall(keys.decision("news", "o1"))
    assert b"baseline" not in record and record[b"action"].decode() == answer["rewardActionId"]
    config = admin.get_service_configuration()
    with pytest.raises(HttpResponseError) as bad:
        admin.update_service_configuration({**config, "learningMode": "LoggingOnly"})
    assert bad.value.status_code == 400 and "learningMode" in bad.value.error.message
