"""Open Grove's Redis clients: one Redis or a Redis Cluster, failing fast so the API answers 503.

Every process gets its clients here (sync :func:`connect`, asyncio :func:`connect_async`, the
job queue's :func:`connect_jobs`), so the choice between a plain client and redis-py's cluster
client is made in one place:

- ``GROVE_REDIS_CLUSTER=auto`` (default): ask the node named by ``REDIS_URL`` (``INFO
  cluster``) and use the cluster client if it runs in cluster mode. Any node of the cluster
  will do: the client discovers the others (``CLUSTER SLOTS``) and follows them as slots move.
- ``yes`` / ``no``: no question asked.

If the node cannot be reached when the client is built (Redis not up yet), the client is
built on first use instead, and every use until then fails like a call to a Redis that is down
(:data:`UNAVAILABLE`: the API answers 503, the trainer waits), so processes may start before
their Redis.

What runs on a cluster (see :mod:`service.keys`): every script and every transaction of Grove
touches the keys of one app, which share the hash tag ``{app}`` and so one slot; the few global
keys (app index, API-key index, trainer heartbeats) are read and written by single commands.
The batch-job queue does not: rq keeps one job in several keys with fixed names (``rq:job:*``,
``rq:queue:*``, its registries) changed in one MULTI, which a cluster refuses across slots, so
jobs use a plain Redis of their own (``GROVE_JOB_REDIS_URL``; see :func:`connect_jobs`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio
from redis.backoff import NoBackoff
from redis.commands.core import AsyncScript, Script
from redis.connection import Encoder
from redis.exceptions import (
    ClusterDownError,
    ClusterError,
    RedisClusterException,
    TryAgainError,
)
from redis.retry import Retry

from service.settings import Settings

#: what a client sees while Redis is down, restarting or loading its data, or while a cluster
#: is reconfiguring (slot not served, cluster down, resharding); all answered 503 by the API.
#: RedisClusterException is not a RedisError: redis-py raises it when no node answers.
UNAVAILABLE = (
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    ClusterDownError,
    ClusterError,
    TryAgainError,
    RedisClusterException,
)


class JobsNeedPlainRedis(RedisClusterException):
    """The job queue's Redis is a cluster node (set ``GROVE_JOB_REDIS_URL``)."""


class ClusterModeUnknown(redis.ConnectionError):
    """The node of ``REDIS_URL`` did not answer, so whether it is a cluster is not known yet."""


def _require_url(settings: Settings, url: str | None) -> str:
    url = url or settings.redis_url
    if not url:
        raise RuntimeError("REDIS_URL is not set (grove serve starts an embedded redis-server)")
    return url


def is_cluster(settings: Settings, url: str | None = None) -> bool:
    """Whether ``url`` (default ``REDIS_URL``) is a cluster node: the setting, else its INFO."""
    mode = settings.redis_cluster
    if mode != "auto":
        return mode == "yes"
    probe = redis.Redis.from_url(
        _require_url(settings, url),
        socket_connect_timeout=settings.redis_timeout,
        socket_timeout=settings.redis_timeout,
        health_check_interval=0,
    )
    try:
        return bool(int(probe.info("cluster").get("cluster_enabled", 0)))
    except redis.ResponseError as exc:  # a proxy or a server that refuses INFO
        if "unknown command" in str(exc).lower() or "no permission" in str(exc).lower():
            return False
        raise
    except UNAVAILABLE as exc:
        raise ClusterModeUnknown(f"cannot reach {probe.connection_pool}: {exc}") from exc
    finally:
        probe.close()


def _options(settings: Settings) -> dict[str, Any]:
    return {
        "socket_connect_timeout": settings.redis_timeout,
        "socket_timeout": settings.redis_timeout,
        "health_check_interval": 0,
    }


def _build(settings: Settings, url: str) -> redis.Redis | redis.RedisCluster:
    if is_cluster(settings, url):
        # one retry, after redis-py re-reads the slot map (a moved slot, a restarted node);
        # a node that stays down fails the call at once (503) rather than after many backoffs
        return redis.RedisCluster.from_url(
            url, retry=Retry(NoBackoff(), 1), require_full_coverage=False, **_options(settings)
        )
    return redis.Redis.from_url(
        url, retry=Retry(NoBackoff(), 1), retry_on_error=[redis.ConnectionError],
        **_options(settings),
    )


def _build_async(settings: Settings, url: str):
    from redis.asyncio.retry import Retry as AsyncRetry

    # no socket timeout: redis-py's asyncio client spends a task per read on it (a third of
    # its CPU per call, profiled); the caller bounds each call instead (Store.bounded)
    options = {**_options(settings), "socket_timeout": None}
    if is_cluster(settings, url):
        return redis.asyncio.RedisCluster.from_url(
            url, retry=AsyncRetry(NoBackoff(), 1), require_full_coverage=False, **options
        )
    return redis.asyncio.Redis.from_url(
        url, retry=AsyncRetry(NoBackoff(), 1), retry_on_error=[redis.ConnectionError],
        **options,
    )


class Deferred:
    """A client built on first use: stands for the real one while Redis cannot be reached.

    Scripts can be registered before (their SHA is computed locally); any other use builds the
    client, or raises what building raised (a :data:`UNAVAILABLE` error) and tries again on the
    next use. Once built, every attribute is the real client's.
    """

    def __init__(self, build: Callable[[], Any], script_class: type = Script):
        self._build = build
        self._script_class = script_class
        self._client = None
        self._lock = threading.Lock()

    def resolve(self):
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._build()
        return self._client

    def register_script(self, script):
        return self._script_class(self, script)

    def get_encoder(self) -> Encoder:
        if self._client is not None:
            return self._client.get_encoder()
        return Encoder("utf-8", "strict", False)  # redis-py's default, which Grove keeps

    def close(self):
        if self._client is not None:
            return self._client.close()
        return None

    async def aclose(self):
        if self._client is not None:
            await self._client.aclose()

    def __getattr__(self, name: str):
        if name == "connection_pool" and self._client is None:
            # redis-py's AsyncScript asks for the pool's encoder, then get_encoder(): not built
            # yet, say there is no pool rather than build the client (Redis may be down)
            raise AttributeError(name)
        return getattr(self.resolve(), name)


def connect(settings: Settings, url: str | None = None) -> redis.Redis | redis.RedisCluster:
    """Client for ``url`` (default ``REDIS_URL``): plain or cluster, one quick retry."""
    url = _require_url(settings, url)
    try:
        return _build(settings, url)
    except UNAVAILABLE:
        return Deferred(lambda: _build(settings, url))  # type: ignore[return-value]


def connect_async(settings: Settings, url: str | None = None):
    """asyncio client for ``url``: ``redis.asyncio.Redis`` or ``redis.asyncio.RedisCluster``,
    without a socket timeout (bound each call: :meth:`service.store.Store.bounded`)."""
    url = _require_url(settings, url)
    try:
        return _build_async(settings, url)
    except UNAVAILABLE:
        return Deferred(lambda: _build_async(settings, url), AsyncScript)


def connect_scripts(settings: Settings, aio):
    """What the API's request-path scripts run on: a :class:`service.redis_pipe.ScriptPipe`
    (one pipelined connection, a fraction of redis-py's CPU per call) when ``aio`` is a plain
    Redis (or ``GROVE_REDIS_CLUSTER=no``); None for a cluster (redis-py's cluster client follows
    the slots) or, with ``auto``, a Redis that was down when ``aio`` was built (whether it is a
    cluster is not known yet: redis-py's client serves the scripts)."""
    from service.redis_pipe import ScriptPipe

    if isinstance(aio, redis.asyncio.Redis) or settings.redis_cluster == "no":
        return ScriptPipe(_require_url(settings, None), connect_timeout=settings.redis_timeout)
    return None


def jobs_url(settings: Settings) -> str:
    """The Redis of the batch-job queue: ``GROVE_JOB_REDIS_URL``, else ``REDIS_URL``."""
    return _require_url(settings, settings.job_redis_url)


def connect_jobs(settings: Settings, **overrides: Any) -> redis.Redis:
    """Plain client of the job queue's Redis (rq cannot use a cluster: see the module doc).

    Raises :class:`JobsNeedPlainRedis` (the API: 503 saying so) if that Redis is a cluster
    node: set ``GROVE_JOB_REDIS_URL`` to a plain Redis (a small one: it holds job records,
    uploads and rq's queue, not app traffic).
    """
    url = jobs_url(settings)
    try:
        cluster = is_cluster(settings.model_copy(update={"redis_cluster": "auto"}), url)
    except ClusterModeUnknown:
        cluster = False  # down: the job calls fail (503) until it is up; checked again then
    if cluster:
        raise JobsNeedPlainRedis(
            f"the job queue's Redis {url!r} is a Redis Cluster node, which rq cannot use: set "
            "GROVE_JOB_REDIS_URL to a plain Redis for batch jobs"
        )
    options = {**_options(settings), **overrides}
    return redis.Redis.from_url(
        url, retry=Retry(NoBackoff(), 1), retry_on_error=[redis.ConnectionError], **options
    )
