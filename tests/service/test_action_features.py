"""Actions that bring their own features (an article's topic), through the API, the stored
decisions, the trainer and the served snapshot: the ``adf`` kind scores a new article from its
features."""

from __future__ import annotations

import random
import time

import pytest

from service import codec, keys
from service.models import model_kind
from tests.helpers.articles import TOPICS, article_days, articles, serve_latest
from tests.helpers.factories import ADMIN, drain, make_settings


@pytest.fixture
def settings(redis_url):
    """Reproducible exploration draws (see :func:`serve_latest`)."""
    return make_settings(redis_url, decide_seed=11)


def _articles(day: int) -> list[dict]:
    return [{"id": a, "features": f} for a, f in articles(day).items()]


def _create(client, name: str, kind: str) -> dict:
    answer = client.post("/apps", json={"name": name, "rewardWaitTime": 600,
                                        "policy": {"kind": kind, "params": {"seed": 1}}},
                         headers=ADMIN)
    assert answer.status_code == 201, answer.text
    return {"Authorization": f"Bearer {answer.json()['apiKey']}"}


def _days(client, trainer, app: str, headers: dict, days: range) -> list[float]:
    """Decides among each day's new articles through the native API."""

    def step(day: int, i: int, likes: str) -> float:
        body = client.post(f"/apps/{app}/decide", headers=headers, json={
            "context": {"likes": likes}, "actions": _articles(day)}).json()
        reward = float(articles(day)[body["action"]]["topic"] == likes)
        answer = client.post(f"/apps/{app}/reward", headers=headers,
                             json={"eventId": body["eventId"], "reward": reward})
        assert answer.status_code == 200, answer.text
        return reward

    return article_days(step, trainer, days,
                        drained=lambda: serve_latest(client.app, trainer.store, app))


def test_a_new_article_is_scored_from_its_features_through_the_service(client, trainer, store):
    headers = _create(client, "news", "adf")
    _days(client, trainer, "news", headers, range(8))
    late = _days(client, trainer, "news", headers, range(8, 12))
    assert sum(late) / len(late) >= 0.8, sum(late) / len(late)  # 0.2 for a uniform pick

    # the learning stream holds the offered actions' features with each event
    entry = store.redis.xrevrange(keys.stream("news"), count=1)[0][1]
    features = codec.unpack(entry[b"actionFeatures"])
    assert features["d11-science"] == {"topic": "science", "words": 5}

    # the served snapshot, given the request's features, is what the API logged
    info, state = store.load_snapshot("news", serving=True)
    served = model_kind("adf").load(state)
    articles = _articles(99)
    deadline = time.monotonic() + 10
    while True:  # (the API loads a newer snapshot when a decide tells it there is one)
        decision = client.post("/apps/news/decide", headers=headers, json={
            "context": {"likes": "music"}, "actions": articles}).json()
        if decision["modelVersion"] == info.version or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert decision["modelVersion"] == info.version
    expected = served.probabilities({"likes": "music"}, actions=[a["id"] for a in articles],
                                    action_features={a["id"]: a["features"] for a in articles})
    assert {r["id"]: r["probability"] for r in decision["ranking"]} == expected
    assert max(expected, key=expected.get) == "d99-music"  # never played


def test_a_kind_that_learns_per_id_takes_the_same_requests(client, trainer):
    """Features are validated and stored for every kind; the per-id kinds decide as before."""
    headers = _create(client, "ids", "linucb")
    first = _days(client, trainer, "ids", headers, range(3))
    assert 0.0 <= sum(first) / len(first) <= 0.6  # (nothing carries over to new ids)
    bad = client.post("/apps/ids/decide", headers=headers, json={
        "context": {"likes": "music"},
        "actions": [{"id": "x", "features": {"words": 2 ** 70}}]})
    assert bad.status_code == 422 and "words" in bad.text


def test_the_app_s_own_actions_bring_their_features(client, trainer, store):
    """Actions listed with the app (``POST /apps``) are scored by the features they were listed
    with when a request names none; the trainer reads them from the app, not from each
    stored decision."""
    listed = [{"id": f"art-{t}", "features": {"topic": t}} for t in TOPICS]
    answer = client.post("/apps", headers=ADMIN, json={
        "name": "listed", "rewardWaitTime": 600, "actions": listed,
        "policy": {"kind": "adf", "params": {"seed": 2}}})
    headers = {"Authorization": f"Bearer {answer.json()['apiKey']}"}
    rng = random.Random(3)
    hits = []
    for i in range(600):
        likes = rng.choice(TOPICS)
        body = client.post("/apps/listed/decide", headers=headers,
                           json={"context": {"likes": likes}}).json()
        reward = float(body["action"] == f"art-{likes}")
        client.post("/apps/listed/reward", headers=headers,
                    json={"eventId": body["eventId"], "reward": reward})
        hits.append(reward)
        if i % 50 == 49:
            drain(trainer)
    assert sum(hits[-200:]) / 200 >= 0.85
    entry = store.redis.xrevrange(keys.stream("listed"), count=1)[0][1]
    assert b"actionFeatures" not in entry and b"context" in entry
    assert trainer.owned["listed"].learner.action_features("art-music") == {"topic": "music"}
