"""Job records on a real redis-server: every transition checks state and attempt, the reaper
requeues then fails a lost job, and the inputs a job reads (tables, logged events)."""

from __future__ import annotations

import io
import json
import zlib

import numpy as np
import pandas as pd
import pytest

from service import codec, keys
from service.jobs import keys as job_keys
from service.jobs.dataset import Dataset, DatasetError, read_events, read_table
from service.jobs.feature_selection import FeatureSelectionParams, _encode, run
from service.jobs.progress import JobCancelled, JobLost, Reporter
from service.jobs.queue import JobQueue
from service.jobs.records import JobState
from service.redis_client import connect_jobs
from tests.helpers.factories import make_settings


@pytest.fixture
def jobs(redis_url):
    settings = make_settings(redis_url, job_retention=60.0, job_max_attempts=2)
    client = connect_jobs(settings)
    yield JobQueue(client, settings)
    client.close()


def new_job(jobs: JobQueue, data: bytes = b"x,y\n1,0\n") -> str:
    return jobs.submit(
        "feature-selection", {"target": "y"}, {"type": "upload", "format": "csv"}, data=data
    )


def test_submit_queues_the_record_the_bytes_and_one_rq_message(jobs):
    job_id = new_job(jobs)
    record = jobs.get(job_id)
    assert record.state.value == "queued" and record.attempt == 1 and record.max_attempts == 2
    assert jobs.store.data(job_id) == b"x,y\n1,0\n"
    assert jobs.queue.job_ids == [f"{job_id}-1"]
    rq_job = jobs.queue.fetch_job(f"{job_id}-1")
    assert rq_job.func_name == "service.jobs.worker.execute" and rq_job.args == [job_id, 1]
    raw = zlib.decompress(jobs.store.redis.hget(rq_job.key, "data"))
    assert json.loads(raw)[2] == [job_id, 1]  # JSONSerializer: (func, instance, args, kwargs)


def test_transitions_check_state_and_attempt(jobs):
    job_id = new_job(jobs)
    store = jobs.store
    assert store.start(job_id, 2, "w") == "queued"  # not this attempt
    assert store.start(job_id, 1, "w") == "running"
    assert store.start(job_id, 1, "w") == "running" and jobs.get(job_id).worker == "w"
    assert store.progress(job_id, 2, 0.5, "x") == "lost"
    assert store.progress(job_id, 1, 0.25, "a quarter") == "ok"
    assert jobs.get(job_id).fraction == 0.25 and jobs.get(job_id).message == "a quarter"
    assert store.finish(job_id, 2, JobState.done, "done") == "running"
    assert store.finish(job_id, 1, JobState.done, "done", result={"a": [1, 2]}) == "done"
    record = jobs.get(job_id)
    assert record.state is JobState.done and record.result == {"a": [1, 2]}
    assert record.fraction == 1.0 and record.finished_at >= record.started_at
    assert 0 < store.redis.ttl(job_keys.record(job_id)) <= 60
    assert store.data(job_id) is None
    assert store.finish(job_id, 1, JobState.failed, "failed", "late") == "done"  # once only
    assert jobs.cancel(job_id) == "done"


def test_cancel_queued_at_once_running_at_the_next_report(jobs):
    queued, running = new_job(jobs), new_job(jobs)
    assert jobs.cancel(queued) == "cancelled" and jobs.get(queued).state.value == "cancelled"
    assert jobs.store.start(queued, 1, "w") == "cancelled"  # its rq message does nothing
    jobs.store.start(running, 1, "w")
    report = Reporter(jobs.store, running, 1, min_interval=0.0)
    report(0.1, "working")
    assert jobs.cancel(running) == "cancelling" and jobs.get(running).state.value == "running"
    with pytest.raises(JobCancelled):
        report(0.2, "still working")
    with pytest.raises(JobLost):
        Reporter(jobs.store, running, 7)(0.3, "an old attempt")
    assert jobs.cancel("no-such-job") == "gone"


def test_a_lost_job_is_requeued_then_failed(jobs):
    job_id = new_job(jobs)
    jobs.store.start(job_id, 1, "w")
    assert jobs.reap(job_id) == "alive"  # fresh heartbeat
    assert jobs.reap(job_id, "worker gone", lost_after=0) == "retry"
    record = jobs.get(job_id, reap=False)
    assert record.state.value == "queued" and record.attempt == 2
    assert "requeued: worker gone" in record.message
    assert f"{job_id}-2" in jobs.queue.job_ids
    assert jobs.store.start(job_id, 1, "late") == "queued"  # attempt 1 may not come back
    assert jobs.store.start(job_id, 2, "w2") == "running"
    assert jobs.reap(job_id, "died", attempt=1, lost_after=0) == "alive"  # not that attempt
    assert jobs.reap(job_id, "process died", attempt=2, lost_after=0) == "failed"
    record = jobs.get(job_id)
    assert record.state.value == "failed" and record.error == "process died (attempt 2 of 2)"
    jobs.reap_all()
    assert job_id not in jobs.store.active_ids()


def test_a_lost_job_with_a_pending_cancel_ends_cancelled(jobs):
    job_id = new_job(jobs)
    jobs.store.start(job_id, 1, "w")
    jobs.cancel(job_id)
    assert jobs.reap(job_id, lost_after=0) == "cancelled"


def test_listing_is_newest_first_and_forgets_expired_jobs(jobs):
    first, second = new_job(jobs), new_job(jobs)
    assert [r.id for r in jobs.store.list()][:2] == [second, first]
    jobs.store.redis.delete(job_keys.record(first))  # as if it expired
    assert [r.id for r in jobs.store.list()] == [second]
    assert jobs.store.redis.zscore(job_keys.JOBS, first) is None


def test_read_table_says_what_is_wrong():
    frame = read_table(b"a,b\n1,x\n2,y\n", "csv")
    assert list(frame.columns) == ["a", "b"] and len(frame) == 2
    buffer = io.BytesIO()
    frame.to_parquet(buffer)
    assert read_table(buffer.getvalue(), "parquet").equals(frame)
    for data, fmt, words in [
        (b"", "csv", "empty"),
        (b"\xff\xfe\x00", "csv", "cannot be read"),
        (b"a,b\n", "csv", "no rows"),
        (b"not parquet", "parquet", "PARQUET file cannot be read"),
        (b"a\n1\n", "xlsx", "unknown dataset format"),
    ]:
        with pytest.raises(DatasetError, match=words):
            read_table(data, fmt)


def test_logged_events_become_rows(redis_client):
    stream = keys.stream("shop")
    for i in range(5):
        redis_client.xadd(
            stream,
            {
                "eventId": f"e{i}",
                "context": codec.pack({"x": i, "action": "clash"}),
                "action": "a" if i % 2 else "b",
                "probability": "0.5",
                "reward": str(i % 2),
                "source": "reward",
                "modelVersion": "1",
                "decidedAt": "0",
            },
        )
    frame = read_events(redis_client, "shop", last=3)
    assert list(frame["x"]) == [2, 3, 4]  # the newest 3, oldest first
    assert list(frame.columns) == ["x", "context.action", "action", "reward", "probability"]
    assert list(frame["reward"]) == [0.0, 1.0, 0.0]
    with pytest.raises(DatasetError, match="no logged events"):
        read_events(redis_client, "empty", last=3)


def test_integers_past_int64_beside_negative_ones_stay_numbers(redis_client):
    # pandas keeps 2**64 - 1 beside -1 as objects: the job read them as text, one category each
    for i, big in enumerate([2**64 - 1, -1, 7, -(2**63)]):
        redis_client.xadd(keys.stream("big"), {
            "eventId": f"e{i}", "context": codec.pack({"n": big, "zip": "02139"}), "action": "a",
            "probability": "1", "reward": "0", "source": "reward", "modelVersion": "1",
            "decidedAt": "0"})
    frame = read_events(redis_client, "big", last=4)
    assert frame["n"].dtype == np.float64
    assert frame["n"].tolist() == [2.0**64, -1.0, 7.0, -(2.0**63)]
    assert frame["zip"].dtype != np.float64  # a string in a context stays a category
    encoded, names, _ = _encode(frame, ["n", "zip"])
    assert names == ["n", "zip=02139"] and encoded[:, 0].tolist() == frame["n"].tolist()


def test_feature_selection_encodes_text_and_missing_values():
    rng = np.random.default_rng(0)
    n = 120
    color = rng.choice(["red", "blue", "green"], n)
    frame = pd.DataFrame(
        {
            "color": color,
            "noise": rng.normal(size=n),
            "gap": np.where(rng.random(n) < 0.2, np.nan, rng.normal(size=n)),
            "label": (color == "red").astype(int),
        }
    )
    reports = []
    result = run(
        FeatureSelectionParams(target="label", n_simulations=60),
        Dataset(frame),
        lambda f, m: reports.append(f),
    )
    assert result["selectedColumns"] == ["color"] and "color=red" in result["selectedFeatures"]
    assert result["nFeatures"] == 5 and result["accuracySelected"] == 1.0
    assert reports[0] == 0.0 and reports[-1] == 1.0
    with pytest.raises(DatasetError, match="continuous"):
        run(FeatureSelectionParams(target="noise", n_simulations=5), Dataset(frame), print)
    with pytest.raises(DatasetError, match="not in the data"):
        run(FeatureSelectionParams(target="label", features=["nope"]), Dataset(frame), print)
