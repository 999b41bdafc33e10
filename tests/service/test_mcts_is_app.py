"""Apps of kind ``mcts-is``: predict / learn / interactions through the API, the stream, the
trainer and the snapshots, with the real MCTSInteractions; plus one run against `grove serve`."""

from __future__ import annotations

import random
import signal

import httpx
import pytest

from service import codec, keys
from service.redis_server import free_port
from service.trainer import Trainer
from tests.helpers.factories import ADMIN, create, drain, make_settings
from tests.helpers.processes import service_env, spawn, wait_until

#: a small lambda screens out the noise field quickly (as in MCTSInteractions' doctest)
MCTS = {"kind": "mcts-is", "params": {"seed": 1, "lambda_": 0.2}}


def xor_events(n: int, seed: int = 0) -> list[tuple[dict, int]]:
    """y = a XOR b; c is noise."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x = {"a": rng.choice("01"), "b": rng.choice("01"), "c": rng.choice("012")}
        out.append((x, int(x["a"] != x["b"])))
    return out


def create_mcts(client, name: str = "ctr") -> dict:
    answer = client.post("/apps", json={"name": name, "policy": MCTS}, headers=ADMIN)
    assert answer.status_code == 201, answer.text
    assert answer.json()["actions"] == [] and answer.json()["policy"]["kind"] == "mcts-is"
    return {"Authorization": f"Bearer {answer.json()['apiKey']}"}


def learn_all(client, headers: dict, events: list[tuple[dict, int]], app: str = "ctr") -> None:
    for x, y in events:
        answer = client.post(f"/apps/{app}/learn", json={"x": x, "y": y}, headers=headers)
        assert answer.status_code == 202, answer.text
        assert answer.json()["state"] == "queued"


def check_xor_model(client, headers: dict, app: str = "ctr") -> None:
    """The served model predicts the XOR and names the (a, b) interaction."""
    for x, y in [({"a": "0", "b": "1", "c": "0"}, 1), ({"a": "1", "b": "1", "c": "2"}, 0)]:
        answer = client.post(f"/apps/{app}/predict", json={"x": x}, headers=headers)
        assert answer.status_code == 200, answer.text
        p = answer.json()
        assert p["modelVersion"] >= 1
        assert (p["probability"] > 0.9) if y else (p["probability"] < 0.1), p
        # the leaves x falls in: conjunctions that hold both XOR fields, with x's values
        used = [set(leaf.split(" & ")) for leaf in p["interactions"]]
        assert any({f"a={x['a']}", f"b={x['b']}"} <= terms for terms in used), p
        assert {t["root"] for t in p["trees"]} == {"a", "b", "c"}
        assert all(0 <= t["mean"] <= 1 and t["weight"] >= 0 for t in p["trees"])
    answer = client.get(f"/apps/{app}/interactions", params={"top": 4}, headers=headers)
    assert answer.status_code == 200, answer.text
    found = answer.json()
    assert 1 <= len(found["interactions"]) <= 4 and found["modelVersion"] >= 1
    top = found["interactions"][0]
    assert set(top["terms"]) == {"a", "b"}, top
    assert top["mean"] == (1.0 if top["terms"]["a"] != top["terms"]["b"] else 0.0)
    assert top["pValue"] < 0.05 and top["chi2"] > 0 and 0 < top["support"] < 1
    assert {t["root"] for t in found["trees"]} == {"a", "b", "c"}
    tree_a = next(t for t in found["trees"] if t["root"] == "a")
    assert sorted(tree_a["leaves"]) == ["a=0 & b=0", "a=0 & b=1", "a=1 & b=0", "a=1 & b=1"]
    assert tree_a["nLeaves"] == 4
    capped = client.get(f"/apps/{app}/interactions", params={"maxLeaves": 1}, headers=headers)
    tree_a = next(t for t in capped.json()["trees"] if t["root"] == "a")
    assert len(tree_a["leaves"]) == 1 and tree_a["nLeaves"] == 4


def test_learn_xor_through_the_trainer_then_predict_and_list_interactions(client, trainer, store):
    headers = create_mcts(client)
    before = client.post("/apps/ctr/predict", json={"x": {"a": "0"}}, headers=headers).json()
    assert before == {"probability": 0.5, "interactions": [], "trees": [], "modelVersion": 0}
    events = xor_events(300)
    learn_all(client, headers, events)
    status = client.get("/apps/ctr", headers=headers).json()
    assert status["stats"]["labeled"] == 300 and status["trainerLag"] == 300
    assert store.redis.xlen(keys.stream("ctr")) == 300
    drain(trainer)
    status = client.get("/apps/ctr", headers=headers).json()
    assert status["eventsLearned"] == 300 and status["eventsRejected"] == 0
    assert status["trainerLag"] == 0 and status["modelVersion"] >= 1
    check_xor_model(client, headers)
    leaves = client.get("/apps/ctr/interactions", params={"leavesOnly": True}, headers=headers)
    assert leaves.status_code == 200 and all(i["leaf"] for i in leaves.json()["interactions"])
    # API processes load the serving copy (no search statistics): it answers as the full state
    _, served = store.load_snapshot("ctr", serving=True)
    _, full = store.load_snapshot("ctr")
    assert served["statistics"] is False and full["statistics"] is True
    assert len(served["fdt"]["data_nodes"]["V"]) < len(full["fdt"]["data_nodes"]["V"])


def test_labeled_events_are_learned_exactly_once_across_a_trainer_crash(client, redis_url, store):
    """Trainer A learns without publishing and loses its lease; B resumes from the snapshot."""
    headers = create_mcts(client)
    events = xor_events(120, seed=3)
    learn_all(client, headers, events[:50])
    lazy = make_settings(redis_url, snapshot_interval=3600, snapshot_events=10**6)
    first, second = Trainer(store.redis, lazy, "a"), Trainer(store.redis, lazy, "b")
    drain(first)  # publishes the 50
    learn_all(client, headers, events[50:])
    first.refresh_leases()
    while first.step():  # learns the other 70, never publishes them
        pass
    assert first.owned["ctr"].events_learned == 120
    store.redis.delete(keys.lease("ctr"))  # A is dead: its lease expired
    drain(second)
    info, state = store.load_snapshot("ctr")
    assert info.events_learned == 120 and info.events_rejected == 0
    assert state["n_learned"] == 120  # the learner itself saw each event once
    assert info.offset == store.redis.xrevrange(keys.stream("ctr"), count=1)[0][0].decode()


def test_kind_mismatches_are_422_with_a_message(client):
    ctr = create_mcts(client)
    shop = create(client, "shop")
    decide = client.post(
        "/apps/ctr/decide", json={"context": {"a": "0"}, "actions": ["x"]}, headers=ctr
    )
    assert decide.status_code == 422 and "/apps/ctr/predict" in decide.json()["detail"]
    for method, path, body in [
        ("POST", "/apps/shop/predict", {"x": {"a": "0"}}),
        ("POST", "/apps/shop/learn", {"x": {"a": "0"}, "y": 1}),
        ("GET", "/apps/shop/interactions", None),
    ]:
        answer = client.request(method, path, json=body, headers=shop)
        assert answer.status_code == 422, answer.text
        detail = answer.json()["detail"]
        assert "'bandit-forest' app" in detail and "'mcts-is'" in detail, detail
        assert "POST /apps/shop/decide" in detail, detail
    with_actions = client.post(
        "/apps", json={"name": "bad", "policy": MCTS, "actions": ["a"]}, headers=ADMIN
    )
    assert with_actions.status_code == 422 and "takes no actions" in with_actions.text
    unknown = {"kind": "mcts-is", "params": {"depth": 3}}
    bad = client.post("/apps", json={"name": "bad", "policy": unknown}, headers=ADMIN)
    assert bad.status_code == 422 and "invalid policy params" in bad.json()["detail"]


def test_bad_bodies_are_422(client, store):
    headers = create_mcts(client)
    for body in [
        {"x": {"a": "0"}, "y": 2},
        {"x": {"a": "0"}, "y": 0.5},
        {"x": {"a": "0"}, "y": "1"},
        {"x": {"a": "0"}, "y": True},
        {"x": {"a": "0"}},
        {"y": 1},
        {"x": {"a": {"nested": 1}}, "y": 1},
        {"x": {"a": [1]}, "y": 1},
        {"x": {"a": "0"}, "y": 1, "eventId": "bad id!"},
        {"x": {"a": "0"}, "y": 1, "extra": 1},
        {"x": "a=0", "y": 1},
    ]:
        answer = client.post("/apps/ctr/learn", json=body, headers=headers)
        assert answer.status_code == 422, (body, answer.text)
        assert answer.json()["detail"]
    nan = client.post(
        "/apps/ctr/learn",
        content='{"x": {"a": NaN}, "y": 1}',
        headers={**headers, "Content-Type": "application/json"},
    )
    assert nan.status_code == 422
    for body in [{}, {"x": {"a": {"b": 1}}}, {"x": {"a": "0"}, "y": 1}]:
        answer = client.post("/apps/ctr/predict", json=body, headers=headers)
        assert answer.status_code == 422, (body, answer.text)
    too_many = {"x": {f"f{i}": 1 for i in range(2000)}, "y": 1}
    answer = client.post("/apps/ctr/learn", json=too_many, headers=headers)
    assert answer.status_code == 422 and "GROVE_MAX_FEATURES" in answer.json()["detail"]
    for params in [
        {"top": 0},
        {"alpha": 0},
        {"alpha": 2},
        {"leavesOnly": "maybe"},
        {"maxLeaves": -1},
    ]:
        answer = client.get("/apps/ctr/interactions", params=params, headers=headers)
        assert answer.status_code == 422, (params, answer.text)
    assert store.redis.xlen(keys.stream("ctr")) == 0  # nothing refused was queued
    given = client.post(
        "/apps/ctr/learn", json={"x": {}, "y": 0, "eventId": "e-1"}, headers=headers
    )
    assert given.status_code == 202 and given.json()["eventId"] == "e-1"
    # a client's retry is learned once: its eventId is remembered for the rewardWaitTime
    again = client.post(
        "/apps/ctr/learn", json={"x": {}, "y": 1, "eventId": "e-1"}, headers=headers
    )
    assert again.status_code == 409 and "e-1" in again.json()["detail"]
    ((_, fields),) = store.redis.xrange(keys.stream("ctr"))
    assert fields[b"label"] == b"0" and fields[b"source"] == b"label"
    assert codec.unpack(fields[b"context"]) == {}
    assert 0 < store.redis.pttl(keys.label("ctr", "e-1")) <= 600_000
    for _ in range(2):  # ids Grove makes are not remembered (nothing to retry with)
        assert client.post("/apps/ctr/learn", json={"x": {}, "y": 1},
                           headers=headers).status_code == 202
    assert store.redis.xlen(keys.stream("ctr")) == 3
    assert len(store.redis.keys(keys.label("ctr", "*"))) == 1


def test_keys_another_apps_key_is_403_a_wrong_or_missing_key_401(client):
    ctr = create_mcts(client)
    other = create_mcts(client, "other")
    wrong = {"Authorization": "Bearer grove_not-a-key"}
    calls = [
        ("POST", "/apps/ctr/predict", {"x": {"a": "0"}}),
        ("POST", "/apps/ctr/learn", {"x": {"a": "0"}, "y": 1}),
        ("GET", "/apps/ctr/interactions", None),
    ]
    for method, path, body in calls:
        assert client.request(method, path, json=body, headers=other).status_code == 403
        assert client.request(method, path, json=body, headers=wrong).status_code == 401
        assert client.request(method, path, json=body).status_code == 401
        for headers in (ctr, ADMIN):
            assert client.request(method, path, json=body, headers=headers).status_code in (
                200,
                202,
            )
    missing = client.post("/apps/nope/predict", json={"x": {}}, headers=ADMIN)
    assert missing.status_code == 404


@pytest.mark.slow
def test_end_to_end_against_grove_serve(redis_server, tmp_path):
    """A real `grove serve` (API + trainer processes): learn over HTTP, wait for the snapshot."""
    log = tmp_path / "serve.log"
    port = free_port()
    env = service_env(redis_server.url, GROVE_JOB_QUEUE="test-mcts-is-unused")
    proc = spawn(["-m", "service.cli", "serve", "--port", str(port)], env, log)
    http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10)
    try:

        def healthy():
            try:
                return http.get("/healthz").status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(healthy, proc, log, timeout=60, what="grove serve")
        http.delete("/apps/ctr-e2e", headers=ADMIN)  # left over by an earlier run, if any
        headers = create_mcts(http, "ctr-e2e")
        learn_all(http, headers, xor_events(400, seed=5), app="ctr-e2e")

        def learned():
            status = http.get("/apps/ctr-e2e", headers=headers).json()
            return status["eventsLearned"] == 400 and status["trainerLag"] == 0

        wait_until(learned, proc, log, timeout=30, what="the trainer's snapshot of 400 events")
        check_xor_model(http, headers, app="ctr-e2e")
        assert http.delete("/apps/ctr-e2e", headers=ADMIN).status_code == 204
    finally:
        http.close()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(40)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()



def test_decide_without_actions_and_patch_actions_name_the_kind(client):
    """Decide on an mcts-is app says what the app serves; PATCH cannot give it actions."""
    key = create_mcts(client, "ctr-kind")
    r = client.post("/apps/ctr-kind/decide", headers=key, json={"context": {"a": "x"}})
    assert r.status_code == 422 and "mcts-is" in r.json()["detail"], r.text
    r = client.patch("/apps/ctr-kind", headers=ADMIN, json={"actions": ["a1"]})
    assert r.status_code == 422 and "no actions" in r.json()["detail"], r.text


def test_real_criteo_records_through_the_api(client, trainer, store):
    """The Criteo sample (../shared/data, 200 rows) as an ad server would send it: integer
    counts, hashed strings, null for a missing count; learned through the stream and the
    trainer, then predicted on held-out records whose hashed ids are mostly unseen."""
    import math

    import pandas as pd

    from tests.helpers.shared_data import shared_file

    frame = pd.read_csv(shared_file("criteo_sample.csv.gz"))
    labels = frame.pop("label").tolist()
    records = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
               for r in frame.to_dict("records")]
    headers = create_mcts(client)
    learn_all(client, headers, list(zip(records[:150], labels[:150])))
    drain(trainer)
    status = client.get("/apps/ctr", headers=headers).json()
    assert status["eventsLearned"] == 150 and status["eventsRejected"] == 0
    for x in records[150:]:
        answer = client.post("/apps/ctr/predict", json={"x": x}, headers=headers)
        assert answer.status_code == 200, answer.text
        assert 0.0 <= answer.json()["probability"] <= 1.0
        assert len(answer.json()["trees"]) == len(x)
    found = client.get("/apps/ctr/interactions", params={"top": 5}, headers=headers).json()
    assert found["interactions"] and all(set(i["terms"]) <= set(frame.columns)
                                         for i in found["interactions"])
