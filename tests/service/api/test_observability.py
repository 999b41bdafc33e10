"""/metrics (decisions, rewards, default rewards, errors by status, latencies, trainer lag and
rate, snapshot size and age) and structured logs carrying the eventId."""

import json
import logging
import re

from service.logs import JsonFormatter
from tests.helpers.factories import create, drain


def metric(text: str, name: str, **labels) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = rf"^{re.escape(name)}{{{re.escape(wanted)}}} (\S+)$" if labels else rf"^{name} (\S+)$"
    found = re.search(pattern, text, re.MULTILINE)
    assert found, f"{name}{{{wanted}}} not in /metrics"
    return float(found.group(1))


def test_metrics_cover_the_online_loop(client, trainer, store):
    shop = create(client, "shop", rewardWaitTime=2.0)
    ids = []
    for i in range(6):
        d = client.post("/apps/shop/decide", json={"context": {"x": i}}, headers=shop).json()
        ids.append(d["eventId"])
    for event_id in ids[:4]:
        client.post("/apps/shop/reward", json={"eventId": event_id, "reward": 1}, headers=shop)
    client.post("/apps/shop/reward", json={"eventId": "nope", "reward": 1}, headers=shop)  # 404
    client.post("/apps/shop/decide", content="{", headers=shop)  # 422
    text = client.get("/metrics").text
    assert metric(text, "grove_app_decisions_total", app="shop") == 6
    assert metric(text, "grove_app_rewards_total", app="shop") == 4
    assert metric(text, "grove_app_trainer_lag", app="shop") == 4
    assert metric(text, "grove_http_errors_total", status="404") == 1
    assert metric(text, "grove_http_errors_total", status="422") == 1
    assert metric(text, "grove_operation_seconds_count", operation="decide") == 6
    assert metric(text, "grove_operation_seconds_count", operation="reward") == 4
    assert metric(text, "grove_app_snapshot_bytes", app="shop", part="serving") > 0
    assert metric(text, "grove_app_snapshot_age_seconds", app="shop") >= 0

    import time

    time.sleep(2.1)  # the two unrewarded decisions pass their wait time
    drain(trainer)
    text = client.get("/metrics").text
    assert metric(text, "grove_app_default_rewards_total", app="shop") == 2
    assert metric(text, "grove_app_events_learned_total", app="shop") == 6
    assert metric(text, "grove_app_trainer_lag", app="shop") == 0
    assert metric(text, "grove_app_trainer_events_per_second", app="shop") > 0


def test_event_lines_are_json_with_the_event_id(client, caplog):
    shop = create(client, "shop")
    with caplog.at_level(logging.INFO, logger="grove.events"):
        for _ in range(2):  # a client's retry: answered again, logged as a repeat
            d = client.post(
                "/apps/shop/decide", json={"eventId": "ev-7", "context": {}}, headers=shop
            ).json()
        client.post("/apps/shop/reward", json={"eventId": "ev-7", "reward": 0.5}, headers=shop)
    lines = [json.loads(JsonFormatter().format(r)) for r in caplog.records]
    decide, repeated, reward = (line for line in lines if line["logger"] == "grove.events")
    assert repeated["message"] == "decide-repeated" and repeated["action"] == d["action"]
    assert decide["message"] == "decide" and decide["eventId"] == "ev-7"
    assert decide["app"] == "shop" and decide["action"] == d["action"]
    assert reward["message"] == "reward" and reward["eventId"] == "ev-7"
    assert reward["reward"] == 0.5 and reward["level"] == "INFO"
