"""Each API process serves decide from the latest snapshot, decoded once per version.

A new version is loaded in the background (a worker thread decodes it) while requests go on
being served by the version before; a request waits for a load only when the process has no
model of the app at all (its first request, or after the app was re-created). Requests learn of
a new version from the decide script's answer (:meth:`ModelCache.notice`) or from
``GET /apps/{app}``, which waits until this process serves the version it reports.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from service.codec import CodecError
from service.models import ModelKind, model_kind
from service.records import AppConfig
from service.store import Store

log = logging.getLogger("grove.api")

#: after a failed background load, the seconds before the next attempt
RETRY_AFTER = 1.0


@dataclass
class ServedModel:
    uid: str
    version: int
    kind: ModelKind
    learner: Any
    # decide advances the learner's RNG: one request at a time per model
    lock: threading.Lock = field(default_factory=threading.Lock)


class ModelCache:
    def __init__(self) -> None:
        self._models: dict[str, ServedModel] = {}
        self._loading: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        self._background: dict[str, asyncio.Future] = {}
        self._failed_at: dict[str, float] = {}

    def _current(self, config: AppConfig, version: int) -> ServedModel | None:
        served = self._models.get(config.name)
        if served is not None and served.uid == config.uid and served.version >= version:
            return served
        return None

    def _load(self, store: Store, config: AppConfig) -> ServedModel:
        """Read and decode the app's serving snapshot (blocking: Redis and decoding)."""
        info, state = store.load_snapshot(config.name, serving=True)
        kind = model_kind(config.policy_kind)
        try:
            learner = kind.load_for_serving(state)
        except (ValueError, TypeError, KeyError) as exc:
            raise CodecError(f"{kind.name} cannot restore from this snapshot: {exc}") from exc
        seed = store.settings.decide_seed
        if seed is not None and kind.reseed is not None:  # reproducible draws (replays)
            kind.reseed(learner, seed)
        served = ServedModel(config.uid, info.version, kind, learner)
        with self._guard:  # never replace a newer model by an older one
            now = self._models.get(config.name)
            if now is None or now.uid != served.uid or now.version < served.version:
                self._models[config.name] = served
            else:
                served = now
        return served

    def get(self, store: Store, config: AppConfig, version: int) -> ServedModel:
        """The app's model at ``version`` or newer, loading the snapshot if the cache is older
        (blocking: for worker threads and tests; the event loop calls :meth:`serve`)."""
        served = self._current(config, version)
        if served is not None:
            return served
        with self._guard:
            loading = self._loading.setdefault(config.name, threading.Lock())
        with loading:  # one thread decodes a new version; the others wait and reuse it
            served = self._current(config, version)
            if served is not None:
                return served
            return self._load(store, config)

    async def serve(self, store: Store, config: AppConfig, version: int) -> ServedModel:
        """The model to serve now: the cached one (a newer ``version`` is loaded in the
        background), or, if this process has none of this app, the snapshot loaded first."""
        served = self._models.get(config.name)
        if served is not None and served.uid == config.uid:
            if served.version < version:
                self.notice(store, config, version)
            return served
        return await asyncio.to_thread(self.get, store, config, version)

    async def latest(self, store: Store, config: AppConfig, version: int) -> ServedModel:
        """The app's model at ``version`` or newer, waiting for its load if needed (predict:
        answers from the version current when it was asked)."""
        served = self._current(config, version)
        if served is not None:
            return served
        return await asyncio.to_thread(self.get, store, config, version)

    def notice(self, store: Store, config: AppConfig, version: int) -> None:
        """The app's model is at ``version``: load it in the background if ours is older (one
        load per app at a time; after a failure, not again for :data:`RETRY_AFTER` seconds)."""
        if self._current(config, version) is not None or config.name in self._background:
            return
        if time.monotonic() - self._failed_at.get(config.name, -RETRY_AFTER) < RETRY_AFTER:
            return
        future = asyncio.ensure_future(asyncio.to_thread(self.get, store, config, version))
        self._background[config.name] = future

        def done(f: asyncio.Future, name: str = config.name) -> None:
            self._background.pop(name, None)
            if not f.cancelled() and f.exception() is not None:
                self._failed_at[name] = time.monotonic()
                log.error("loading the new snapshot of app %r failed: %s", name, f.exception())

        future.add_done_callback(done)

    def forget(self, name: str) -> None:
        self._models.pop(name, None)
