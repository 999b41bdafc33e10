"""Personalizer's offline evaluations (service/personalizer/evaluation.py) over the actions each
logged request offered."""

from __future__ import annotations

import numpy as np

from service.personalizer.evaluation import Candidate, evaluate
from service.personalizer.logged import LoggedEvent
from service.records import Action
from tests.helpers.factories import make_config


def test_each_event_is_evaluated_over_the_actions_its_request_offered():
    """Requests offer two of six articles (the first of the two earns 1), one drawn uniformly.
    Random plays one of the two offered (worth 0.5), Baseline the request's first (worth 1);
    over every action seen they were worth ~1/6 and 0."""
    config = make_config(actions=())
    rng = np.random.default_rng(0)
    events = []
    for i in range(2000):
        offered = tuple(rng.choice([f"n{j}" for j in range(6)], 2, replace=False).tolist())
        action = offered[int(rng.integers(2))]
        events.append(LoggedEvent(f"e{i}", i, {"f": float(rng.random())}, action,
                                  float(action == offered[0]), 0.5, offered))
    candidates = [Candidate("Random", "Random"), Candidate("Baseline", "Baseline"),
                  Candidate("linucb", "OfflineExperimentation", "--kind linucb", "linucb", {})]
    result = evaluate(events, config, candidates, lambda *_: None)
    value = {p["name"]: p["summary"]["expectedReward"] for p in result["policies"]}
    assert abs(value["Random"] - 0.5) < 0.02
    assert abs(value["Baseline"] - 1.0) < 0.05
    assert value["linucb"] > 0.4  # over the two offered: 0.5 (no context says which earns)
    assert sorted(result["actions"]) == [f"n{j}" for j in range(6)]


def test_events_without_their_offer_are_evaluated_over_every_action_seen():
    config = make_config(actions=(Action("a"), Action("b")))
    events = [LoggedEvent(f"e{i}", i, {}, "ab"[i % 2], 1.0, 0.5) for i in range(400)]
    result = evaluate(events, config, [Candidate("Random", "Random")], lambda *_: None)
    [random] = result["policies"]
    assert abs(random["summary"]["expectedReward"] - 1.0) < 1e-9  # (1/2) / 0.5 * 1


def test_a_kind_that_reads_action_features_is_evaluated_with_the_logged_ones():
    """Every request offers two new articles (ids never seen again) with their topic, one
    drawn uniformly; the user reads the one of her topic. ``adf`` is valued with the features
    each event logged (~1 once learned); without them it could not tell two new ids apart
    (0.5)."""
    config = make_config(actions=())
    rng = np.random.default_rng(1)
    topics = ["sport", "music", "travel", "science"]
    events = []
    for i in range(3000):
        pair = rng.choice(topics, 2, replace=False).tolist()
        offered = (f"n{i}-0", f"n{i}-1")
        likes = pair[int(rng.integers(2))]
        action = offered[int(rng.integers(2))]
        features = {a: {"topic": t} for a, t in zip(offered, pair)}
        events.append(LoggedEvent(f"e{i}", i, {"likes": likes}, action,
                                  float(features[action]["topic"] == likes), 0.5, offered,
                                  features))
    candidates = [Candidate("adf", "OfflineExperimentation", "--kind adf", "adf", {}),
                  Candidate("linucb", "OfflineExperimentation", "--kind linucb", "linucb", {})]
    result = evaluate(events, config, candidates, lambda *_: None)
    value = {p["name"]: p["summary"]["expectedReward"] for p in result["policies"]}
    assert value["adf"] > 0.85 and abs(value["linucb"] - 0.5) < 0.05
