"""`grove replay`'s HTTP driver rides out a Redis that stops answering for a moment.

The API gives up on Redis after ``GROVE_REDIS_TIMEOUT`` and answers 503, while its write may
still be carried out when Redis answers again. The driver tries the request again: a decide
gets the decision recorded (the service answers a repeat of its eventId with it), a reward
found joined already is not an error; each event is learned once.
"""

from __future__ import annotations

import pytest

from service import keys
from service.api.main import create_app
from service.redis_client import connect
from service.replay.http import GroveClient, HttpForest
from tests.helpers.factories import ADMIN_KEY, make_settings
from tests.helpers.served import pausable_redis, pause, served


@pytest.fixture
def paused_redis(tmp_path):
    with pausable_redis(tmp_path) as server:
        yield server


def test_the_http_driver_repeats_a_decide_and_a_reward_answered_503(paused_redis):
    settings = make_settings(paused_redis.url, redis_timeout=0.3)
    redis = connect(settings)
    with served(create_app(settings)) as url:
        client = GroveClient(url)
        key = client.create_app(ADMIN_KEY, "replayed", {}, ["a", "b", "c"], (0.0, 1.0),
                                kind="linucb")
        forest = HttpForest("linucb", client, "replayed", key, logged=False, sync_every=0)
        context = {"x": 0.5}
        forest.learn(forest.decide(context, ["a", "b", "c"]), context, 1.0)  # caches warm
        pause(paused_redis, 2.0)  # the decide's write waits in the socket; the API answers 503
        choice = forest.decide(context, ["a", "b", "c"])
        record = redis.hgetall(keys.decision("replayed", choice.handle))
        assert record[b"action"].decode() == choice.action  # the decision recorded
        assert float(record[b"probability"]) == choice.probability
        pause(paused_redis, 2.0)  # and the reward's
        forest.learn(choice, context, 1.0)
        client.close()
    stats = redis.hgetall(keys.stats("replayed"))
    assert int(stats[b"decisions"]) == 2 and int(stats[b"rewarded"]) == 2
    assert redis.xlen(keys.stream("replayed")) == 2  # each event once
    redis.close()
