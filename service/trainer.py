"""The trainer: the single writer of each app's model.

For every app whose lease it holds (one trainer per app; several trainer processes share the
apps between them), the trainer

1. turns expired decisions into learning events with the app's ``defaultReward`` (or the sum of
   the rewards received, under ``rewardAggregation: sum``), atomically (Lua ``EXPIRE``);
2. reads the app's learning stream through the consumer group ``trainers`` and updates the
   learner, rescaling rewards to [0, 1] (a labeled event of a supervised kind, queued by
   ``POST /apps/{app}/learn``, goes to the kind's ``learn_labeled`` instead);
3. publishes a snapshot (the serving model + the stream offset it includes + ``eventsLearned``)
   at most every ``snapshot_interval`` seconds or ``snapshot_events`` events; at most
   ``checkpoint_rate`` bytes per second of the learner's whole state (and whenever it hands an
   app over or stops) the snapshot also carries that state, a checkpoint, and the trainer then
   acknowledges the events it contains: a small model's state goes with every snapshot, a
   large one's every few tens of seconds. The whole state of a large model (a 1,000-action
   Bandit Forest: 53 MB; the tree policy's window: up to ~40 MB) written every second stalled
   Redis for every request (bench/http/README.md); its serving model is a tenth of that.

Sharing the apps: each trainer takes at most its share, ``ceil(apps / live trainers)`` (live:
a heartbeat in ``grove:trainers`` within one lease), and hands back (publishes, then releases)
the apps beyond it, so a trainer that joins gets work within a lease check and the apps of one
that dies are taken when its leases run out. On a Redis Cluster an app whose master is down is
dropped (and taken again from its snapshot when the master is back) while the trainer goes on
with the apps of the other masters.

Exactly-once learning: taking an app starts from its last checkpoint and moves the group's
cursor back to the checkpoint's offset (``XGROUP SETID``), so whatever a dead trainer had
learned but not checkpointed is learned again, once (and the stream is trimmed only up to the
checkpoint); the new owner publishes again once it has learned as far as the served snapshot,
so the served counts never go back; a snapshot is published only if the trainer still holds
the lease and the snapshot is still the version it started from (Lua ``PUBLISH``); and the
stream is read only while holding the lease (Lua ``READ``): a trainer whose lease ran out (a
take-over slower than the lease, a pause) cannot take the entries the new owner rewound to.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import sys
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass, field
from typing import Any

import redis

from service import codec, keys
from service.models import ModelKind, model_kind
from service.personalizer.configuration import event_retention
from service.records import AppConfig
from service.redis_client import UNAVAILABLE
from service.redis_text import as_str
from service.scripts import Scripts
from service.settings import Settings
from service.store import Store

log = logging.getLogger("grove.trainer")

#: how much nicer than the trainer the refit thread runs: learning and serving come first
REFIT_NICENESS = 10


def _lower_refit_priority() -> None:
    """Run the calling thread (the refit thread) ``REFIT_NICENESS`` nicer than the process.

    A refit is background work: its result only needs to arrive before the next one is due,
    while every event it delays in the learning loop (and every decision of an API process on
    the same machine) is lag a user sees. While a window fills, a refit (~2.5 CPU s on 26
    actions) came every few seconds and the refit thread took up to a whole core, beside the
    loop, Redis and the API. Linux keeps a nice value per thread, so this lowers the refit
    thread alone (LightGBM fits on it: ``num_threads`` 1). A lower priority is always allowed;
    elsewhere (no per-thread nice) the thread keeps its priority.
    """
    if sys.platform != "linux":
        return
    try:
        thread = threading.get_native_id()
        nice = min(19, os.getpriority(os.PRIO_PROCESS, thread) + REFIT_NICENESS)
        os.setpriority(os.PRIO_PROCESS, thread, nice)
    except OSError as exc:  # a sandbox forbidding it: the refit runs at the loop's priority
        log.warning("refit thread keeps its priority: %s", exc)


def _id_tuple(stream_id: str) -> tuple[int, int]:
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


@dataclass
class OwnedApp:
    """The trainer's working copy of one app's model, ahead of its last published snapshot."""

    config: AppConfig
    kind: ModelKind
    learner: Any
    version: int  # of the last snapshot published (or loaded)
    offset: str  # last stream id applied to ``learner``
    events_learned: int
    events_rejected: int
    #: the last checkpoint's offset (the stream is kept from there: a new owner resumes there)
    checkpoint_offset: str = "0-0"
    #: the served snapshot's offset when the app was taken: the learner, resumed from an older
    #: checkpoint, publishes again once it has learned that far (served counts never go back)
    hold_until: str = "0-0"
    unpublished: int = 0
    to_ack: list[str] = field(default_factory=list)  # stream ids learned since the checkpoint
    last_publish: float = field(default_factory=time.monotonic)
    last_checkpoint: float = field(default_factory=time.monotonic)
    state_bytes: int = 0  # of the last checkpoint's state (0: none written yet by this trainer)
    #: an auto app's switches of serving candidate in the published snapshot (None: not auto)
    switches_published: int | None = None
    #: the learner's refit running in the trainer's refit thread (see Trainer.refit)
    refit: Future | None = None
    refit_started: float = 0.0  # time.monotonic() when ``refit`` was submitted

    def switch_count(self) -> int | None:
        switches = getattr(self.learner, "switches", None)
        return None if switches is None else len(switches)


class Trainer:
    def __init__(self, client: redis.Redis, settings: Settings, trainer_id: str | None = None):
        self.redis = client
        self.settings = settings
        self.store = Store(client, settings)
        self.scripts = Scripts(client)
        self.id = trainer_id or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.owned: dict[str, OwnedApp] = {}
        self._next_lease_check = 0.0
        self._unreachable: set[str] = set()  # apps (or "the app index") Redis did not answer for
        # one thread runs the apps' refits in turn (LightGBM fits without the GIL), so that the
        # loop goes on learning every app meanwhile; a refit is bounded by the policy's window
        self._refits = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grove-refit",
                                          initializer=_lower_refit_priority)

    # -- loop ----------------------------------------------------------------------------------
    def run(self, stop: threading.Event | None = None) -> None:
        """Train until ``stop`` is set; survives Redis outages (drops its apps and retries)."""
        stop = stop or threading.Event()
        log.info("trainer %s started", self.id)
        down_since: float | None = None
        while not stop.is_set():
            try:
                work = self.step()
            except (*UNAVAILABLE, redis.RedisError) as exc:  # down, loading, failing over...
                if down_since is None:
                    down_since = time.monotonic()
                    log.warning("Redis unavailable (%s: %s); retrying", type(exc).__name__, exc)
                self.owned.clear()  # reload from the snapshots once Redis is back
                self._next_lease_check = 0.0
                stop.wait(0.5)
                continue
            if down_since is not None:
                log.warning("Redis is back after %.1fs", time.monotonic() - down_since)
                down_since = None
            if not work:
                stop.wait(self.settings.trainer_poll)
        self.shutdown()

    def step(self) -> int:
        """One pass over the owned apps; returns how much work it found (0: idle)."""
        if time.monotonic() >= self._next_lease_check:
            self.refresh_leases()
            self.apply_tree_selections()
        work = 0
        for name in list(self.owned):
            try:
                for stage in (self.expire, self.learn, self.refit):
                    if name in self.owned:  # a stage may drop it (app gone, lease lost)
                        work += stage(name)
                self.maybe_publish(name)
                self._reachable(name)
            except UNAVAILABLE as exc:  # its master is down (a cluster): the others go on
                self.owned.pop(name, None)  # taken again from its snapshot when it is back
                self._down(name, exc)
            except redis.ResponseError as exc:  # e.g. the app was deleted under us
                log.warning("dropping app %s: %s", name, exc)
                self.owned.pop(name, None)
        return work

    def shutdown(self) -> None:
        """Publish what was learned and hand the apps back (clean stop)."""
        try:
            for name in list(self.owned):
                self.maybe_publish(name, force=True)
                self.scripts.release_lease(keys=[keys.lease(name)], args=[self.id])
            self.redis.zrem(keys.TRAINERS, self.id)
        except UNAVAILABLE as exc:
            log.warning(
                "shutdown without Redis (%s): the next trainer resumes from the snapshots", exc
            )
        self.owned.clear()
        self._refits.shutdown(wait=False, cancel_futures=True)
        log.info("trainer %s stopped", self.id)

    # -- leases --------------------------------------------------------------------------------
    def _down(self, what: str, exc: Exception) -> None:
        if what not in self._unreachable:
            self._unreachable.add(what)
            log.warning("Redis unavailable for %s (%s: %s); retrying", what, type(exc).__name__,
                        exc)

    def _reachable(self, what: str) -> None:
        if what in self._unreachable:
            self._unreachable.discard(what)
            log.warning("Redis answers again for %s", what)

    def refresh_leases(self) -> None:
        """Beat, renew the owned apps' leases, take free apps up to the share, hand back extras.

        Global keys (the app index, the heartbeats) and each app may live on different Redis
        masters: one that does not answer costs only what it holds.
        """
        ttl_ms = int(self.settings.trainer_lease * 1000)
        try:
            now = self.redis.time()
            now_ms = int(now[0]) * 1000 + int(now[1]) // 1000
            self.redis.zadd(keys.TRAINERS, {self.id: now_ms})
            self.redis.zremrangebyscore(keys.TRAINERS, "-inf", now_ms - 86_400_000)
            live = max(1, int(self.redis.zcount(keys.TRAINERS, now_ms - ttl_ms, "+inf")))
            names = set(self.store.app_names()) | set(self.owned)
            share = -(-len(names) // live)  # ceil: every app has a taker
            self._reachable("the app index")
        except UNAVAILABLE as exc:  # go on with the apps it has
            self._down("the app index", exc)
            names = set(self.owned)
            share = len(names)
        for name in sorted(names):
            try:
                self._refresh_app(name, ttl_ms, share)
            except UNAVAILABLE as exc:
                self.owned.pop(name, None)
                self._down(name, exc)
        for name in sorted(self.owned, reverse=True)[: max(0, len(self.owned) - share)]:
            self.hand_over(name)
        # renew well within the lease; look for new apps at least every second
        self._next_lease_check = time.monotonic() + min(1.0, self.settings.trainer_lease / 3)

    def _refresh_app(self, name: str, ttl_ms: int, share: int) -> None:
        config = self.store.get_app(name)
        owned = self.owned.get(name)
        if config is None or (owned is not None and owned.config.uid != config.uid):
            self.owned.pop(name, None)
            if config is None:
                return
            owned = None
        if owned is None and len(self.owned) >= share:
            return  # its share is full: a free app is left to another trainer
        held = self.scripts.acquire_lease(
            keys=[keys.config(name), keys.lease(name)], args=[config.uid, self.id, ttl_ms]
        )
        if not held:
            self.owned.pop(name, None)
        elif owned is None:
            try:
                self.take(name, config)
            except UNAVAILABLE:
                raise
            except Exception:  # e.g. an unreadable snapshot: keep serving the other apps
                log.exception("app %s: cannot resume from its snapshot; skipping it", name)
                self.scripts.release_lease(keys=[keys.lease(name)], args=[self.id])
        elif owned.config != config:
            self._apply_config(owned, config)
        self._reachable(name)

    def hand_over(self, name: str) -> None:
        """Publish what was learned of ``name`` and release its lease (another trainer takes it)."""
        self.maybe_publish(name, force=True)
        self.owned.pop(name, None)
        self.scripts.release_lease(keys=[keys.lease(name)], args=[self.id])
        log.info("trainer %s handed app %s over", self.id, name)

    def take(self, name: str, config: AppConfig) -> None:
        """Start owning ``name``: load its snapshot and rewind the consumer group to it."""
        info, state = self.store.load_checkpoint(name)
        kind = model_kind(config.policy_kind)
        learner = kind.load(state)
        if hasattr(learner, "defer_refits"):
            learner.defer_refits()  # refits run in the refit thread (Trainer.refit), not inline
        kind.change_actions(learner, config.action_ids, [])
        stream = keys.stream(name)
        try:
            self.redis.xgroup_create(stream, keys.TRAINER_GROUP, id=info.offset, mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise
            self.redis.xgroup_setid(stream, keys.TRAINER_GROUP, id=info.offset)
        for consumer in self.redis.xinfo_consumers(stream, keys.TRAINER_GROUP):
            consumer_name = as_str(consumer["name"])
            if consumer_name != self.id:  # dead: the lease was free
                self.redis.xgroup_delconsumer(stream, keys.TRAINER_GROUP, consumer_name)
        self.owned[name] = OwnedApp(
            config,
            kind,
            learner,
            info.version,
            info.offset,
            info.events_learned,
            info.events_rejected,
            checkpoint_offset=info.offset,
            hold_until=info.served_offset,
        )
        self.owned[name].switches_published = self.owned[name].switch_count()
        log.info(
            "trainer %s took app %s at version %d (checkpoint at offset %s with %d events "
            "learned; served up to %s)",
            self.id,
            name,
            info.version,
            info.offset,
            info.events_learned,
            info.served_offset,
        )

    @staticmethod
    def _apply_config(owned: OwnedApp, config: AppConfig) -> None:
        old, new = set(owned.config.action_ids), config.action_ids
        owned.kind.change_actions(
            owned.learner,
            [a for a in new if a not in old],
            [a for a in owned.config.action_ids if a not in set(new)],
        )
        owned.config = config

    # -- tree selections (the pruning job's commands) ----------------------------------------
    def apply_tree_selections(self) -> None:
        """Apply pending "keep these trees" commands (:func:`service.keys.tree_selection`).

        The pruning job never writes a model: it asks the trainer, the single writer, to keep
        some trees of its current learner (``select_trees``: tree indices are those of the
        trees' creation, stable while the forest learns) and to publish a snapshot at once. A
        selection made on a forest of another size (pruned since) is rejected. If the snapshot
        cannot be published (lease lost), the command stays pending for the next owner.
        """
        for name in list(self.owned):
            try:
                command = self.store.tree_selection(name)
                if command is None or command.get("status") != "pending":
                    continue
                owned = self.owned[name]
                request = command.get("id", "")
                select = getattr(owned.learner, "select_trees", None)
                n_trees = getattr(owned.learner, "n_trees", None)
                if select is None:
                    reason = f"policy kind {owned.kind.name!r} cannot keep a subset of trees"
                elif n_trees != command["nTrees"]:
                    reason = (
                        f"the forest has {n_trees} trees; the selection was made on a forest "
                        f"of {command['nTrees']}"
                    )
                else:
                    try:
                        learner = select(command["trees"])
                    except ValueError as exc:
                        reason = str(exc)
                    else:
                        owned.learner = learner
                        owned.unpublished += 1  # the model changed: publish without new events
                        if self.maybe_publish(name, force=True):
                            self.store.settle_tree_selection(
                                name, request, "applied", version=owned.version
                            )
                            log.info(
                                "app %s: kept %d of %d trees (request %s), version %d",
                                name, len(command["trees"]), n_trees, request, owned.version,
                            )
                        continue
                self.store.settle_tree_selection(name, request, "rejected", reason=reason)
                log.warning("app %s: tree selection %s rejected: %s", name, request, reason)
            except (redis.ResponseError, ValueError, KeyError) as exc:  # a malformed command
                log.warning("app %s: cannot apply the tree selection: %s", name, exc)

    # -- work ----------------------------------------------------------------------------------
    def expire(self, name: str) -> int:
        """Turn decisions past their deadline into learning events (default or summed reward)."""
        owned = self.owned[name]
        now_ms = int(time.time() * 1000)  # candidates only: the script re-checks with Redis' clock
        due = self.redis.zrangebyscore(
            keys.deadlines(name), "-inf", now_ms, start=0, num=self.settings.trainer_batch
        )
        if not due:
            return 0
        ids = [as_str(d) for d in due]
        result = self.scripts.expire(
            keys=[keys.config(name), keys.deadlines(name), keys.stream(name), keys.stats(name)]
            + [keys.decision(name, i) for i in ids],
            args=[owned.config.uid, repr(float(owned.config.default_reward))] + ids,
        )
        if as_str(result[0]) == "gone":
            self.owned.pop(name, None)
            return 0
        return int(result[1]) + int(result[2])

    def learn(self, name: str) -> int:
        """Learn the app's next batch of stream entries; returns how many were read.

        Reward events go to the learner in runs (``ModelKind.learn_run``: one compiled call per
        run for the Bandit Forest); a bad entry (or a learner error on it) is counted in
        eventsRejected and logged, not retried, and the run goes on after it.
        """
        owned = self.owned[name]
        answer = self.scripts.read(
            keys=[keys.stream(name), keys.lease(name)],
            args=[self.id, keys.TRAINER_GROUP, self.settings.trainer_batch],
        )
        if answer and not isinstance(answer[0], list):  # {'lease'}: another trainer has it
            log.warning("app %s: lease lost before reading; dropping the app", name)
            self.owned.pop(name, None)
            return 0
        entries = [
            (as_str(entry_id), {as_str(f[i]): f[i + 1] for i in range(0, len(f), 2)})
            for entry_id, f in (answer[0][1] if answer else [])
        ]
        start = 0
        while start < len(entries):
            if "label" in entries[start][1]:  # a labeled event (POST /apps/{app}/learn)
                end = start + 1
                self._learn_labeled(name, owned, entries[start])
            else:  # decisions joined with their rewards, up to the next labeled event
                end = next(
                    (j for j in range(start, len(entries)) if "label" in entries[j][1]),
                    len(entries),
                )
                self._learn_rewards(name, owned, entries[start:end])
            start = end
        for entry_id, _ in entries:
            owned.to_ack.append(entry_id)
        if entries:
            owned.offset = entries[-1][0]
            owned.unpublished += len(entries)
            if (owned.switch_count() or 0) > (owned.switches_published or 0):
                owned.last_publish = float("-inf")  # a switch is a new model version: publish now
        return len(entries)

    def refit(self, name: str) -> int:
        """Install the app's finished refit (1: the model changed), or start one when due.

        A policy whose model is rebuilt in batches (the tree-ensemble policy's regressors, an
        auto app's candidates) hands the trainer a self-contained job (``start_refit``); it runs
        in the refit thread while this loop goes on learning, and its result is installed here,
        by the model's single writer (``finish_refit``), then published at once. Events learned
        meanwhile stay in the policy's window for the next refit.
        """
        owned = self.owned[name]
        future = owned.refit
        if future is not None:
            if not future.done():
                return 0
            owned.refit = None
            try:
                result = future.result()
            except Exception:  # a failed fit keeps the current model; the next one is retried
                log.exception("app %s: refit failed; serving the previous model", name)
                return 0
            owned.learner.finish_refit(result)
            log.info("app %s: refit installed %.2f s after it was started", name,
                     time.monotonic() - owned.refit_started)
            owned.unpublished += 1
            owned.last_publish = float("-inf")  # a new model: publish at once
            return 1
        due = getattr(owned.learner, "refit_due", None)
        if due is not None and due():
            job = owned.learner.start_refit()
            if job is not None:
                owned.refit_started = time.monotonic()
                owned.refit = self._refits.submit(job)
        return 0

    def wait_refits(self, timeout: float | None = None) -> int:
        """Wait for the running refits and install them; returns how many were installed."""
        running = [o.refit for o in self.owned.values() if o.refit is not None]
        wait_futures(running, timeout)
        return sum(self.refit(name) for name, o in list(self.owned.items())
                   if o.refit is not None and o.refit.done())

    def _learn_labeled(self, name: str, owned: OwnedApp, entry: tuple[str, dict]) -> None:
        entry_id, fields = entry
        try:
            owned.kind.require("learn_labeled", name)(
                owned.learner, codec.unpack(fields["context"]), int(fields["label"])
            )
            owned.events_learned += 1
        except Exception:
            # one bad event (or a learner bug on it) must not stop the app's learning, nor
            # crash-loop the trainer: it is counted in eventsRejected and logged, not retried
            owned.events_rejected += 1
            log.exception("app %s: event %s not learned", name, entry_id)

    def _learn_rewards(self, name: str, owned: OwnedApp, run: list[tuple[str, dict]]) -> None:
        listed = owned.config.action_features  # (the app's actions')

        def event(entry: tuple[str, dict]) -> tuple:
            fields = entry[1]
            offered, features = fields.get("offered"), fields.get("actionFeatures")
            return (
                codec.unpack(fields["context"]),
                as_str(fields["action"]),
                owned.config.rescale(float(fields["reward"])),
                float(fields["probability"]),
                None if offered is None else codec.unpack(offered),
                listed if features is None else {**(listed or {}), **codec.unpack(features)},
            )

        def refused(i: int) -> None:
            owned.events_rejected += 1
            log.exception("app %s: event %s not learned", name, run[i][0])

        owned.events_learned += owned.kind.learn_each(owned.learner, run, event, refused)

    def _note_switches(self, name: str, owned: OwnedApp) -> None:
        """An auto app's new switches, now published: logged with both candidates' estimates
        and counted in the app's stats (``grove_app_policy_switches`` in /metrics)."""
        count = owned.switch_count()
        if count is None or count <= (owned.switches_published or 0):
            return
        for switch in owned.learner.switches[owned.switches_published or 0:]:
            log.info("app %s: serving candidate %s -> %s at event %d (version %d; %s): %s",
                     name, switch["from"], switch["to"], switch["at"], owned.version,
                     switch["reason"], switch["estimates"])
        self.redis.hincrby(keys.stats(name), "switches", count - (owned.switches_published or 0))
        owned.switches_published = count

    def maybe_publish(self, name: str, force: bool = False) -> bool:
        """Publish a snapshot of ``name`` if one is due (``force``: now, as a checkpoint, also
        with nothing new to serve when the last checkpoint is behind); whether it did."""
        owned = self.owned.get(name)
        if owned is None:
            return False
        behind = owned.checkpoint_offset != owned.offset  # learned since the last checkpoint
        if owned.unpublished == 0 and not (force and behind):
            return False
        now = time.monotonic()
        due = (
            owned.unpublished >= self.settings.snapshot_events
            or now - owned.last_publish >= self.settings.snapshot_interval
        )
        if not force and (not due or _id_tuple(owned.offset) < _id_tuple(owned.hold_until)):
            return False
        # the whole state (statistics, windows: up to tens of MB) at GROVE_CHECKPOINT_RATE bytes
        # per second, and when the app changes hands; the serving model at every publication
        checkpoint = force or (now - owned.last_checkpoint
                               >= owned.state_bytes / self.settings.checkpoint_rate)
        args = [
            owned.config.uid,
            self.id,
            owned.version,
            owned.version + 1,
            owned.offset,
            owned.events_learned,
            owned.events_rejected,
            codec.encode(owned.kind.dump_for_serving(owned.learner)),
        ]
        if checkpoint:
            args.append(codec.encode(owned.kind.dump(owned.learner)))
            owned.state_bytes = len(args[-1])
        result = self.scripts.publish(
            keys=[keys.config(name), keys.lease(name), keys.snapshot(name)], args=args
        )
        status = as_str(result[0])
        if status != "ok":
            # lost the lease or the app: another trainer (or nobody) carries on from the snapshot
            log.warning("app %s: snapshot not published (%s); dropping the app", name, status)
            self.owned.pop(name, None)
            return False
        owned.version += 1
        owned.unpublished = 0
        owned.last_publish = now
        self._note_switches(name, owned)
        if checkpoint:
            self._checkpointed(name, owned, now)
        return True

    def _checkpointed(self, name: str, owned: OwnedApp, now: float) -> None:
        """The events up to the checkpoint are safe: acknowledge them, trim the stream."""
        owned.last_checkpoint = now
        owned.checkpoint_offset = owned.offset
        stream = keys.stream(name)
        for i in range(0, len(owned.to_ack), 10_000):  # a checkpoint interval's worth
            self.redis.xack(stream, keys.TRAINER_GROUP, *owned.to_ack[i:i + 10_000])
        owned.to_ack.clear()
        # the app's retention (Personalizer's logRetentionDays), else GROVE_EVENT_RETENTION
        retention = event_retention(owned.config, self.settings.event_retention)
        if math.isfinite(retention):
            self._trim(stream, owned.checkpoint_offset, retention)

    def _trim(self, stream: str, offset: str, retention: float) -> None:
        """Drop learned events older than ``retention`` s (never one not yet in a checkpoint)."""
        horizon = (int((time.time() - retention) * 1000), 0)
        minid = min(_id_tuple(offset), horizon)
        if minid > (0, 0):
            self.redis.xtrim(stream, minid=f"{minid[0]}-{minid[1]}", approximate=False)
