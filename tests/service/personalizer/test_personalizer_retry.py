"""The current SDK's retries against Grove: a rank whose answer was lost is answered again.

azure-core retries a POST answered 500, 503 or 504. When Redis is slow, the API gives up on
its write after ``GROVE_REDIS_TIMEOUT`` and answers 503, but the write was sent and Redis may
still run it: the SDK's retry then finds its eventId recorded. It gets the first answer (the
decision recorded, the one that will be learned), not a 409 the SDK would raise.
"""

from __future__ import annotations

import pytest
from azure.ai.personalizer import PersonalizerClient as Client
from azure.core.credentials import AzureKeyCredential

from service import keys
from service.redis_client import connect
from tests.helpers.factories import make_settings
from tests.helpers.served import pausable_redis, pause

ACTIONS = [{"id": f"article-{i}", "features": [{"topic": f"t{i}"}]} for i in range(8)]


@pytest.fixture
def paused_redis(tmp_path):
    with pausable_redis(tmp_path) as server:
        yield server


@pytest.fixture
def settings(paused_redis):
    return make_settings(paused_redis.url, redis_timeout=0.3)


def test_a_rank_the_sdk_retries_after_a_503_gets_the_decision_recorded(
    server, key, paused_redis, settings
):
    statuses: list[int] = []

    def seen(response) -> None:  # called on every attempt's answer (after the retry policy)
        statuses.append(response.http_response.status_code)

    body = {"contextFeatures": [{"user": "u1"}], "actions": ACTIONS, "eventId": "ev-1"}
    with Client(server, AzureKeyCredential(key), retry_backoff_factor=0.2) as sdk:
        sdk.rank({"actions": ACTIONS, "eventId": "warm"})  # the API's caches: app and model
        pause(paused_redis, 2.0)  # the rank's write waits in the socket
        answer = sdk.rank(body, raw_response_hook=seen)
    assert statuses[0] == 503 and statuses[-1] == 201, statuses
    client = connect(settings)
    record = client.hgetall(keys.decision("news", "ev-1"))
    client_stats = client.hgetall(keys.stats("news"))
    client.close()
    # the answer is the recorded decision: the action the client shows is the one learned
    assert record[b"action"].decode() == answer["rewardActionId"]
    ranked = {r["id"]: r["probability"] for r in answer["ranking"]}
    assert float(record[b"probability"]) == ranked[answer["rewardActionId"]]
    assert int(client_stats[b"decisions"]) == 2  # warm and ev-1, once


def test_a_multi_slot_rank_repeated_with_its_event_id_gets_its_first_answer(
    server, key, settings
):
    body = {
        "contextFeatures": [{"user": "u1"}],
        "actions": ACTIONS,
        "slots": [{"id": "main", "baselineAction": "article-0"},
                  {"id": "side", "baselineAction": "article-1"}],
        "eventId": "ms-1",
    }
    with Client(server, AzureKeyCredential(key), retry_total=0) as sdk:
        first = sdk.rank_multi_slot(body)
        for _ in range(8):  # fresh draws among 8 actions would differ
            assert sdk.rank_multi_slot(body) == first
        unnamed = sdk.rank_multi_slot({k: v for k, v in body.items() if k != "eventId"})
    client = connect(settings)
    decisions = int(client.hget(keys.stats("news"), "decisions"))
    kept = sorted(k.decode() for k in client.scan_iter(match=keys.answer("news", "*")))
    client.close()
    assert decisions == 4  # two slots, twice
    # the answers of the named event's slots are kept; Grove's own eventIds cannot be repeated
    assert len(kept) == 2 and all("ms-1" in k for k in kept), (kept, unnamed["eventId"])
