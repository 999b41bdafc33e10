"""An auto app end to end against a real `grove serve` (API + trainer in their own process):
Bandit Forest serves first, LinUCB learns the same events, the evaluations switch the app to
LinUCB, which then serves the five-action problem well."""

from __future__ import annotations

import random
import signal
import time

import httpx
import pytest

from service.redis_server import free_port
from tests.helpers.factories import ADMIN
from tests.helpers.processes import service_env, spawn, wait_until

pytestmark = pytest.mark.slow

ACTIONS = [f"a{i}" for i in range(5)]


@pytest.fixture
def grove(redis_url, tmp_path):
    """A `grove serve` on the fixtures' redis-server; an HTTP client on its base URL."""
    log, port = tmp_path / "serve.log", free_port()
    proc = spawn(["-m", "service.cli", "serve", "--port", str(port)], service_env(redis_url), log)
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    def ready():
        try:
            return http.get("/readyz").status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(ready, proc, log, timeout=60, what="grove serve to be ready")
    yield http, proc, log
    http.close()
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _play(http: httpx.Client, headers: dict, n: int, rng: random.Random) -> float:
    """``n`` rounds: a batch of decisions, then one reward each (1 for the favourite)."""
    requests = [{"context": {"favorite": rng.choice(ACTIONS),
                             "device": rng.choice(["pc", "phone", "tablet"])}} for _ in range(n)]
    answer = http.post("/apps/ads/decide/batch", json={"requests": requests}, headers=headers)
    assert answer.status_code == 200, answer.text
    earned = 0.0
    for request, decision in zip(requests, answer.json()["responses"], strict=True):
        reward = float(decision["action"] == request["context"]["favorite"])
        earned += reward
        answer = http.post("/apps/ads/reward", headers=headers,
                           json={"eventId": decision["eventId"], "reward": reward})
        assert answer.status_code == 200, answer.text
    return earned / n


def test_an_auto_app_switches_from_bandit_forest_to_linucb_and_serves_well(grove):
    http, proc, log = grove
    started = time.monotonic()
    policy = {"kind": "auto", "params": {"candidates": [{"kind": "bandit-forest"},
                                                        {"kind": "linucb"}], "seed": 11}}
    answer = http.post("/apps", headers=ADMIN, json={"name": "ads", "actions": ACTIONS,
                                                     "rewardWaitTime": 600, "policy": policy})
    assert answer.status_code == 201, answer.text
    headers = {"Authorization": f"Bearer {answer.json()['apiKey']}"}
    rng = random.Random(1)
    figures = http.get("/apps/ads/evaluations", headers=headers).json()
    assert figures["serving"] == "bandit-forest"
    played = 0
    while figures["serving"] == "bandit-forest":
        assert played < 6000, (played, figures, log.read_text()[-2000:])
        _play(http, headers, 250, rng)
        played += 250
        # the trainer learns what was rewarded and publishes (snapshot interval 0.2 s)
        wait_until(lambda n=played: http.get("/apps/ads", headers=headers).json()["eventsLearned"]
                   >= n, proc, log, timeout=30, what="the trainer to learn")
        time.sleep(0.3)
        figures = http.get("/apps/ads/evaluations", headers=headers).json()
    [switch] = figures["switches"]
    assert (switch["from"], switch["to"]) == ("bandit-forest", "linucb")
    assert set(switch["estimates"]) == {"bandit-forest", "linucb"}
    assert switch["estimates"]["linucb"]["lower"] > switch["estimates"]["bandit-forest"]["upper"]
    metrics = http.get("/metrics").text
    assert 'grove_app_policy_switches_total{app="ads"} 1.0' in metrics
    served = _play(http, headers, 500, rng)
    assert served >= 0.85, (served, figures)
    print(f"switched at event {switch['at']} of {played} played; LinUCB then served {served:.3f}")
    assert time.monotonic() - started < 90
