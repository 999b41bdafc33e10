"""Optimistic transactions on an app's config and snapshot (WATCH, read, MULTI, write, EXEC).

Model replacements (:mod:`service.personalizer.model_file`) and candidate changes
(:mod:`service.candidates`) read the app's config and snapshot, build a new model and write
both back only if neither changed meanwhile (a trainer's publication, another replacement):
else they read again and retry. Both keys carry the app's hash tag, so a Redis Cluster takes
the transaction too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import redis

from service import keys

T = TypeVar("T")


def watched(client: redis.Redis, app: str, attempt: Callable[[Any], T]) -> T:
    """``attempt(pipe)`` with the app's config and snapshot watched, run again whenever
    another client changed them before its ``EXEC``; its return value."""
    with client.pipeline(transaction=True) as pipe:
        while True:
            try:
                pipe.watch(keys.config(app), keys.snapshot(app))
                return attempt(pipe)
            except redis.WatchError:
                continue


def read_app(pipe, app: str, *fields: str) -> tuple[bytes | None, list]:
    """The app's config JSON (None: no such app) and ``fields`` of its snapshot (immediate
    reads of a watching pipeline)."""
    return pipe.hget(keys.config(app), "json"), pipe.hmget(keys.snapshot(app), *fields)
