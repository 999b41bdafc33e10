"""Configuration of the service: one settings class, read from the environment.

Read once and handed out by :func:`get_settings` (an ``lru_cache`` dependency), never built at
import time, so tests and the CLI can set the environment first.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Environment variables (prefix ``GROVE_``, except ``REDIS_URL``)."""

    model_config = SettingsConfigDict(env_prefix="GROVE_", extra="ignore", populate_by_name=True)

    redis_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices("REDIS_URL", "GROVE_REDIS_URL"),
        description="Redis to use; unset: `grove serve` starts an embedded redis-server.",
    )
    redis_cluster: Literal["auto", "yes", "no"] = Field(
        default="auto",
        description=(
            "Is REDIS_URL a Redis Cluster node? auto: ask it (INFO cluster); yes / no: as said. "
            "On a cluster, REDIS_URL may name any node, and batch jobs need GROVE_JOB_REDIS_URL."
        ),
    )
    admin_key: str | None = Field(
        default=None, description="Bearer key for /apps administration (GROVE_ADMIN_KEY)."
    )
    data_dir: Path = Field(
        default=Path("grove-data"), description="Embedded redis data and the generated admin key."
    )
    redis_appendfsync: Literal["everysec", "always"] = Field(
        default="everysec",
        description=(
            "The embedded redis-server's appendfsync. everysec: a crash of redis-server itself "
            "can lose ~2 s of answered events while the disk is slow; always: none, at an fsync "
            "per Redis event-loop turn."
        ),
    )
    redis_timeout: float = Field(
        default=1.0, gt=0, description="Seconds before a Redis call fails (the API then says 503)."
    )
    max_batch: int = Field(default=1000, gt=0, description="Most decisions in one /decide/batch.")
    max_body: int = Field(
        default=1 << 20, gt=0, description="Largest request body in bytes (larger: 413)."
    )
    log_level: str = Field(default="INFO", description="Log level of Grove's processes.")
    log_format: Literal["json", "text"] = Field(
        default="json", description="json: one object per line, with eventId on event lines."
    )
    access_log: bool = Field(
        default=True,
        description="uvicorn's access lines, one per request (JSON like every line with "
        "GROVE_LOG_FORMAT=json); false: none.",
    )
    max_features: int = Field(
        default=1000, gt=0, description="Most features in one context (more: 422)."
    )
    repeat_window: float = Field(
        default=60.0,
        ge=0,
        description="Seconds a decide whose client named the eventId can be repeated and get "
        "its first answer (a retry after a lost answer or a 503); its ranking is kept that "
        "long. 0: never (a repeated eventId is a 409).",
    )
    decision_grace: float = Field(
        default=7 * 86400.0,
        gt=0,
        description="Seconds a decision record outlives its deadline if no trainer expires it.",
    )
    event_retention: float = Field(
        default=7 * 86400.0,
        ge=0,
        description="Seconds learned events stay in the app's stream (the logged-events log).",
    )
    trainer_lease: float = Field(
        default=10.0,
        gt=0,
        description="Seconds a dead trainer keeps its apps before another takes over.",
    )
    trainer_batch: int = Field(default=500, gt=0, description="Events read from a stream at once.")
    trainer_poll: float = Field(default=0.05, gt=0, description="Idle sleep of the trainer loop.")
    snapshot_interval: float = Field(
        default=1.0, ge=0, description="Most seconds between snapshots while events arrive."
    )
    snapshot_events: int = Field(
        default=1000, gt=0, description="Most events learned before a snapshot is published."
    )
    checkpoint_rate: float = Field(
        default=2_000_000,
        gt=0,
        description=(
            "Bytes per second, per app, of the trainer's whole learner state (statistics, "
            "windows) written to Redis: a snapshot carries it (a checkpoint) when the time "
            "since the last one is at least the last state's size over this rate (a 1 MB "
            "state: every 0.5 s, so small models go with every snapshot; a 50 MB one: every "
            "25 s); the other snapshots carry the serving model only. A trainer that takes an "
            "app over starts from the last checkpoint and learns the events after it again."
        ),
    )
    decide_seed: int | None = Field(
        default=None,
        description=(
            "For tests and replays only: seed each served snapshot's exploration draws from "
            "(this seed, events the model has learned), so that one API process draws as "
            "`grove replay --in-process --decide-seed` does. Unset: each process draws from "
            "its own OS-seeded stream."
        ),
    )
    # -- batch jobs (service/jobs) --
    job_redis_url: str | None = Field(
        default=None,
        description=(
            "A plain Redis for batch jobs (records, uploads, the rq queue); unset: REDIS_URL. "
            "Required when REDIS_URL is a Redis Cluster (rq cannot use one)."
        ),
    )
    job_queue: str = Field(default="grove-jobs", description="rq queue the job workers listen on.")
    job_max_upload: int = Field(
        default=50 * 2**20, gt=0, description="Largest dataset upload in bytes (larger: 413)."
    )
    job_max_events: int = Field(
        default=1_000_000, gt=0, description="Most logged events one job may read ('last')."
    )
    job_retention: float = Field(
        default=86400.0, gt=0, description="Seconds a finished job's record and result are kept."
    )
    job_timeout: float = Field(
        default=3600.0, gt=0, description="Seconds one attempt of a job may run (then failed)."
    )
    job_heartbeat: float = Field(
        default=2.0, gt=0, description="Seconds between heartbeats of a running job."
    )
    job_lost_after: float = Field(
        default=30.0, gt=0, description="Seconds without heartbeat before a running job is lost."
    )
    job_max_attempts: int = Field(
        default=2, ge=1, description="Attempts of a job whose worker was lost (then failed)."
    )


@lru_cache
def get_settings() -> Settings:
    return Settings()
