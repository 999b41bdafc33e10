"""The ``rule-distillation`` job end to end against a real `grove serve` (API + trainer + job
worker), in both modes: an uploaded events file whose teacher score is a simple rule, and a
live Bandit Forest app whose policy the rules explain.

Reuses the module-scoped `grove serve` of test_jobs.py (its ``grove`` fixture: one serve per
module) and its polling helper. RuDi runs with tiny K, D, R and epochs to stay fast.
"""

from __future__ import annotations

import time
import uuid

import numpy as np
import pandas as pd
import pytest

from service.models import model_kind
from service.store import Store
from tests.helpers.factories import ADMIN, app_body, make_settings
from tests.helpers.jobs import csv_bytes, follow, submit
from tests.helpers.traffic import feed

pytestmark = pytest.mark.slow

TINY = {"K": 2, "D": 2, "R": 2, "H": 2, "nSimulations": 60, "epochs": 40, "randomState": 0}


def events(n: int = 200, seed: int = 0) -> pd.DataFrame:
    """Users with 1-6 events; the teacher scores 1 a user with 3 or more 'buy' events."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 7, n)
    m = int(lengths.sum())
    frame = pd.DataFrame(
        {
            "user": np.repeat([f"u{i}" for i in range(n)], lengths),
            "time": rng.integers(0, 10_000, m),
            "kind": rng.choice(["buy", "view"], m, p=[0.4, 0.6]),
            "amount": rng.integers(1, 50, m).astype(float),
        }
    )
    buys = (frame["kind"] == "buy").groupby(frame["user"]).sum()
    teacher = (buys >= 3).astype(float)
    frame["score"] = frame["user"].map(teacher)
    # the score on every row of the user, the label on its first row only (both are accepted)
    frame["label"] = frame["user"].map(teacher.astype(int)).where(~frame["user"].duplicated())
    return frame


def submit_upload(http, frame: pd.DataFrame, params: dict, headers=ADMIN):
    return submit(
        http, csv_bytes(frame), params, headers, filename="events.csv", kind="rule-distillation"
    )


def test_upload_finds_the_teachers_statistic_and_rule(grove):  # noqa: F811
    http, *_ = grove
    frame = events()
    params = {"entity": "user", "order": "time", "scores": "score", "labels": "label", **TINY}
    answer = submit_upload(http, frame, params)
    assert answer.status_code == 202, answer.text
    final, seen = follow(http, answer.json()["id"], timeout=60)
    assert final["state"] == "done", final
    fractions = [j["progress"]["fraction"] for j in seen if j["state"] == "running"]
    assert fractions == sorted(fractions)

    result = final["result"]
    assert result["mode"] == "upload" and result["entities"] == 200
    assert result["rows"] == len(frame) and result["entitiesFitted"] == 160
    # the score and label columns are not features, the order column neither
    assert result["features"] == {"numerical": ["amount"], "categorical": ["kind"]}
    names = [s["name"] for s in result["statistics"]]
    assert len(names) == 2 and "Sum(Select kind)" in names, names
    assert all(0 <= s["correlation"] <= 1 for s in result["statistics"])
    assert result["multipleCorrelation"] >= max(s["correlation"] for s in result["statistics"])
    # the rules read the teacher's rule: Sum(Select kind=buy) > 2, and rank as it does
    top = result["rules"][0]
    assert "Sum(Select kind=buy)" in top["rule"] and 0 < top["support"] < 1, result["rules"]
    assert top["nLiterals"] >= 1 and top["rule"] in result["rulesText"]
    assert result["fidelity"] > 0.95 and result["auc"] > 0.95
    held = result["heldOut"]
    assert held["entities"] == 40 and held["fidelity"] > 0.9 and held["auc"] > 0.9
    t = result["timings"]
    assert t["fitSeconds"] > 0 and t["totalSeconds"] >= t["fitSeconds"]


def _learned(http, name: str, key: dict, n: int) -> None:
    for _ in range(300):
        if http.get(f"/apps/{name}", headers=key).json()["eventsLearned"] >= n:
            return
        time.sleep(0.05)
    raise AssertionError(f"the trainer did not learn {n} events")


def _p_a(client, name: str) -> tuple[float, float]:
    """P('a') of the app's current snapshot where x == 1 and where x == 0."""
    _, state = Store(client, make_settings("redis://unused")).load_snapshot(name)
    forest = model_kind("bandit-forest").load(state)
    return tuple(forest.decide({"x": x, "color": "red"}).probabilities["a"] for x in (1, 0))


@pytest.fixture(scope="module")
def live_app(grove):  # noqa: F811
    """A Bandit Forest app that has learned (in rounds of 100 events) to prefer 'a' where
    x == 1: (name, key, events logged)."""
    http, client, *_ = grove
    name = f"rudi-{uuid.uuid4().hex[:6]}"
    # stumps that finish fast (depth 1, a loose delta and epsilon): within a few hundred events
    # the forest votes 'a' where x == 1 (with the defaults it still explores everywhere)
    params = {"n_trees": 10, "warmup": 20, "seed": 3, "max_depth": 1, "delta": 0.5, "epsilon": 0.9}
    forest = {"kind": "bandit-forest", "params": params}
    created = http.post(
        "/apps", json=app_body(name, policy=forest, actions=["a", "b"]), headers=ADMIN
    )
    assert created.status_code == 201, created.text
    key = {"Authorization": f"Bearer {created.json()['apiKey']}"}
    n = 0
    while n < 800:
        feed(http, name, key, 100, seed=n)
        n += 100
        _learned(http, name, key, n)
        where_1, where_0 = _p_a(client, name)
        if n >= 300 and where_1 > where_0:
            return name, key, n
    raise AssertionError(f"after {n} events the forest does not prefer 'a' where x == 1")


def test_live_app_rules_explain_when_the_forest_chooses_an_action(grove, live_app):  # noqa: F811
    http, *_ = grove
    name, key, n = live_app
    body = {"app": name, "last": n, "params": {"action": "a", **TINY}}
    answer = http.post("/jobs/rule-distillation", json=body, headers=key)
    assert answer.status_code == 202, answer.text
    final, _ = follow(http, answer.json()["id"], headers=key, timeout=60)
    assert final["state"] == "done", final
    result = final["result"]
    assert result["mode"] == "live" and result["app"] == name and result["action"] == "a"
    assert result["events"] == n and result["entities"] == n
    assert result["policyKind"] == "bandit-forest" and result["modelVersion"] >= 1
    teacher = result["teacher"]
    assert 0 <= teacher["min"] < teacher["max"] <= 1
    assert set(result["features"]["numerical"] + result["features"]["categorical"]) == {
        "x",
        "color",
    }
    # a sequence of length one: the statistics are the context's own values; x decides
    assert any("x" in s["name"] for s in result["statistics"]), result["statistics"]
    assert result["rules"] and "x" in result["rules"][0]["rule"], result["rules"]
    assert result["fidelity"] > 0.6 and result["auc"] is None
    assert 0 <= result["heldOut"]["fidelity"] <= 1


def test_bad_parameters_are_refused_or_fail_with_a_message(grove, live_app):  # noqa: F811
    http, *_ = grove
    name, key, _ = live_app
    small = events(30)
    base = {"entity": "user", "scores": "score", **TINY}
    for params in (
        {**base, "R": 3},
        {**base, "K": 0},
        {**base, "rules": 4},
        {**base, "lr": [0.1, 0]},
    ):
        refused = submit_upload(http, small, params)
        assert refused.status_code == 422, (params, refused.text)
    varying = small.assign(score=np.arange(len(small), dtype=float))
    live = "/jobs/rule-distillation"
    failing = [
        (submit_upload(http, small, {"entity": "user", **TINY}), "needs 'entity'"),
        (submit_upload(http, small, {**base, "scores": "nope"}), "scores column 'nope' is not"),
        (submit_upload(http, varying, base), "must hold one value per entity"),
        (submit_upload(http, small.assign(score=1.0), base), "nothing to explain"),
        (submit_upload(http, small, {**base, "features": ["score"]}), "cannot be features"),
        (
            submit_upload(http, small.assign(label=2), {**base, "labels": "label"}),
            "must hold 0/1 values",
        ),
        (
            http.post(live, json={"app": name, "last": 50, "params": TINY}, headers=key),
            "needs 'action'",
        ),
        (
            http.post(
                live,
                json={"app": name, "last": 50, "params": {"action": "zz", **TINY}},
                headers=key,
            ),
            "is not an action of app",
        ),
        (
            http.post(
                live,
                json={"app": name, "last": 50, "params": {"action": "a", "entity": "x"}},
                headers=key,
            ),
            "do not apply to rule-distillation of an app's logged events",
        ),
    ]
    for answer, words in failing:
        assert answer.status_code == 202, answer.text
        final = follow(http, answer.json()["id"], headers=ADMIN)[0]
        assert final["state"] == "failed" and words in final["error"], (words, final)
