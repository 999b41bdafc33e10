"""Personalizer's evaluations and feature importances through ``azure-ai-personalizer``: the
jobs run on a real ``grove worker`` process (rq) against the fixtures' redis-server."""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from azure.core.exceptions import HttpResponseError, ResourceNotFoundError

from service import keys
from tests.helpers.factories import ADMIN
from tests.helpers.processes import service_env, spawn, stop_all, wait_until

ACTIONS = [{"id": f"a{i}", "features": [{"arm": f"a{i}"}]} for i in range(3)]


@pytest.fixture
def worker(redis_url, tmp_path):
    """A ``grove worker`` process on the test Redis (the API's default job queue)."""
    log = tmp_path / "worker.log"
    proc = spawn(["-m", "service.cli", "worker"], service_env(redis_url), log)
    time.sleep(0.5)
    assert proc.poll() is None, log.read_text()
    yield log
    stop_all([proc])


def _play(sdk, n: int, seed: int = 3) -> None:
    """``n`` rank/reward events: the reward is 1 when the action is the context's favourite."""
    rng = random.Random(seed)
    for i in range(n):
        favourite = f"a{rng.randrange(3)}"
        context = [{"user": {"favorite": favourite}}, {"noise": rng.randrange(4)}]
        answer = sdk.rank({"contextFeatures": context, "actions": ACTIONS, "eventId": f"p{i}"})
        sdk.reward(f"p{i}", {"value": float(answer["rewardActionId"] == favourite)})


def _window() -> dict:
    now = datetime.now(UTC)
    return {"startTime": (now - timedelta(hours=1)).isoformat(),
            "endTime": (now + timedelta(hours=1)).isoformat()}


def _until_done(read, worker_log, timeout: float = 120.0) -> dict:
    def finished():
        record = read()
        return record if record["status"] in ("Succeeded", "Failed", "Canceled") else None

    record = wait_until(finished, timeout=timeout, what="the job")
    assert record["status"] == "Succeeded", (record, worker_log.read_text()[-3000:])
    return record


@pytest.mark.slow
def test_evaluation_create_get_list_apply_delete(admin, client, worker, store, server):  # noqa: F811
    _play(client, 400)
    window = _window()
    admin.create_evaluation(
        "ev-1",
        {"name": "first", **window, "enablePolicyOptimization": True,
         "policies": [{"name": "forest-3", "arguments": "--kind bandit-forest --seed 3"},
                      # Personalizer's own default: VW's model, the kind adf
                      {"name": "personalizer", "arguments": "--cb_explore_adf --epsilon 0.2 "
                       "--power_t 0 -l 0.001 --cb_type mtr -q ::"},
                      # the SDKs' own sample (azure-sdk-for-net's evaluation test)
                      {"name": "Custom Policy 1", "arguments": "--cb_explore_adf --epsilon 0.2 "
                       "--dsjson --cb_type ips -l 0.5 --l1 1E-07 --power_t 0.5"}]},
    )
    with pytest.raises(HttpResponseError) as twice:
        admin.create_evaluation("ev-1", {"name": "again", **window})
    assert twice.value.error.code == "EvaluationAlreadyExists"
    start = datetime.now(UTC) - timedelta(hours=1)
    end = datetime.now(UTC) + timedelta(hours=1)
    record = _until_done(
        lambda: admin.get_evaluation("ev-1", start_time=start, end_time=end), worker
    )
    values = {p["name"]: p for p in record["content"]["value"]}
    assert {"Online", "Random", "forest-3", "bandit-forest", "personalizer"} <= set(values)
    assert 0.0 < values["personalizer"]["summary"]["expectedReward"] < 1.0
    # (a policy that learns: its IPS estimate may pass 1 on 400 events, and its band may be
    # inverted, the best value it had bounded from below, the worst from above; the summary's
    # interval is ordered and holds the estimate all the same, the band is in the estimates)
    custom = values["Custom Policy 1"]
    assert custom["summary"]["expectedReward"] > 0.0
    assert all(0.0 <= end for end in custom["summary"]["confidenceInterval"])
    assert all(0.0 <= custom["estimates"]["ips"][end] <= 1.0 for end in ("low", "high"))
    for value in values.values():
        low, high = value["summary"]["confidenceInterval"]
        assert low <= value["summary"]["expectedReward"] <= high, value["name"]
        assert low <= min(value["estimates"]["ips"]["low"], value["estimates"]["ips"]["high"])
        assert high >= max(value["estimates"]["ips"]["low"], value["estimates"]["ips"]["high"])
    assert values["Online"]["policySource"] == "Online"
    low, high = values["Random"]["summary"]["confidenceInterval"]
    assert low <= values["Random"]["summary"]["expectedReward"] <= high
    assert 0.2 < values["Random"]["summary"]["expectedReward"] < 0.5  # 1 in 3 is the favourite
    assert values["Online"]["timeseries"]["data"][-1]["expectedReward"] == pytest.approx(
        values["Online"]["summary"]["expectedReward"]
    )
    assert [e["id"] for e in admin.list_evaluations()] == ["ev-1"]
    admin.apply_from_evaluation({"evaluationId": "ev-1", "policyName": "forest-3"})
    policy = admin.get_policy()
    assert policy["name"] == "forest-3" and "--seed 3" in policy["arguments"]
    assert admin.get_evaluation("ev-1", start_time=start, end_time=end)["status"] == (
        "OptimalPolicyApplied"
    )
    # its model learns the app's log in a warm-start job (here no trainer ever published a
    # model, so there is nothing up to the served offset to learn: the job says so)
    stored = store.redis.hget(keys.personalizer_records("news", "evaluations"), "ev-1")
    job = json.loads(stored)["warmStartJobId"]

    def finished():
        answer = httpx.get(f"{server}/jobs/{job}", headers=ADMIN).json()
        return answer if answer["state"] in ("done", "failed", "cancelled") else None

    done = wait_until(finished, timeout=120, what="the warm start")
    assert done["kind"] == "warm-start" and done["state"] == "done", done
    assert done["result"]["installed"] is False and "no logged event" in done["result"]["reason"]
    with pytest.raises(ResourceNotFoundError):
        admin.apply_from_evaluation({"evaluationId": "ev-1", "policyName": "nope"})
    admin.delete_evaluation("ev-1")
    with pytest.raises(ResourceNotFoundError) as gone:
        admin.get_evaluation("ev-1", start_time=start, end_time=end)
    assert gone.value.error.code == "EvaluationNotFound"
    with pytest.raises(HttpResponseError) as bad:
        admin.create_evaluation(
            "ev-2", {"name": "vw", **window, "policies": [{"name": "bag", "arguments": "--bag 5"}]}
        )
    assert bad.value.status_code == 400 and bad.value.error.code == "InvalidPolicyConfiguration"


@pytest.mark.slow
def test_v1_evaluation_and_an_empty_window(server, key, client, worker):  # noqa: F811
    _play(client, 50)
    headers = {"Ocp-Apim-Subscription-Key": key}
    body = {"name": "v1", **_window(), "policies": []}
    created = httpx.post(server + "/personalizer/v1.0/evaluations", json=body, headers=headers)
    assert created.status_code == 201, created.text
    location = created.headers["location"]
    assert location.endswith("/personalizer/evaluations/" + created.json()["id"])
    listed = httpx.get(server + "/personalizer/v1.0/evaluations", headers=headers).json()
    assert isinstance(listed, list) and listed[0]["name"] == "v1"  # v1.0: a bare array
    past = {"name": "old", "startTime": "2001-01-01T00:00:00Z", "endTime": "2001-01-02T00:00:00Z"}
    httpx.put(server + "/personalizer/evaluations/empty?api-version=2022-09-01-preview",
              json=past, headers=headers).raise_for_status()

    def read():
        return httpx.get(server + "/personalizer/evaluations/empty", headers=headers).json()

    record = wait_until(lambda: read() if read()["status"] == "Failed" else None, timeout=120)
    assert "no logs exist in the date range" in record["description"].lower()


@pytest.mark.slow
def test_feature_importances(admin, client, worker):  # noqa: F811
    _play(client, 400)
    admin.create_feature_importance("fi-1", {"name": "why", **_window()})
    record = _until_done(lambda: admin.get_feature_importance("fi-1"), worker)
    scores = record["featureScores"]
    assert (scores[0]["namespace"], scores[0]["featureName"]) == ("user", "favorite")
    assert scores[0]["score"] > 0.8 and sum(s["score"] for s in scores) == pytest.approx(1.0)
    assert [f["id"] for f in admin.list_feature_importances()] == ["fi-1"]
    admin.delete_feature_importance("fi-1")
    with pytest.raises(ResourceNotFoundError):
        admin.get_feature_importance("fi-1")
