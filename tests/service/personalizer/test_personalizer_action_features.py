"""A Personalizer app whose requests bring the day's articles with their features: the current
SDK's Rank scores an article never played from its features, with the ``adf`` kind (``--kind
adf`` in its learning settings) and with the default kind (``auto``: an ``adf`` candidate joins
and serves); Personalizer's own default learning settings are ``adf`` with VW's settings."""

from __future__ import annotations

import pytest

from tests.helpers.articles import article_days, articles, serve_latest
from tests.helpers.factories import make_settings


@pytest.fixture
def settings(redis_url):
    """Reproducible exploration draws (see :func:`serve_latest`)."""
    return make_settings(redis_url, decide_seed=11)


def _days(client, trainer, days: range, api=None) -> list[float]:
    """Ranks among each day's new articles, Personalizer's way: features as a list of dicts."""

    def step(day: int, i: int, likes: str) -> float:
        actions = [{"id": a, "features": [{"topic": f["topic"]}, {"words": f["words"]}]}
                   for a, f in articles(day).items()]
        answer = client.rank({"contextFeatures": [{"likes": likes}], "actions": actions,
                              "eventId": f"e{day}-{i}"})
        value = float(answer["rewardActionId"] == f"d{day}-{likes}")
        client.reward(f"e{day}-{i}", {"value": value})
        return value

    drained = None if api is None else lambda: serve_latest(api, trainer.store, "news")
    return article_days(step, trainer, days, drained=drained)


def test_rank_scores_new_articles_by_their_features(admin, client, trainer, api):
    policy = admin.update_policy({"name": "articles",
                                  "arguments": "--cb_explore_adf --kind adf --seed 4"})
    assert "--kind adf" in policy["arguments"]
    _days(client, trainer, range(8), api)
    first = _days(client, trainer, range(8, 12), api)
    assert sum(first) / len(first) >= 0.8, sum(first) / len(first)  # 0.2 for a uniform pick


def test_the_default_kind_serves_an_action_feature_candidate(client, trainer, api):
    _days(client, trainer, range(10), api)
    assert trainer.owned["news"].learner.serving == "adf"
    first = _days(client, trainer, range(10, 14), api)
    assert sum(first) / len(first) >= 0.8, sum(first) / len(first)


PERSONALIZER_DEFAULT = "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q ::"


def test_personalizers_default_learning_settings_are_vws_model(admin, client, trainer):
    """Personalizer's default policy (what its reset answered, what its portal exported) is
    taken as VW's model, Grove's ``adf`` with those settings: answered as sent (as Personalizer
    did; after a reset, Grove's default in Grove's terms), the exploration's 20 % in every
    ranking, the events learned."""
    policy = admin.update_policy({"name": "personalizer", "arguments": PERSONALIZER_DEFAULT})
    assert policy == {"name": "personalizer", "arguments": PERSONALIZER_DEFAULT}  # as sent
    assert admin.get_policy() == policy
    reset = admin.reset_policy()
    assert "--kind adf" not in reset["arguments"]
    applied = admin.update_policy({"name": "personalizer", "arguments": PERSONALIZER_DEFAULT})
    assert applied == policy
    assert admin.get_service_configuration()["explorationPercentage"] == 0.2
    _days(client, trainer, range(4))
    learner = trainer.owned["news"].learner
    assert (learner.power_t, learner.learning_rate, learner.cb_type, learner.interactions,
            learner.epsilon) == (0.0, 0.001, "mtr", ["::"], 0.2)
    assert learner.n_learned == 400
    actions = [{"id": a, "features": [{"topic": f["topic"]}]} for a, f in articles(9).items()]
    ranking = client.rank({"contextFeatures": [{"likes": "sport"}], "actions": actions})
    assert min(r["probability"] for r in ranking["ranking"]) >= 0.2 / 5 - 1e-9
