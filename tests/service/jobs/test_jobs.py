"""Batch jobs end to end against a real `grove serve` (API + trainer + embedded job worker) on
the session's redis-server: upload, progress, result, failures, cancel, access, a SIGKILLed
worker, the logged-events source and the `grove jobs` CLI.

One `grove serve` for the module (starting one costs seconds); it runs one worker, so the
jobs of these tests run one after another. The tests do not flush Redis (the fixtures that do
would pull the floor from under the running worker); jobs and apps have unique names.
"""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import numpy as np
import pandas as pd
import pytest

from service.jobs import keys as job_keys
from tests.helpers.factories import ADMIN, app_body
from tests.helpers.jobs import (
    LOST_AFTER,
    MAX_UPLOAD,
    RETENTION,
    _worker_pid,
    csv_bytes,
    follow,
    submit,
)
from tests.helpers.processes import REPO, wait_until

pytestmark = pytest.mark.slow

def synthetic(n: int = 160, d: int = 10, informative=(1, 4, 7), seed: int = 0) -> pd.DataFrame:
    """3 of d features carry the label."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = (X[:, list(informative)].sum(axis=1) > 0).astype(int)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(d)])
    frame["label"] = y
    return frame


def long_job(http, headers=ADMIN, **fields) -> str:
    """A job that runs for a minute or more unless stopped, reporting progress about every
    second (4000 simulations per recursion, a report every 200)."""
    params = {"target": "label", "nSimulations": 4000}
    answer = submit(http, csv_bytes(synthetic(n=300, d=30)), params, headers=headers, **fields)
    assert answer.status_code == 202, answer.text
    return answer.json()["id"]


def assert_a_small_job_runs(http) -> None:
    """A worker is there and runs jobs (after failures, kills, restarts)."""
    ok = submit(
        http,
        csv_bytes(synthetic(n=60, d=4, informative=(0,))),
        {"target": "label", "nSimulations": 20},
    )
    assert follow(http, ok.json()["id"])[0]["state"] == "done"


def test_upload_csv_watch_progress_and_fetch_the_result(grove):
    http, client, *_ = grove
    # long enough (a few seconds) to be seen running between two progress reports, which are
    # written at most five times a second
    answer = submit(http, csv_bytes(synthetic()), {"target": "label", "nSimulations": 20000})
    assert answer.status_code == 202, answer.text
    job = answer.json()
    assert job["state"] == "queued" and answer.headers["location"] == f"/jobs/{job['id']}"
    assert job["input"]["type"] == "upload" and job["input"]["format"] == "csv"

    final, seen = follow(http, job["id"])
    assert final["state"] == "done", final
    fractions = [j["progress"]["fraction"] for j in seen if j["state"] == "running"]
    assert fractions and any(0 < f < 1 for f in fractions), "no progress was reported"
    assert fractions == sorted(fractions)
    assert final["progress"]["fraction"] == 1.0

    result = final["result"]
    assert {"f1", "f4", "f7"} <= set(result["selectedFeatures"]) and result["nSelected"] <= 5
    assert result["nFeatures"] == 10 and result["rows"] == 160
    assert result["accuracySelected"] > result["accuracyAllFeatures"]
    assert result["fsr"] == pytest.approx(result["accuracySelected"] / result["nSelected"])  # eq. 4
    history = result["history"]
    assert history[0]["nInputFeatures"] == 10 and history[0]["recursion"] == 0
    assert all(
        set(h) == {"recursion", "nInputFeatures", "features", "accuracy", "accepted"}
        for h in history
    )

    t = final["timings"]
    assert t["createdAt"] <= t["startedAt"] <= t["finishedAt"] and t["runSeconds"] > 0
    # kept for the retention time, then gone; the uploaded bytes are deleted at once
    assert 0 < client.ttl(job_keys.record(job["id"])) <= RETENTION
    assert not client.exists(job_keys.data(job["id"]))
    listed = http.get("/jobs", headers=ADMIN).json()
    assert job["id"] in [j["id"] for j in listed] and "result" not in listed[0]


def test_parquet_upload(grove):
    http, *_ = grove
    buffer = io.BytesIO()
    synthetic(n=100, d=6, informative=(0, 3, 5)).to_parquet(buffer)
    answer = submit(
        http, buffer.getvalue(), {"target": "label", "n_simulations": 60}, filename="data.parquet"
    )
    assert answer.status_code == 202, answer.text
    final, _ = follow(http, answer.json()["id"])
    assert final["state"] == "done", final
    assert final["input"]["format"] == "parquet" and final["result"]["rows"] == 100


def test_bad_inputs_fail_with_a_message_and_the_worker_survives(grove):
    http, *_ = grove
    garbage = submit(http, b"a,b\n1,2,3,4\n\x00\xff\xfe", {"target": "a"})
    no_target = submit(http, csv_bytes(synthetic(n=40)), {"target": "nope"})
    one_class = submit(http, b"x,y\n1,0\n2,0\n3,0\n4,0\n5,0\n6,0\n7,0\n", {"target": "y"})
    for answer, words in [
        (garbage, "bad dataset: the CSV file cannot be read"),
        (no_target, "target column 'nope' is not in the data"),
        (one_class, "has 1 class"),
    ]:
        assert answer.status_code == 202, answer.text
        final, _ = follow(http, answer.json()["id"])
        assert final["state"] == "failed" and words in final["error"], final
        assert final["result"] is None
    # refused before queueing: wrong parameters, no file, an unknown kind
    wrong = submit(http, csv_bytes(synthetic(n=40)), {"target": "label", "nSimulations": 0})
    assert wrong.status_code == 422 and "nSimulations" in wrong.text
    unknown = submit(http, csv_bytes(synthetic(n=40)), {"target": "label", "k": 3})
    assert unknown.status_code == 422
    nofile = http.post(
        "/jobs/feature-selection", files={"data": ("x.csv", b"x\n1\n")}, headers=ADMIN
    )
    assert nofile.status_code == 422 and "'file'" in nofile.text
    form = http.post("/jobs/feature-selection", data={"params": "{}"}, headers=ADMIN)
    assert form.status_code == 415
    assert http.post("/jobs/no-such-kind", json={}, headers=ADMIN).status_code == 404
    too_big = submit(http, b"x" * (MAX_UPLOAD + 1), {"target": "x"})
    assert too_big.status_code == 413
    # the worker is still there
    assert_a_small_job_runs(http)


def test_cancel_a_queued_and_a_running_job(grove):
    http, client, *_ = grove
    running = long_job(http)
    follow(http, running, until=("running",))
    queued = long_job(http)  # the single worker is busy
    answer = http.delete(f"/jobs/{queued}", headers=ADMIN)
    assert answer.status_code == 200 and answer.json()["state"] == "cancelled"

    wait_until(
        lambda: http.get(f"/jobs/{running}", headers=ADMIN).json()["progress"]["fraction"] > 0
    )
    answer = http.delete(f"/jobs/{running}", headers=ADMIN)
    assert answer.status_code == 202 and answer.json()["cancelRequested"]
    final, _ = follow(http, running, timeout=15)
    assert final["state"] == "cancelled" and final["error"] is None
    assert http.delete(f"/jobs/{running}", headers=ADMIN).status_code == 200  # idempotent
    assert http.get(f"/jobs/{queued}", headers=ADMIN).json()["timings"]["startedAt"] is None
    assert not client.exists(job_keys.data(queued))


def test_a_sigkilled_worker_does_not_leave_its_job_running(grove):
    """Attempt 1 loses its worker: the job is requeued; attempt 2 loses its worker too: the job
    ends failed (job_max_attempts = 2). Each time the supervisor of `grove serve` restarts the
    worker, and the reaper (in the workers and in GET /jobs/{id}) notices within LOST_AFTER."""
    http, client, proc, log, env = grove
    job_id = long_job(http)
    for attempt in (1, 2):
        job = follow(http, job_id, until=("running",), timeout=60)[0]
        assert job["attempt"] == attempt
        pid = _worker_pid(client, env)
        os.kill(pid, signal.SIGKILL)
        started = time.monotonic()
        expected = ("queued", "running") if attempt == 1 else ("failed",)

        def lost(attempt=attempt):
            job = http.get(f"/jobs/{job_id}", headers=ADMIN).json()
            return job["attempt"] > attempt or job["state"] == "failed"

        wait_until(
            lost,
            proc,
            log,
            timeout=LOST_AFTER + 15,
            what=f"attempt {attempt} to be declared lost",
        )
        job = http.get(f"/jobs/{job_id}", headers=ADMIN).json()
        assert time.monotonic() - started < LOST_AFTER + 15
        assert job["state"] in expected, job
        wait_until(
            lambda p=pid: _worker_pid(client, env) not in (None, p),
            proc,
            log,
            timeout=60,
            what="the supervisor to restart the worker",
        )
    assert (
        job["error"].startswith("its worker stopped sending heartbeats") or "died" in job["error"]
    )
    assert "attempt 2 of 2" in job["error"]
    # the restarted worker runs jobs
    assert_a_small_job_runs(http)


def test_access_needs_the_admin_key_or_the_key_of_the_jobs_app(grove):
    http, *_ = grove
    name, other = f"jobs-{uuid.uuid4().hex[:6]}", f"other-{uuid.uuid4().hex[:6]}"
    keys = {}
    for app in (name, other):
        created = http.post("/apps", json=app_body(app), headers=ADMIN)
        assert created.status_code == 201, created.text
        keys[app] = {"Authorization": f"Bearer {created.json()['apiKey']}"}
    data, params = (
        csv_bytes(synthetic(n=40, d=3, informative=(0,))),
        {"target": "label", "nSimulations": 5},
    )
    mine = submit(http, data, params, headers=keys[name], app=name)
    assert mine.status_code == 202, mine.text
    job_id = mine.json()["id"]
    assert submit(http, data, params, headers=keys[other], app=name).status_code == 403
    wrong = {"Authorization": "Bearer not-a-key"}
    assert submit(http, data, params, headers=wrong, app=name).status_code == 401
    assert submit(http, data, params, headers=keys[name]).status_code == 403  # no app: admin's
    assert submit(http, data, params, headers={}).status_code == 401

    assert http.get(f"/jobs/{job_id}", headers=keys[name]).status_code == 200
    assert http.get(f"/jobs/{job_id}", headers=ADMIN).status_code == 200
    assert http.get(f"/jobs/{job_id}", headers=keys[other]).status_code == 403
    assert http.get(f"/jobs/{job_id}").status_code == 401
    assert http.get(f"/jobs/{job_id}", headers=wrong).status_code == 401
    assert http.delete(f"/jobs/{job_id}", headers=keys[other]).status_code == 403
    admin_only = submit(http, data, params)
    assert http.get(f"/jobs/{admin_only.json()['id']}", headers=keys[name]).status_code == 403

    listed = http.get("/jobs", params={"app": name}, headers=keys[name])
    assert listed.status_code == 200 and [j["id"] for j in listed.json()] == [job_id]
    assert [j["id"] for j in http.get("/jobs", headers=keys[name]).json()] == [job_id]
    assert http.get("/jobs", params={"app": name}, headers=keys[other]).status_code == 403
    assert http.get("/jobs", headers=wrong).status_code == 401
    assert http.get("/jobs/nothing-here", headers=ADMIN).status_code == 404
    assert http.get("/jobs/workers", headers=keys[name]).status_code == 403  # admin only
    workers = http.get("/jobs/workers", headers=ADMIN).json()
    assert len(workers) >= 1 and {"name", "pid", "state", "currentJob"} <= set(workers[0])
    follow(http, job_id)


def test_feature_selection_on_an_apps_logged_events(grove):
    """The job reads what the service logged (decision + reward), not a learner."""
    http, *_ = grove
    name = f"logged-{uuid.uuid4().hex[:6]}"
    created = http.post("/apps", json=app_body(name, actions=["a", "b"]), headers=ADMIN)
    key = {"Authorization": f"Bearer {created.json()['apiKey']}"}
    assert (
        http.post(
            "/jobs/feature-selection",
            json={"app": name, "last": 10, "params": {"target": "reward"}},
            headers=key,
        ).status_code
        == 422
    )  # nothing logged yet
    rng = np.random.default_rng(3)
    for _i in range(80):
        context = {
            "x": int(rng.integers(0, 2)),
            "noise": float(rng.normal()),
            "color": str(rng.choice(["red", "blue"])),
        }
        decided = http.post(f"/apps/{name}/decide", json={"context": context}, headers=key).json()
        reward = float(context["x"] == (decided["action"] == "a"))  # x picks the good action
        body = {"eventId": decided["eventId"], "reward": reward}
        assert http.post(f"/apps/{name}/reward", json=body, headers=key).status_code == 200
    body = {
        "app": name,
        "last": 60,
        "params": {
            "target": "reward",
            "nSimulations": 100,
            "features": ["x", "noise", "color", "action"],
        },
    }
    answer = http.post("/jobs/feature-selection", json=body, headers=key)
    assert answer.status_code == 202, answer.text
    assert answer.json()["input"] == {"type": "events", "app": name, "last": 60}
    final, _ = follow(http, answer.json()["id"], headers=key)
    assert final["state"] == "done", final
    result = final["result"]
    assert result["rows"] == 60
    assert {"x", "action"} <= set(result["selectedColumns"])
    assert "action=a" in result["selectedFeatures"] or "action=b" in result["selectedFeatures"]


def test_grove_jobs_cli_submits_and_shows_progress_and_result(grove, tmp_path):
    http, *_, env = grove
    path = tmp_path / "data.csv"
    synthetic(n=60, d=4, informative=(2,)).to_csv(path, index=False)
    cli_env = dict(env, GROVE_URL=str(http.base_url))
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "service.cli",
            "jobs",
            "submit",
            "feature-selection",
            "--file",
            str(path),
            "-p",
            "target=label",
            "-p",
            "nSimulations=30",
        ],
        cwd=REPO,
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    job_id, _, result = run.stdout.partition("\n")
    assert json.loads(result)["selectedFeatures"] == ["f2"]
    assert "done" in run.stderr and "100%" in run.stderr  # the tqdm bar
    again = subprocess.run(
        [sys.executable, "-m", "service.cli", "jobs", "result", job_id.strip()],
        cwd=REPO,
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert again.returncode == 0 and json.loads(again.stdout) == json.loads(result)


def test_a_job_process_killed_under_a_live_worker_is_requeued_at_once(grove):
    """The worker sees its work horse die (e.g. the OOM killer) and requeues the job without
    waiting for the heartbeat timeout."""
    http, client, proc, log, env = grove
    job_id = long_job(http)
    follow(http, job_id, until=("running",), timeout=60)
    worker = _worker_pid(client, env)
    horse = int(open(f"/proc/{worker}/task/{worker}/children").read().split()[0])
    os.kill(horse, signal.SIGKILL)
    started = time.monotonic()

    def requeued():  # attempt 2 may be running before a poll sees it queued
        job = http.get(f"/jobs/{job_id}", headers=ADMIN).json()
        return job if job["attempt"] == 2 else None

    job = wait_until(requeued, proc, log, timeout=LOST_AFTER, what="the job to be requeued")
    assert time.monotonic() - started < LOST_AFTER
    assert job["state"] in ("queued", "running")
    said = f"job {job_id}: the job's process died (signal 9); requeued as attempt 2"
    wait_until(lambda: said in log.read_text(), timeout=5, what="the worker's log line")
    follow(http, job_id, until=("running",), timeout=30)
    assert http.delete(f"/jobs/{job_id}", headers=ADMIN).status_code == 202
    assert follow(http, job_id, timeout=15)[0]["state"] == "cancelled"


def test_a_policy_change_retrains_on_the_log_and_the_api_starts_a_warm_start(grove):
    """Personalizer's policy route gives the app a new model and submits the ``warm-start`` job
    in which it learns the app's last two days (named by the ``Grove-Warm-Start-Job`` header);
    ``POST /jobs/warm-start`` with the app's key runs one natively, ``last`` bounding it."""
    http, *_ = grove
    name = f"warm-{uuid.uuid4().hex[:6]}"
    created = http.post("/apps", json=app_body(name, actions=["a", "b"]), headers=ADMIN)
    key = {"Authorization": f"Bearer {created.json()['apiKey']}"}
    for i in range(60):
        decided = http.post(f"/apps/{name}/decide", json={"context": {"x": i % 2}},
                            headers=key).json()
        body = {"eventId": decided["eventId"], "reward": float(decided["action"] == "a")}
        assert http.post(f"/apps/{name}/reward", json=body, headers=key).status_code == 200
    wait_until(lambda: http.get(f"/apps/{name}", headers=key).json()["eventsLearned"] == 60,
               timeout=60, what="the trainer")
    policy = {"name": "linucb", "arguments": "--cb_explore_adf --kind linucb"}
    personalizer = {"Ocp-Apim-Subscription-Key": created.json()["apiKey"]}
    changed = http.put("/personalizer/v1.0/configurations/policy", json=policy,
                       headers=personalizer)
    assert changed.status_code == 200 and changed.json()["name"] == "linucb"
    final, _ = follow(http, changed.headers["Grove-Warm-Start-Job"], headers=key)
    assert final["kind"] == "warm-start" and final["state"] == "done", final
    two_days = 2 * 24 * 3600 * 1000
    assert abs(final["params"]["since_ms"] - (time.time() * 1000 - two_days)) < 120_000
    assert final["result"]["installed"] and final["result"]["eventsLearned"] == 60, final
    wait_until(lambda: http.get(f"/apps/{name}", headers=key).json()["eventsLearned"] == 60,
               timeout=60, what="the replayed model served")
    same = http.put("/personalizer/v1.0/configurations/policy", json=policy,
                    headers=personalizer)  # the same settings: the model stays, no job
    assert same.status_code == 200 and "Grove-Warm-Start-Job" not in same.headers
    answer = http.post("/jobs/warm-start", json={"app": name, "last": 10, "params": {}},
                       headers=key)
    assert answer.status_code == 202, answer.text
    final, _ = follow(http, answer.json()["id"], headers=key)
    assert final["state"] == "done", final
    assert final["result"]["installed"] and final["result"]["eventsLearned"] == 10, final
