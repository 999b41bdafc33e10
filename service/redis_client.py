"""Open a Redis client that fails fast, so the API can answer 503 at once when Redis is down."""

from __future__ import annotations

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from service.settings import Settings

#: what a client sees while Redis is down, restarting or loading its data
UNAVAILABLE = (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError)


def connect(settings: Settings, url: str | None = None) -> redis.Redis:
    """Client for ``url`` (default ``settings.redis_url``); one quick retry for stale sockets."""
    url = url or settings.redis_url
    if not url:
        raise RuntimeError("REDIS_URL is not set (grove serve starts an embedded redis-server)")
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=settings.redis_timeout,
        socket_timeout=settings.redis_timeout,
        retry=Retry(NoBackoff(), 1),
        retry_on_error=[redis.ConnectionError],
        health_check_interval=0,
    )
