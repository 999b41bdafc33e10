"""The API side of Redis: apps, decision records, rewards, activations and snapshot reads.

Every multi-key change goes through a Lua script (:mod:`service.scripts`); key names come from
:mod:`service.keys`. Errors are typed so that routes turn them into 4xx answers.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable
from dataclasses import dataclass
from typing import TypeVar

import redis

from service import codec, keys
from service.records import (
    REQUEST_DIGEST,
    AppConfig,
    Checkpoint,
    FirstAnswer,
    NewDecision,
    Recorded,
    SnapshotInfo,
)
from service.redis_text import as_str
from service.scripts import Scripts
from service.settings import Settings


class StoreError(Exception):
    """A request that cannot be carried out; ``status`` is the HTTP status the API answers."""

    status = 400

    def __init__(self, detail: str):
        super().__init__(detail)
        self.detail = detail


class NotFound(StoreError):
    status = 404


class Conflict(StoreError):
    status = 409


class Gone(NotFound):
    """The app the caller read was deleted (or deleted and created again: another uid)."""


class Stale(StoreError):
    """The app's config changed since the caller read it (its ``rev`` moved): read it again."""

    status = 409


@dataclass(frozen=True)
class AppRead:
    """An app's config as one read saw it: with its ``rev`` (bumped by every write of the
    config) and the model version current at that moment."""

    config: AppConfig
    rev: str
    version: int

    @property
    def token(self) -> str:
        """What the request-path scripts check: this uid at this rev (:mod:`service.scripts`)."""
        return f"{self.config.uid}:{self.rev}"


@dataclass(frozen=True)
class RewardOutcome:
    state: str  # "joined" (in the learning stream) or "accumulating" (sum or average)
    reward_sum: float
    reward_count: int


T = TypeVar("T")


class Store:
    """Grove's records in one Redis (or one Redis Cluster: an app's keys share a slot)."""

    def __init__(self, client: redis.Redis, settings: Settings, aio=None, aio_scripts=None):
        self.redis = client
        self.settings = settings
        self.scripts = Scripts(client)
        #: asyncio client of the same Redis (API processes: the decide/reward path, no thread)
        self.aio = aio
        #: the request path's scripts: on ``aio_scripts`` (a :class:`service.redis_pipe.
        #: ScriptPipe`, the plain Redis's pipelined connection) if given, else on ``aio``
        scripts_on = aio_scripts if aio_scripts is not None else aio
        self.ascripts = Scripts(scripts_on) if scripts_on is not None else None

    async def bounded(self, call: Awaitable[T]) -> T:
        """``call`` on the asyncio client, failing like a socket timeout after
        ``GROVE_REDIS_TIMEOUT`` (one timer per call: the client has no socket timeout).

        The timer gives up one loop turn after it is due, not at once: if the event loop was
        held up (the process descheduled, another thread holding the GIL) the answer may be
        waiting in the socket, and it is taken (``asyncio.timeout`` would cancel first, since
        a due timer runs before the task it would wake)."""
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        state = {"done": False, "expired": False}

        def expire() -> None:
            if not state["done"]:
                state["expired"] = True
                task.cancel()

        timer = loop.call_at(loop.time() + self.settings.redis_timeout, loop.call_soon, expire)
        try:
            return await call
        except asyncio.CancelledError:
            if not state["expired"]:
                raise
            task.uncancel()
            raise redis.TimeoutError(
                f"Redis did not answer within {self.settings.redis_timeout:g}s"
            ) from None
        finally:
            state["done"] = True
            timer.cancel()

    # -- apps --------------------------------------------------------------------------------
    def create_app(
        self, config: AppConfig, initial_state: bytes, serving_state: bytes | None = None
    ) -> None:
        """Create the app, or :class:`Conflict` if the name is taken.

        The app's own keys are written by one script (one slot); the two indexes (app names,
        API-key hashes) live on other slots, so on a Redis Cluster no script or MULTI can
        write them together. They are written FIRST: a crash in between leaves a name or a key
        hash that points at no app, which every reader ignores (no config: not listed, not
        trained, the key refused) and the next create of that name reuses; the other order
        could leave a live app that no trainer sees.
        """
        name = config.name
        self.redis.sadd(keys.APPS, name)
        self.redis.hset(keys.API_KEYS, config.api_key_hash, name)
        result = self.scripts.create_app(
            keys=[
                keys.config(name),
                keys.snapshot(name),
                keys.stats(name),
                keys.stream(name),
                keys.deadlines(name),
                keys.lease(name),
            ],
            args=[config.uid, config.to_json(), initial_state, serving_state or initial_state],
        )
        if as_str(result[0]) == "exists":  # the name stays listed: it is the existing app's
            self.redis.hdel(keys.API_KEYS, config.api_key_hash)
            raise Conflict(f"app {name!r} already exists")

    def key_owner(self, key_hash: str) -> str | None:
        """The app whose API key hashes to ``key_hash`` (read only when a key is refused)."""
        return as_str(self.redis.hget(keys.API_KEYS, key_hash))

    def get_app(self, name: str) -> AppConfig | None:
        raw = self.redis.hget(keys.config(name), "json")
        return AppConfig.from_json(raw) if raw is not None else None

    def get_app_and_version(self, name: str) -> tuple[AppConfig | None, int]:
        """The app's config and its current model version, in one round trip (decide path)."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.hget(keys.config(name), "json")
        pipe.hget(keys.snapshot(name), "version")
        raw, version = pipe.execute()
        config = AppConfig.from_json(raw) if raw is not None else None
        return config, int(version or 0)

    def require_app(self, name: str) -> AppConfig:
        config = self.get_app(name)
        if config is None:
            raise NotFound(f"app {name!r} not found")
        return config

    def list_apps(self) -> list[AppConfig]:
        names = sorted(as_str(n) for n in self.redis.smembers(keys.APPS))
        if not names:
            return []
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.hget(keys.config(name), "json")
        return [AppConfig.from_json(raw) for raw in pipe.execute() if raw is not None]

    def app_names(self) -> list[str]:
        return sorted(as_str(n) for n in self.redis.smembers(keys.APPS))

    def update_app(self, name: str, **changes) -> AppConfig:
        """Optimistic read-modify-write of the config (WATCH/MULTI)."""
        key = keys.config(name)
        with self.redis.pipeline(transaction=True) as pipe:  # WATCH: one key, one slot
            while True:
                try:
                    pipe.watch(key)
                    raw = pipe.hget(key, "json")
                    if raw is None:
                        raise NotFound(f"app {name!r} not found")
                    config = AppConfig.from_json(raw).replace(updated_at=time.time(), **changes)
                    pipe.multi()
                    pipe.hset(key, "json", config.to_json())
                    pipe.hincrby(key, "rev", 1)  # API processes cache the config per rev
                    pipe.execute()
                    return config
                except redis.WatchError:
                    continue

    def delete_app(self, name: str) -> None:
        config = self.get_app(name)
        if not self.redis.delete(keys.config(name)):
            raise NotFound(f"app {name!r} not found")
        if config is not None:
            self.redis.hdel(keys.API_KEYS, config.api_key_hash)
        # the config is gone, so every script now refuses to write into this app
        self.redis.delete(*keys.all_keys(name))
        batch: list[bytes] = []
        for key in self.redis.scan_iter(match=keys.app_pattern(name), count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                self.redis.delete(*batch)
                batch.clear()
        if batch:
            self.redis.delete(*batch)
        self.redis.srem(keys.APPS, name)

    # -- snapshots -----------------------------------------------------------------------------
    def snapshot_info(self, name: str) -> SnapshotInfo | None:
        fields = self.redis.hmget(
            keys.snapshot(name), "version", "offset", "eventsLearned", "eventsRejected",
            "updatedAt", "eventsBefore"
        )
        if fields[0] is None:
            return None
        return SnapshotInfo(
            int(fields[0]),
            as_str(fields[1]),
            int(fields[2]),
            int(fields[3] or 0),
            int(fields[4] or 0),
            int(fields[5] or 0),
        )

    def load_checkpoint(self, name: str) -> tuple[Checkpoint, dict]:
        """The learner's last whole state and where it is in the stream (a trainer resumes
        there: see :class:`service.records.Checkpoint`)."""
        fields = ("version", "offset", "eventsLearned", "eventsRejected", "stateOffset",
                  "stateLearned", "stateRejected", "state")
        (version, offset, learned, rejected, state_offset, state_learned, state_rejected,
         state) = self.redis.hmget(keys.snapshot(name), *fields)  # one command: consistent
        if version is None or state is None:
            raise NotFound(f"app {name!r} has no model snapshot")
        if state_offset is None:  # written before checkpoints: the state is at 'offset'
            state_offset, state_learned, state_rejected = offset, learned, rejected
        checkpoint = Checkpoint(int(version), as_str(state_offset), int(state_learned or 0),
                                int(state_rejected or 0), as_str(offset))
        return checkpoint, codec.decode(state)

    def load_snapshot(self, name: str, serving: bool = False) -> tuple[SnapshotInfo, dict]:
        """The snapshot's header and state: ``serving``, the model API processes serve; else
        the learner's whole state as of the trainer's last checkpoint (at most
        ``GROVE_CHECKPOINT_INTERVAL`` older than the serving one: see :meth:`load_checkpoint`)."""
        pipe = self.redis.pipeline(transaction=True)  # header and state of the same version
        pipe.hmget(
            keys.snapshot(name), "version", "offset", "eventsLearned", "eventsRejected", "updatedAt"
        )
        pipe.hget(keys.snapshot(name), "serving" if serving else "state")
        fields, state = pipe.execute()
        if fields[0] is None or state is None:
            raise NotFound(f"app {name!r} has no model snapshot")
        info = SnapshotInfo(
            int(fields[0]),
            as_str(fields[1]),
            int(fields[2]),
            int(fields[3] or 0),
            int(fields[4] or 0),
        )
        return info, codec.decode(state)

    # -- decisions and rewards ---------------------------------------------------------------
    def _decide_call(self, config: AppConfig, decisions: list[NewDecision], token: str):
        name = config.name
        args: list = [token, int(self.settings.decision_grace * 1000), config.wait_ms,
                      int(self.settings.repeat_window * 1000)]
        for d in decisions:
            args += [
                d.event_id,
                "1" if d.deferred else "0",
                codec.pack(d.context),
                d.action,
                repr(float(d.probability)),
                d.model_version,
                b"" if d.offered is None else codec.pack(list(d.offered)),
                b"" if not d.action_features else codec.pack(d.action_features),
                d.baseline or "",
                b"" if d.ranking is None or len(d.request) != REQUEST_DIGEST
                or not self.settings.repeat_window
                else d.request + codec.pack_ranking(d.ranking),
            ]
        keys_ = [keys.config(name), keys.deadlines(name), keys.stats(name), keys.snapshot(name)]
        return (keys_ + [keys.decision(name, d.event_id) for d in decisions]
                + [keys.answer(name, d.event_id) for d in decisions], args)

    @staticmethod
    def _decided(result, config: AppConfig, decisions: list[NewDecision]) -> Recorded:
        status = as_str(result[0])
        if status == "ok":
            return Recorded(int(result[2]))
        if status == "repeat":
            return Recorded(int(result[1]), [
                FirstAnswer(as_str(result[i]), float(result[i + 1]), int(result[i + 2]),
                            codec.unpack_ranking(result[i + 3]))
                for i in range(2, len(result), 4)
            ])
        if status == "gone":
            raise Gone(f"app {config.name!r} not found")
        if status == "stale":
            raise Stale(f"the config of app {config.name!r} changed")
        event_id = decisions[int(result[1])].event_id
        raise Conflict(f"eventId {event_id!r} already exists in app {config.name!r}")

    def record_decisions(
        self, config: AppConfig, decisions: list[NewDecision], token: str | None = None
    ) -> Recorded:
        """Store decision records with their deadline, all or none (409 if an eventId exists,
        unless the request is a repeat: then nothing is written and :attr:`Recorded.first`
        holds the first answers, see :data:`service.scripts.DECIDE`); with the app's current
        model version. ``token``: :attr:`AppRead.token` (:class:`Stale` if the config changed
        since), default the config's uid (no check of the rev)."""
        keys_, args = self._decide_call(config, decisions, token or config.uid)
        return self._decided(self.scripts.decide(keys=keys_, args=args), config, decisions)

    async def record_decisions_async(
        self, read: AppRead, decisions: list[NewDecision]
    ) -> Recorded:
        """:meth:`record_decisions` on the asyncio client, checked against ``read``'s rev."""
        keys_, args = self._decide_call(read.config, decisions, read.token)
        result = await self.bounded(self.ascripts.decide(keys=keys_, args=args))
        return self._decided(result, read.config, decisions)

    def _reward_call(self, config: AppConfig, event_id: str, reward: float, token: str):
        name = config.name
        keys_ = [
            keys.config(name),
            keys.decision(name, event_id),
            keys.deadlines(name),
            keys.stream(name),
            keys.stats(name),
        ]
        return keys_, [token, event_id, repr(float(reward)), config.reward_aggregation.value,
                       repr(float(config.default_reward))]

    def _rewarded(self, result, config: AppConfig, event_id: str, reward: float) -> RewardOutcome:
        status = as_str(result[0])
        if status == "joined":
            return RewardOutcome("joined", float(reward), 1)
        if status == "added":
            return RewardOutcome("accumulating", float(result[1]), int(result[2]))
        raise self._event_error(status, config.name, event_id)

    def reward(
        self, config: AppConfig, event_id: str, reward: float, token: str | None = None
    ) -> RewardOutcome:
        keys_, args = self._reward_call(config, event_id, reward, token or config.uid)
        return self._rewarded(self.scripts.reward(keys=keys_, args=args), config, event_id, reward)

    async def reward_async(self, read: AppRead, event_id: str, reward: float) -> RewardOutcome:
        """Join ``reward`` to the decision (one script: the app, its rev, the record's state)."""
        keys_, args = self._reward_call(read.config, event_id, reward, read.token)
        result = await self.bounded(self.ascripts.reward(keys=keys_, args=args))
        return self._rewarded(result, read.config, event_id, reward)

    async def read_app_async(self, name: str) -> AppRead | None:
        """The app's config, its rev and the model version, in one round trip (one slot)."""
        pipe = self.aio.pipeline(transaction=False)
        pipe.hmget(keys.config(name), "json", "rev")
        pipe.hget(keys.snapshot(name), "version")
        (raw, rev), version = await self.bounded(pipe.execute())
        if raw is None:
            return None
        return AppRead(AppConfig.from_json(raw), as_str(rev) or "0", int(version or 0))

    async def key_owner_async(self, key_hash: str) -> str | None:
        return as_str(await self.bounded(self.aio.hget(keys.API_KEYS, key_hash)))

    def _label_call(self, config: AppConfig, event: tuple, token: str):
        name, (event_id, context, label, remember) = config.name, event
        keys_ = [keys.config(name), keys.stream(name), keys.stats(name), keys.label(name, event_id)]
        return keys_, [token, event_id, codec.pack(context), int(label),
                       config.wait_ms if remember else 0]

    @staticmethod
    def _labeled(result, config: AppConfig, event_id: str) -> str:
        status = as_str(result[0])
        if status == "gone":
            raise Gone(f"app {config.name!r} not found")
        if status == "stale":
            raise Stale(f"the config of app {config.name!r} changed")
        if status == "exists":
            raise Conflict(f"eventId {event_id!r} was learned already (an eventId is "
                           "remembered for the app's rewardWaitTime)")
        return as_str(result[1])

    def learn_labeled(self, config: AppConfig, event_id: str, context: dict, label: int,
                      remember: bool = True) -> str:
        """Queue a labeled event (supervised kinds) in the app's learning stream; its stream id.
        ``remember``: ``event_id`` is the client's, refused again for the app's rewardWaitTime
        (:class:`Conflict`)."""
        keys_, args = self._label_call(config, (event_id, context, label, remember), config.uid)
        return self._labeled(self.scripts.label(keys=keys_, args=args), config, event_id)

    async def learn_labeled_async(
        self, read: AppRead, event_id: str, context: dict, label: int, remember: bool = True
    ) -> str:
        keys_, args = self._label_call(read.config, (event_id, context, label, remember),
                                       read.token)
        result = await self.bounded(self.ascripts.label(keys=keys_, args=args))
        return self._labeled(result, read.config, event_id)

    def _activate_call(self, config: AppConfig, event_id: str, token: str):
        name = config.name
        keys_ = [keys.config(name), keys.decision(name, event_id), keys.deadlines(name)]
        grace = int(self.settings.decision_grace * 1000)
        return keys_, [token, event_id, config.wait_ms, grace]

    def _activated(self, result, config: AppConfig, event_id: str) -> None:
        status = as_str(result[0])
        if status != "activated":
            raise self._event_error(status, config.name, event_id)

    def activate(self, config: AppConfig, event_id: str) -> None:
        keys_, args = self._activate_call(config, event_id, config.uid)
        self._activated(self.scripts.activate(keys=keys_, args=args), config, event_id)

    async def activate_async(self, read: AppRead, event_id: str) -> None:
        keys_, args = self._activate_call(read.config, event_id, read.token)
        result = await self.bounded(self.ascripts.activate(keys=keys_, args=args))
        self._activated(result, read.config, event_id)

    @staticmethod
    def _event_error(status: str, name: str, event_id: str) -> StoreError:
        if status == "gone":
            return Gone(f"app {name!r} not found")
        if status == "missing":
            return NotFound(f"eventId {event_id!r} is unknown or its reward wait time is over")
        if status == "expired":
            return NotFound(f"eventId {event_id!r}: its reward wait time is over")
        if status == "deferred":
            return Conflict(
                f"eventId {event_id!r} was deferred and is not activated yet: "
                f"POST /apps/{name}/activate first"
            )
        if status == "duplicate":
            return Conflict(
                f"eventId {event_id!r} already has its reward "
                f"(rewardAggregation 'earliest' keeps the first)"
            )
        if status == "active":
            return Conflict(f"eventId {event_id!r} is already active")
        if status == "stale":
            return Stale(f"the config of app {name!r} changed")
        return StoreError(f"unexpected answer {status!r} for eventId {event_id!r}")

    # -- tree selection (pruning job -> trainer) -------------------------------------------------
    def request_tree_selection(
        self, name: str, trees: list[int], n_trees: int, request_id: str, ttl: float = 86_400
    ) -> None:
        """Ask the app's trainer to keep only ``trees`` of its ``n_trees``-tree forest (replaces
        any earlier command; the trainer applies it and publishes, see
        :func:`service.keys.tree_selection`)."""
        key = keys.tree_selection(name)
        pipe = self.redis.pipeline(transaction=True)
        pipe.delete(key)
        pipe.hset(
            key,
            mapping={
                "trees": json.dumps([int(t) for t in trees]),
                "nTrees": int(n_trees),
                "id": request_id,
                "requestedAt": int(time.time() * 1000),
                "status": "pending",
            },
        )
        pipe.expire(key, max(1, int(ttl)))
        pipe.execute()

    def tree_selection(self, name: str) -> dict | None:
        """The app's tree-selection command (trees as a list, nTrees and version as ints)."""
        raw = self.redis.hgetall(keys.tree_selection(name))
        if not raw:
            return None
        command = {as_str(k): as_str(v) for k, v in raw.items()}
        command["trees"] = json.loads(command["trees"])
        for field in ("nTrees", "version", "requestedAt"):
            if field in command:
                command[field] = int(command[field])
        return command

    def settle_tree_selection(self, name: str, request_id: str, status: str, **fields) -> bool:
        """Mark the command ``request_id`` applied or rejected (False if it was replaced)."""
        key = keys.tree_selection(name)
        with self.redis.pipeline(transaction=True) as pipe:  # WATCH: one key, one slot
            try:
                pipe.watch(key)
                if as_str(pipe.hget(key, "id")) != request_id:
                    return False
                pipe.multi()
                pipe.hset(key, mapping={"status": status, **fields})
                pipe.execute()
                return True
            except redis.WatchError:
                return False

    # -- status --------------------------------------------------------------------------------
    def app_status(self, name: str) -> dict:
        """Counters for GET /apps/{app}: pending decisions, trainer lag and liveness, stats."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.zcard(keys.deadlines(name))
        pipe.hgetall(keys.stats(name))
        pipe.pttl(keys.lease(name))
        pending, stats, lease_ttl = pipe.execute()
        now = self.redis.time()  # not in the pipeline: a cluster pipeline takes keyed commands
        info = self.snapshot_info(name)
        offset = info.offset if info else "0-0"
        counters = {as_str(k): int(float(v)) for k, v in stats.items()}
        learned = (info.events_learned + info.events_rejected + info.events_before) if info else 0
        # every append to the stream counts one 'rewarded', 'defaulted' (scripts REWARD, EXPIRE)
        # or 'labeled' (script LABEL)
        appended = sum(counters.get(c, 0) for c in ("rewarded", "defaulted", "labeled"))
        lag = max(0, appended - learned)
        # the oldest event appended after the snapshot's offset: how stale the served model is
        oldest = self.redis.xrange(keys.stream(name), min=f"({offset}", count=1)
        now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
        lag_seconds = 0.0
        if oldest:
            lag_seconds = max(0.0, (now_ms - int(as_str(oldest[0][0]).split("-")[0])) / 1000)
        return {
            "model_version": info.version if info else 0,
            "events_learned": info.events_learned if info else 0,
            "events_rejected": info.events_rejected if info else 0,
            "snapshot_age": max(0.0, (now_ms - info.updated_at_ms) / 1000) if info else None,
            "pending_decisions": int(pending),
            "trainer_lag": lag,
            "trainer_lag_seconds": lag_seconds,
            "trainer_alive": lease_ttl is not None and int(lease_ttl) > 0,
            "stats": counters,
        }

    def snapshot_sizes(self, name: str) -> tuple[int, int]:
        """Bytes of the snapshot's trainer state and of its serving state (for /metrics)."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.hstrlen(keys.snapshot(name), "state")
        pipe.hstrlen(keys.snapshot(name), "serving")
        state, serving = pipe.execute()
        return int(state), int(serving)

    def trainers_alive(self, within: float) -> int:
        now = self.redis.time()
        now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
        return int(self.redis.zcount(keys.TRAINERS, now_ms - within * 1000, "+inf"))
