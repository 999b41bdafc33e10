"""A Personalizer app whose requests bring the day's articles with their features: the current
SDK's Rank scores an article never played from its features, with the ``adf`` kind (``--kind
adf`` in its learning settings) and with the default kind (``auto``: an ``adf`` candidate joins
and serves)."""

from __future__ import annotations

import random

from tests.helpers.factories import drain

TOPICS = ["sport", "politics", "science", "music", "travel"]


def _days(client, trainer, days: range) -> list[float]:
    """Days of five new articles (100 ranks each) with their features; a user reads the
    article of the topic she likes. The rewards of each day's first 20 ranks."""
    rng = random.Random(days.start)
    first = []
    for day in days:
        actions = [{"id": f"d{day}-{t}", "features": [{"topic": t}, {"words": 3 + i}]}
                   for i, t in enumerate(TOPICS)]
        for i in range(100):
            likes = rng.choice(TOPICS)
            answer = client.rank({"contextFeatures": [{"likes": likes}], "actions": actions,
                                  "eventId": f"e{day}-{i}"})
            value = float(answer["rewardActionId"] == f"d{day}-{likes}")
            client.reward(f"e{day}-{i}", {"value": value})
            if i < 20:
                first.append(value)
            if i % 50 == 49:
                drain(trainer)
    return first


def test_rank_scores_new_articles_by_their_features(admin, client, trainer):
    policy = admin.update_policy({"name": "articles",
                                  "arguments": "--cb_explore_adf --kind adf --seed 4"})
    assert "--kind adf" in policy["arguments"]
    _days(client, trainer, range(8))
    first = _days(client, trainer, range(8, 12))
    assert sum(first) / len(first) >= 0.8, sum(first) / len(first)  # 0.2 for a uniform pick


def test_the_default_kind_serves_an_action_feature_candidate(client, trainer):
    _days(client, trainer, range(10))
    assert trainer.owned["news"].learner.serving == "adf"
    first = _days(client, trainer, range(10, 14))
    assert sum(first) / len(first) >= 0.8, sum(first) / len(first)
