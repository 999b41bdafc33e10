"""``grove worker``: an rq worker for Grove's jobs, and what it runs for one attempt.

Each attempt runs in rq's forked work horse (an exception, a crash or a leak stays in the
horse; the worker takes the next job). The horse dies with its worker (``PR_SET_PDEATHSIG``),
so a killed worker leaves no orphan computing a job that has been requeued elsewhere. Between
jobs, and while it watches a horse, the worker reaps lost jobs of every worker.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import os
import signal
import time
import traceback

import pandas as pd
import redis
from pydantic import ValidationError
from rq import Worker
from rq.serializers import JSONSerializer
from rq.timeouts import JobTimeoutException
from rq.utils import now as rq_now

from service.jobs.dataset import Dataset, DatasetError, read_events, read_table
from service.jobs.kinds import KINDS, job_kind
from service.jobs.progress import Heartbeat, JobCancelled, JobLost, Reporter
from service.jobs.queue import JobQueue, rq_queue
from service.jobs.records import JobState
from service.jobs.store import JobStore
from service.redis_client import connect, connect_jobs
from service.settings import Settings, get_settings
from service.store import Store

log = logging.getLogger("grove.jobs")

#: seconds between rq's own maintenance chores (rq's default maintenance interval)
RQ_CHORES_INTERVAL = 600.0


def _die_with_parent(parent: int) -> None:
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the worker died before prctl took effect
        os._exit(1)


def _load(store: JobStore, record, settings: Settings, apps, reads_stream: bool) -> Dataset:
    """The job's dataset; ``apps`` is the client of the apps' Redis (the job queue may have its
    own Redis, :func:`service.redis_client.connect_jobs`). ``reads_stream``: the kind reads the
    app's events itself (no frame)."""
    source = record.source
    if source.get("type") == "app" or (reads_stream and source.get("type") == "events"):
        frame = pd.DataFrame()  # the kind reads the app's data itself (dataset.store)
    elif source.get("type") == "events":
        frame = read_events(apps, source["app"], int(source["last"]))
    else:
        data = store.data(record.id)
        if data is None:
            raise DatasetError("the uploaded dataset is no longer stored (expired)")
        frame = read_table(data, source.get("format", "csv"))
    app_store = Store(apps, settings) if record.app else None
    return Dataset(frame=frame, app=record.app, source=source, store=app_store)


def _json_safe(value):
    """Results must be JSON: NaN / infinities become None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy array or scalar
        return _json_safe(value.tolist())
    return value


def _run(store: JobStore, job_id: str, attempt: int, settings: Settings, apps):
    """(state, message, error, result) of one attempt."""
    record = store.get(job_id)
    if record is None:
        raise JobLost(f"job {job_id} is gone")
    report = Reporter(store, job_id, attempt)
    try:
        kind = job_kind(record.kind)
        params = kind.params.model_validate(record.params)
        report(0.0, "reading the dataset")
        dataset = _load(store, record, settings, apps, kind.reads_stream)
        result = kind.run(params, dataset, report)
        if not isinstance(result, dict):
            raise TypeError(f"job kind {kind.name!r} returned {type(result).__name__}, not dict")
        result = _json_safe(result)
        json.dumps(result, allow_nan=False)  # TypeError here, not when the result is stored
        return JobState.done, "done", "", result
    except (JobCancelled, JobLost):
        raise
    except ValidationError as exc:
        return JobState.failed, "failed", f"invalid parameters: {exc}", None
    except DatasetError as exc:
        return JobState.failed, "failed", f"bad dataset: {exc}", None
    except JobTimeoutException as exc:  # rq's alarm: the job's timeout was set at submission
        return JobState.failed, "failed", f"timed out: {exc} (GROVE_JOB_TIMEOUT)", None
    except (ValueError, KeyError) as exc:  # what the algorithms raise for unfit input
        return JobState.failed, "failed", f"{type(exc).__name__}: {exc}", None
    except Exception as exc:
        log.error("job %s failed:\n%s", job_id, traceback.format_exc())
        return JobState.failed, "failed", f"{type(exc).__name__}: {exc}", None


def _retry(call, *args):
    """Redis may be restarting: a job's start and its result are worth a few seconds."""
    for wait in (0.5, 1.0, 2.0, 4.0):
        try:
            return call(*args)
        except redis.RedisError as exc:
            log.warning("%s of job %s failed (%s); retrying", call.__name__, args[0], exc)
            time.sleep(wait)
    return call(*args)  # a record left running is reaped; one left queued stays queued


def execute(job_id: str, attempt: int) -> str:
    """rq entry point: run attempt ``attempt`` of Grove job ``job_id`` (in the work horse)."""
    settings = get_settings()
    client = connect_jobs(settings)
    apps = connect(settings) if settings.job_redis_url else client
    store = JobStore(client, settings)
    try:
        state = _retry(store.start, job_id, attempt, os.environ.get("RQ_WORKER_ID", "?"))
        if state != JobState.running.value:
            log.info("job %s attempt %s not started: the job is %s", job_id, attempt, state)
            return state
        beat = Heartbeat(store, job_id, attempt, settings.job_heartbeat).start()
        try:
            outcome = _run(store, job_id, attempt, settings, apps)
        except JobCancelled:
            outcome = (JobState.cancelled, "cancelled while running", "", None)
        except JobLost as exc:
            log.warning("%s; stopping", exc)
            return "lost"
        finally:
            beat.stop()
        return _retry(store.finish, job_id, attempt, *outcome)
    finally:
        client.close()
        if apps is not client:
            apps.close()


class GroveWorker(Worker):
    """rq's forking worker plus Grove's reaper and horse-dies-with-worker."""

    def __init__(self, *args, jobs: JobQueue, **kwargs):
        super().__init__(*args, **kwargs)
        self.jobs = jobs
        self._last_reap = 0.0
        self._last_rq_chores = -math.inf

    def main_work_horse(self, job, queue):
        _die_with_parent(os.getppid())
        super().main_work_horse(job, queue)

    def reap(self) -> None:
        if time.monotonic() - self._last_reap < self.jobs.settings.job_heartbeat:
            return
        self._last_reap = time.monotonic()
        try:
            self.jobs.reap_all()
        except redis.RedisError as exc:
            self.log.warning("reaping lost jobs failed: %s", exc)

    def run_maintenance_tasks(self):
        # rq's chores (registry cleaning, logged at INFO) keep rq's own pace; the worker wakes
        # every job_heartbeat seconds (maintenance_interval) only to reap lost Grove jobs
        if time.monotonic() - self._last_rq_chores >= RQ_CHORES_INTERVAL:
            self._last_rq_chores = time.monotonic()
            super().run_maintenance_tasks()
        else:
            self.last_cleaned_at = rq_now()  # what rq's chores set: next wake-up in an interval
        self.reap()

    def maintain_heartbeats(self, job, *args):
        # rq calls this every job_monitoring_interval while the horse runs (rq 3 passes the
        # execution too). The worker also refreshes the Grove heartbeat of the attempt: the
        # horse's own heartbeat thread stalls while a compiled kernel is built or runs without
        # releasing the GIL, and the horse is alive as long as this process is (it dies with
        # it; a dead horse is reaped by handle_work_horse_killed, a stuck one by rq's timeout).
        super().maintain_heartbeats(job, *args)
        job_id, attempt = job.args
        try:
            self.jobs.store.progress(job_id, attempt, None, "")
        except redis.RedisError as exc:
            self.log.warning("job %s: heartbeat failed (%s)", job_id, exc)
        self.reap()

    def handle_work_horse_killed(self, job, retpid, ret_val, rusage):
        super().handle_work_horse_killed(job, retpid, ret_val, rusage)
        how = f"signal {os.WTERMSIG(ret_val)}" if ret_val and os.WIFSIGNALED(ret_val) else ret_val
        job_id, attempt = job.args
        self.jobs.reap(job_id, f"the job's process died ({how})", attempt=attempt, lost_after=0)


def run_worker(settings: Settings, name: str | None = None) -> None:
    """Work until SIGTERM / SIGINT (rq: finish the current job first; twice: stop at once)."""
    for kind in KINDS.values():
        for module in kind.preload:
            importlib.import_module(module)
    interval = max(1, int(settings.job_heartbeat))
    # a blocking dequeue must not hit the socket timeout of the API's fail-fast client
    client = connect_jobs(settings, socket_timeout=interval + 30)
    jobs = JobQueue(connect_jobs(settings), settings)
    worker = GroveWorker(
        [rq_queue(client, settings)],
        name=name,
        connection=client,
        serializer=JSONSerializer,
        jobs=jobs,
        job_monitoring_interval=interval,
        maintenance_interval=interval,
        worker_ttl=15 + interval,  # rq's idle dequeue blocks worker_ttl - 15 s between chores
    )
    worker.work(with_scheduler=False, logging_level="INFO")
