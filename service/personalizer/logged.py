"""An app's logged events in a time window, for Personalizer's evaluations and importances.

The app's event stream (:func:`service.keys.stream`) is its log: each entry is a decision
joined with its reward, its id the time (unix ms) it was joined. Personalizer's windows are
times, so they map onto stream id bounds directly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import redis

from service import codec, keys
from service.records import AppConfig
from service.redis_text import as_str

_PAGE = 5_000


@dataclass(frozen=True)
class LoggedEvent:
    event_id: str
    time_ms: int
    context: dict[str, Any]
    action: str
    reward: float  # in the app's reward range
    probability: float  # the logged propensity
    # the actions the decision was drawn among, in the request's order (None: the app's own;
    # also for events logged before Grove recorded them)
    offered: tuple[str, ...] | None = None
    # the offered actions' features by id, when the request (or the app) gave any
    action_features: dict[str, dict[str, Any]] | None = None

    def features(self, config: AppConfig) -> dict[str, dict[str, Any]] | None:
        """The offered actions' features as the trainer learns them: the app's actions', and
        over them those the event's request gave (None: none)."""
        return {**(config.action_features or {}), **(self.action_features or {})} or None

    def learned(self, config: AppConfig) -> tuple:
        """The event as a kind's ``learn_run`` takes it, as the app's trainer hands it over:
        ``(context, action, reward rescaled into [0, 1], propensity, offer, features)``."""
        return (dict(self.context), self.action, config.rescale(self.reward), self.probability,
                self.offered, self.features(config))


def _logged(entry_id, fields: dict) -> LoggedEvent | None:
    """A stream entry as a :class:`LoggedEvent` (None: a labeled event, which has no action)."""
    f = {as_str(k): v for k, v in fields.items()}
    if "action" not in f:
        return None
    return LoggedEvent(
        event_id=as_str(f.get("eventId", b"")),
        time_ms=int(as_str(entry_id).split("-")[0]),
        context=codec.unpack(f["context"]) if "context" in f else {},
        action=as_str(f["action"]),
        reward=float(f["reward"]),
        probability=float(f["probability"]),
        offered=tuple(codec.unpack(f["offered"])) if "offered" in f else None,
        action_features=(codec.unpack(f["actionFeatures"])
                         if "actionFeatures" in f else None),
    )


def read_window(
    client: redis.Redis, app: str, start_ms: int, end_ms: int, limit: int
) -> Iterator[LoggedEvent]:
    """The reward events of ``app`` joined in ``[start_ms, end_ms]``, oldest first, at most
    ``limit`` (labeled events of supervised apps are skipped: they have no action)."""
    seen = 0
    for _, event in read_range(client, app, f"{start_ms}-0", str(end_ms)):
        if event is None:
            continue
        yield event
        seen += 1
        if seen >= limit:
            return


def read_range(
    client: redis.Redis, app: str, low: str, high: str
) -> Iterator[tuple[str, LoggedEvent | None]]:
    """Every entry of ``app``'s stream with an id in ``[low, high]`` (XRANGE's bounds: ``(`` for
    an exclusive one), oldest first, read a page at a time: its id and its event (None for a
    labeled event)."""
    while True:
        page = client.xrange(keys.stream(app), min=low, max=high, count=_PAGE)
        if not page:
            return
        for entry_id, fields in page:
            yield as_str(entry_id), _logged(entry_id, fields)
        low = "(" + as_str(page[-1][0])
