"""Redis keys of the batch jobs (next to :mod:`service.keys`, which holds the online keys).

A job's keys share the hash tag ``{job:<id>}`` (Redis Cluster keeps them on one slot: the job
scripts touch both). rq keeps its own keys under ``rq:`` (queue, registries, its job hashes).
"""

from __future__ import annotations

from service.keys import PREFIX

#: sorted set job id -> creation time (unix ms): GET /jobs; ids whose record expired are pruned
JOBS = f"{PREFIX}:jobs"


def record(job_id: str) -> str:
    """Hash: the job's record (kind, app, params, state, progress, timings, error, result).

    Expires ``job_retention`` seconds after the job ends; while it is queued or running it
    carries a longer expiry (see :func:`service.jobs.store.active_ttl`).
    """
    return f"{PREFIX}:{{job:{job_id}}}:record"


def data(job_id: str) -> str:
    """String: the uploaded dataset's raw bytes (CSV or Parquet as sent, never pickled).

    Deleted when the job ends; same expiry as the record while it is active.
    """
    return f"{PREFIX}:{{job:{job_id}}}:data"


#: set of the ids of queued and running jobs, which the reaper looks at (ids of ended jobs are
#: removed by the reaper when it sees them)
ACTIVE = f"{PREFIX}:jobs:active"
