"""The ``warm-start`` job: an app's current policy learns the app's logged events, and the model
it makes replaces the app's fresh one.

Why: a new policy (an evaluation's, applied with Personalizer's ``applyFromEvaluation``, or
any other) starts from a fresh model, which earns little for its first thousands of events,
while the app's log holds what every earlier policy saw. Personalizer applied "the learning
settings and the model" of an evaluation; this job is Grove's way to do the second part, on
the whole log rather than the evaluation's window.

What it does, in order:

1. notes the app's model (its snapshot's ``modelId``, or the one given in ``model_id``: the
   fresh model the apply installed) and its policy;
2. builds a fresh learner of that policy and has it learn the app's logged reward events in
   the stream's order, as the app's trainer learned them (the reward rescaled into [0, 1], the
   logged propensity, the actions each decision was drawn among and their features), the
   newest ``max_events`` of them up to the served snapshot's offset (and with ``since_ms``
   only those logged since then: a Personalizer policy change retrains on the last two days,
   as Personalizer did);
3. installs it at that offset (:func:`service.personalizer.model_file.install_replayed`): if
   the trainer has published since, it first learns the events up to the new offset, and tries
   again; the trainer then learns what comes after from this model (exactly once: it rewinds
   to the offset, as it does after a reset or an import).

If the app's model is replaced meanwhile (reset, import, another policy) or its policy
changes, nothing is installed and the job says so (``installed: false``): the newer choice
wins. Events the replay refuses (as the trainer would) are counted, not fatal. Refits of the
replayed learner run inline, as in process; the trainer's run in its refit thread, so the two
models can differ in when a refit came, not in what they learned.

Submitted natively with ``POST /jobs/warm-start`` (``{"app": ..., "last": N}``: ``last`` bounds
the events replayed, as ``max_events``); the app's stream is read here, page by page, never
loaded whole.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from service import keys
from service.jobs.dataset import Dataset, DatasetError
from service.jobs.params import JobParams
from service.models import model_kind
from service.personalizer import model_file
from service.personalizer.logged import read_range
from service.redis_text import as_str

MAX_EVENTS = 10_000_000
#: installs tried before giving up (each after learning the events the trainer published since)
MAX_ATTEMPTS = 1_000
#: events learned per run (the trainer's default batch, ``Settings.trainer_batch``)
RUN = 500


class WarmStartParams(JobParams):
    """``model_id``: the model to replace (None: the app's model when the job starts);
    ``max_events``: the newest events replayed at most; ``since_ms``: only the events the
    stream took at or after this time (ms since the epoch: a stream entry's id is the time it
    was added, when its reward came or its deadline passed); None: no bound."""

    model_id: str | None = Field(default=None, max_length=64)
    max_events: int = Field(default=1_000_000, ge=1, le=MAX_EVENTS)
    since_ms: int | None = Field(default=None, ge=0)


def _later(low: str, since_ms: int | None) -> str:
    """The later of an XRANGE lower bound and ``since_ms``'s first entry id."""
    if since_ms is None:
        return low
    if low == "-":
        return f"{since_ms}-0"
    first = low.lstrip("(")
    return low if tuple(map(int, first.split("-"))) >= (since_ms, 0) else f"{since_ms}-0"


def _start(client, app: str, offset: str, limit: int) -> str:
    """The XRANGE lower bound of the newest ``limit`` entries at or before ``offset`` (a
    stream no longer than ``limit`` is read from its start, not paged back through first)."""
    stream, high, seen, low = keys.stream(app), offset, 0, "-"
    if client.xlen(stream) <= limit:
        return "-"
    while seen < limit:
        page = client.xrevrange(stream, max=high, count=min(5_000, limit - seen))
        if not page:
            return "-"
        seen += len(page)
        low = as_str(page[-1][0])
        high = "(" + low
    return low


class _Replay:
    """The learner and what it has learned so far (the stream up to ``offset``)."""

    def __init__(self, config, learner):
        self.config, self.learner = config, learner
        self.kind = model_kind(config.policy_kind)
        self.learned = self.rejected = 0

    def events(self, client, app: str, low: str, high: str, progress, total: int):
        """Learn the reward events of ``[low, high]`` in runs of ``RUN`` (the trainer's
        batches; a refused event counted, as the trainer counts it)."""
        run = []
        for _, event in read_range(client, app, low, high):
            if event is not None:
                run.append(event)
            if len(run) == RUN:
                self._learn(run, progress, total)
                run = []
        self._learn(run, progress, total)

    def _learn(self, run: list, progress, total: int) -> None:
        def refused(_: int) -> None:
            self.rejected += 1

        self.learned += self.kind.learn_each(self.learner, run,
                                             lambda e: e.learned(self.config), refused)
        progress(min(0.99, (self.learned + self.rejected) / max(total, 1)),
                 f"{self.learned} events learned")


def run(params: WarmStartParams, dataset: Dataset, progress) -> dict[str, Any]:
    if dataset.app is None or dataset.store is None:
        raise DatasetError("a warm start runs on an app: give the app")
    client, app = dataset.store.redis, dataset.app
    config = dataset.store.require_app(app)
    if not model_kind(config.policy_kind).uses_actions:
        raise DatasetError(f"a {config.policy_kind!r} app has no policy to warm-start")
    token = model_file.model_id(client, app)  # (the model the job replaces)
    if params.model_id is not None and params.model_id != token:
        return {"installed": False, "reason": "the app's model was replaced before the job ran"}
    info = dataset.store.snapshot_info(app)
    offset = info.offset if info else "0-0"
    replay = _Replay(config, model_file.fresh(config.policy_kind, config.policy_params,
                                              config.action_ids))
    limit = params.max_events
    if dataset.source.get("type") == "events":  # (POST /jobs/warm-start {"app", "last"})
        limit = min(limit, int(dataset.source["last"]))
    low = _later(_start(client, app, offset, limit), params.since_ms)
    total = min(limit, int(client.xlen(keys.stream(app))))
    progress(0.0, f"replaying up to {total} events")
    for _ in range(MAX_ATTEMPTS):
        replay.events(client, app, low, offset, progress, total)
        if replay.learned == 0:  # (a fresh model again: nothing to install)
            status, said = "empty", "no logged event up to the served model's offset to learn"
            break
        status, said = model_file.install_replayed(client, app, replay.learner, {
            "kind": config.policy_kind, "params": config.policy_params, "model_id": token,
            "offset": offset, "learned": replay.learned, "rejected": replay.rejected})
        if status != "moved":
            break
        low, offset = "(" + offset, said  # the trainer published meanwhile: learn up to it
    else:
        raise DatasetError(f"the app's trainer kept publishing ahead of the replay "
                           f"({MAX_ATTEMPTS} tries): nothing installed")
    result = {"installed": status == "installed", "eventsLearned": replay.learned,
              "eventsRejected": replay.rejected, "policy": config.policy_kind}
    if status == "installed":
        result["offset"] = said
    else:
        result["reason"] = said
    progress(1.0, f"{'installed' if status == 'installed' else 'not installed'}: "
                  f"{replay.learned} events learned")
    return result

