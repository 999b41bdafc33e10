"""A Personalizer app whose requests bring the day's articles with their features: the current
SDK's Rank scores an article never played from its features, with the ``adf`` kind (``--kind
adf`` in its learning settings) and with the default kind (``auto``: an ``adf`` candidate joins
and serves)."""

from __future__ import annotations

from tests.helpers.articles import article_days, articles


def _days(client, trainer, days: range) -> list[float]:
    """Ranks among each day's new articles, Personalizer's way: features as a list of dicts."""

    def step(day: int, i: int, likes: str) -> float:
        actions = [{"id": a, "features": [{"topic": f["topic"]}, {"words": f["words"]}]}
                   for a, f in articles(day).items()]
        answer = client.rank({"contextFeatures": [{"likes": likes}], "actions": actions,
                              "eventId": f"e{day}-{i}"})
        value = float(answer["rewardActionId"] == f"d{day}-{likes}")
        client.reward(f"e{day}-{i}", {"value": value})
        return value

    return article_days(step, trainer, days)


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
