"""The ``pruning`` job end to end against a real `grove serve` (API + trainer + job worker), in
both modes, and the trainer's side of publishing a pruned forest.

Reuses the module-scoped `grove serve` of test_jobs.py (its ``grove`` fixture: one serve per
module here too) and its polling helper. The trainer test comes first: its fixtures flush Redis,
which must happen before this module's `grove serve` starts.
"""

from __future__ import annotations

import json
import time
import uuid

import numpy as np
import pandas as pd
import pytest

from service import keys
from service.store import Store
from tests.helpers.factories import ADMIN, app_body, drain, make_settings
from tests.helpers.jobs import csv_bytes, follow, submit
from tests.helpers.traffic import feed

pytestmark = pytest.mark.slow

K_LIVE = 3


def test_trainer_applies_a_tree_selection_and_rejects_a_stale_one(store, trainer, client):
    """The trainer side alone: the command key, select_trees, the snapshot published."""
    created = client.post(
        "/apps",
        json=app_body("pruned", policy={"kind": "bandit-forest",
                                         "params": {"n_trees": 5, "warmup": 5, "seed": 1}}),
        headers=ADMIN,
    )
    assert created.status_code == 201, created.text
    key = {"Authorization": f"Bearer {created.json()['apiKey']}"}
    for i in range(20):
        decided = client.post("/apps/pruned/decide", json={"context": {"x": i % 2}}, headers=key)
        body = {"eventId": decided.json()["eventId"], "reward": float(i % 2)}
        assert client.post("/apps/pruned/reward", json=body, headers=key).status_code == 200
    drain(trainer)
    version = store.snapshot_info("pruned").version
    assert trainer.owned["pruned"].learner.n_trees == 5

    store.request_tree_selection("pruned", [4, 1], 5, "r1")
    trainer.apply_tree_selections()
    command = store.tree_selection("pruned")
    assert command["status"] == "applied" and command["version"] == version + 1
    info, state = store.load_snapshot("pruned")
    assert info.version == version + 1 and state["params"]["n_trees"] == 2
    assert trainer.owned["pruned"].learner.n_trees == 2

    store.request_tree_selection("pruned", [0, 1, 2], 5, "r2")  # made on the 5-tree forest
    trainer.apply_tree_selections()
    command = store.tree_selection("pruned")
    assert command["status"] == "rejected" and "the forest has 2 trees" in command["reason"]
    assert store.snapshot_info("pruned").version == version + 1
    assert store.redis.exists(keys.tree_selection("pruned"))
    assert client.delete("/apps/pruned", headers=ADMIN).status_code == 204
    assert not store.redis.exists(keys.tree_selection("pruned"))


def labeled(n: int = 240, seed: int = 0) -> pd.DataFrame:
    """Three classes from two of six features, plus a text column."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(6)])
    frame["shape"] = rng.choice(["round", "square"], n)
    frame["label"] = np.where(X[:, 0] > 0.5, "hi", np.where(X[:, 2] > 0, "mid", "lo"))
    return frame


def submit_upload(http, frame: pd.DataFrame, params: dict, headers=ADMIN):
    return submit(http, csv_bytes(frame), params, headers, filename="data.csv", kind="pruning")


def test_labeled_upload_prunes_a_random_forest_and_compares_the_baselines(grove):  # noqa: F811
    http, *_ = grove
    params = {"target": "label", "nEstimators": 30, "k": 5, "ccpAlpha": 0.02, "c": 0.1}
    answer = submit_upload(http, labeled(), params)
    assert answer.status_code == 202, answer.text
    final, _ = follow(http, answer.json()["id"], timeout=60)
    assert final["state"] == "done", final
    result = final["result"]
    assert result["mode"] == "labeled" and result["k"] == 5
    assert result["rowsTrain"] + result["rowsTest"] == 240 and result["classes"] == 3
    assert result["forest"]["nTrees"] == 30 and result["forest"]["criterion"] == "entropy"
    methods = {m["method"]: m for m in result["methods"]}
    assert set(methods) == {"all", "random", "kappa", "reduce_error", "boosting", "mepsi"}
    assert methods["all"]["nTrees"] == 30
    for name in ("random", "kappa", "reduce_error", "boosting", "mepsi"):
        m = methods[name]
        assert m["nTrees"] == 5 and len(set(m["trees"])) == 5, m
        assert 0 <= m["testAccuracy"] <= 1 and m["seconds"] >= 0
    # an easy problem: the kept trees do far better than chance, as does the whole forest
    assert methods["mepsi"]["testAccuracy"] > 0.6 and methods["all"]["testAccuracy"] > 0.6
    history = result["mepsi"]["objectiveHistory"]
    assert len(history) == 4 and history == sorted(history, reverse=True)  # Algorithm 1 descends
    assert result["bestMethod"] in methods and result["pruneOn"] == "train"


def test_unpruned_forest_pruned_on_out_of_bag_rows(grove):  # noqa: F811
    http, *_ = grove
    params = {"target": "label", "nEstimators": 20, "k": 5, "ccpAlpha": 0, "pruneOn": "oob"}
    answer = submit_upload(http, labeled(), params)
    assert answer.status_code == 202, answer.text
    final, _ = follow(http, answer.json()["id"], timeout=60)
    assert final["state"] == "done", final
    result = final["result"]
    assert result["pruneOn"] == "oob" and "out-of-bag" in result["validation"]
    methods = {m["method"]: m for m in result["methods"]}
    # unpruned trees fit their training rows: all 5 kept trees' vote is perfect there, so only
    # the out-of-bag rows could tell them apart; test accuracy stays near the whole forest's
    assert methods["mepsi"]["trainAccuracy"] == 1.0
    assert methods["mepsi"]["testAccuracy"] > methods["all"]["testAccuracy"] - 0.1


def _learned(http, name: str, key: dict, n: int) -> int:
    """Wait until the trainer has published a snapshot with ``n`` events; its version."""
    final = None
    for _ in range(300):
        final = http.get(f"/apps/{name}", headers=key).json()
        if final["eventsLearned"] >= n:
            return final["modelVersion"]
        time.sleep(0.05)
    raise AssertionError(f"the trainer did not learn {n} events: {final}")


@pytest.fixture(scope="module")
def live_app(grove):  # noqa: F811
    """A Bandit Forest app (10 shallow trees, quick to finish exploring) with 300 events."""
    http, *_ = grove
    name = f"prune-{uuid.uuid4().hex[:6]}"
    params = {"n_trees": 10, "warmup": 20, "seed": 3, "max_depth": [1, 2], "epsilon": 0.8,
              "delta": 0.5}
    forest = {"kind": "bandit-forest", "params": params}
    created = http.post(
        "/apps", json=app_body(name, policy=forest, actions=["a", "b"]), headers=ADMIN
    )
    assert created.status_code == 201, created.text
    key = {"Authorization": f"Bearer {created.json()['apiKey']}"}
    feed(http, name, key, 300, seed=1)
    _learned(http, name, key, 300)
    return name, key


def _snapshot_trees(client, name: str) -> int:
    store = Store(client, make_settings("redis://unused"))
    _, state = store.load_snapshot(name, serving=True)
    return int(state["params"]["n_trees"])


def test_live_app_forest_is_pruned_published_and_still_decides(grove, live_app):  # noqa: F811
    http, client, *_ = grove
    name, key = live_app
    before = http.get(f"/apps/{name}", headers=key).json()["modelVersion"]
    body = {"app": name, "last": 300, "params": {"k": K_LIVE, "tolerance": 1.0}}
    answer = http.post("/jobs/pruning", json=body, headers=key)
    assert answer.status_code == 202, answer.text
    final, _ = follow(http, answer.json()["id"], headers=key, timeout=60)
    assert final["state"] == "done", json.dumps(final)
    result = final["result"]
    assert result["mode"] == "live" and result["nTrees"] == 10 and result["k"] == K_LIVE
    assert len(set(result["selectedTrees"])) == K_LIVE
    assert result["eventsPruning"] + result["eventsValidation"] == 300
    assert 0 <= result["agreement"]["mepsi"] <= 1 and result["exploring"] == "wrong"
    assert 0 < result["treeVotes"] < 1  # some paths vote, some still explore
    value = result["value"]
    assert value["withinTolerance"] and 0 <= value["full"]["value"] <= 1
    assert result["latency"]["full"]["meanMicroseconds"] > 0 and result["latency"]["speedup"] > 0
    publication = result["publication"]
    assert publication["status"] == "applied", publication
    assert publication["modelVersion"] > before

    # the served model is the pruned forest, it answers decide, and the trainer learns on
    assert _snapshot_trees(client, name) == K_LIVE
    command = Store(client, make_settings("redis://unused")).tree_selection(name)
    assert command["status"] == "applied" and command["trees"] == result["selectedTrees"]
    # the API loads new snapshots in the background; GET /apps/{app} waits until this process
    # serves the version it reports
    assert http.get(f"/apps/{name}", headers=key).json()["modelVersion"] >= publication[
        "modelVersion"
    ]
    decided = http.post(f"/apps/{name}/decide", json={"context": {"x": 1}}, headers=key)
    assert decided.status_code == 200 and decided.json()["action"] in ("a", "b")
    assert decided.json()["modelVersion"] >= publication["modelVersion"]
    feed(http, name, key, 30, seed=2)
    _learned(http, name, key, 330)
    assert _snapshot_trees(client, name) == K_LIVE

    # a second pruning of the now 3-tree forest to 3 is refused: k must be below the size
    body = {"app": name, "last": 100, "params": {"k": K_LIVE}}
    again = follow(http, http.post("/jobs/pruning", json=body, headers=key).json()["id"],
                   headers=key)[0]
    assert again["state"] == "failed" and "must be below the app's forest size" in again["error"]


def test_live_check_without_publishing_leaves_the_model_alone(grove):  # noqa: F811
    http, *_ = grove
    name = f"noprune-{uuid.uuid4().hex[:6]}"
    forest = {"kind": "bandit-forest", "params": {"n_trees": 6, "warmup": 20, "seed": 4}}
    created = http.post(
        "/apps", json=app_body(name, policy=forest, actions=["a", "b"]), headers=ADMIN
    )
    key = {"Authorization": f"Bearer {created.json()['apiKey']}"}
    feed(http, name, key, 120, seed=5)
    version = _learned(http, name, key, 120)
    # a young forest: every path still explores, so no tree votes by decide's rule
    body = {"app": name, "last": 120, "params": {"k": 2}}
    final = follow(http, http.post("/jobs/pruning", json=body, headers=key).json()["id"],
                   headers=key, timeout=60)[0]
    assert final["state"] == "failed" and "exploring='greedy'" in final["error"], final
    body = {"app": name, "last": 120, "params": {"k": 2, "publish": False, "exploring": "greedy"}}
    final = follow(http, http.post("/jobs/pruning", json=body, headers=key).json()["id"],
                   headers=key, timeout=60)[0]
    assert final["state"] == "done", final
    assert final["result"]["publication"]["status"] == "skipped"
    assert final["result"]["treeVotes"] == 1.0
    assert http.get(f"/apps/{name}", headers=key).json()["modelVersion"] == version


def test_bad_parameters_are_refused_or_fail_with_a_message(grove, live_app):  # noqa: F811
    http, *_ = grove
    name, key = live_app
    k_one = submit_upload(http, labeled(40), {"target": "label", "k": 1})
    assert k_one.status_code == 422 and "k" in k_one.text
    unknown = submit_upload(http, labeled(40), {"target": "label", "trees": 3})
    assert unknown.status_code == 422
    failing = [
        (submit_upload(http, labeled(40), {"k": 3, "nEstimators": 10}), "needs 'target'"),
        (
            submit_upload(http, labeled(40), {"target": "label", "k": 20, "nEstimators": 10}),
            "exceeds the forest's n_estimators",
        ),
        (
            submit_upload(
                http, labeled(40), {"target": "label", "pruneOn": "oob", "vote": "hard"}
            ),
            "needs vote='soft'",
        ),
        (
            http.post(
                "/jobs/pruning",
                json={"app": name, "last": 50, "params": {"k": 2, "target": "reward"}},
                headers=key,
            ),
            "do not apply to pruning an app's logged events",
        ),
    ]
    for answer, words in failing:
        assert answer.status_code == 202, answer.text
        final = follow(http, answer.json()["id"])[0]
        assert final["state"] == "failed" and words in final["error"], final
