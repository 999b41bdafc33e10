"""/metrics: Prometheus text format.

Per-app figures are read from Redis at scrape time, so every API process (replica or uvicorn
worker) reports the same values: decisions, rewards, default rewards and drops (counters of the
app's stats hash), model version, events learned, pending decisions, trainer lag (events and
seconds), the trainer's learning rate (events/s between two scrapes of this process), snapshot
size and age. Request counters, errors by status and latencies are per process.
"""

from __future__ import annotations

import threading
import time

from fastapi import APIRouter, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from service.store import Store

router = APIRouter(tags=["health"])

_APP_GAUGES = {
    "model_version": "version of the app's published model snapshot",
    "pending_decisions": "decisions waiting for a reward or their deadline",
    "trainer_lag": "events queued for learning but not in the published snapshot",
    "trainer_lag_seconds": "age of the oldest event not in the published snapshot",
}
#: counters of the app's stats hash (service.keys.stats) -> metric name, help
_APP_COUNTERS = {
    "decisions": ("decisions", "decisions recorded"),
    "rewarded": ("rewards", "decisions joined with a reward from the client"),
    "defaulted": ("default_rewards", "decisions learned with the app's defaultReward"),
    "dropped": ("dropped_decisions", "deferred decisions never activated"),
    "switches": ("policy_switches", "serving-candidate switches of an auto app (new versions)"),
    "unmatched": ("unmatched_rewards",
                  "rewards for an eventId unknown or past its wait (ignored, not learned)"),
    "apprenticeDecisions": ("apprentice_decisions",
                            "Personalizer Apprentice-mode ranks (the baseline answered)"),
    "apprenticeMatches": ("apprentice_matches",
                          "Apprentice-mode ranks whose model draw was the baseline"),
}
#: routes whose latency is a decide or a reward (also in the per-route histogram)
_OPERATIONS = {
    "/apps/{app}/decide": "decide",
    "/apps/{app}/decide/batch": "decide_batch",
    "/personalizer/rank": "decide",
    "/apps/{app}/reward": "reward",
    "/personalizer/events/{eventId}/reward": "reward",
}
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)


class AppCollector:
    """Reads every app's status from Redis when Prometheus scrapes."""

    def __init__(self, store: Store):
        self.store = store
        self._last: dict[str, tuple[float, int]] = {}  # app -> (time, events learned)
        self._lock = threading.Lock()

    def _rate(self, name: str, learned: int) -> float:
        now = time.monotonic()
        with self._lock:
            before = self._last.get(name)
            self._last[name] = (now, learned)
        if before is None or now <= before[0] or learned < before[1]:
            return 0.0
        return (learned - before[1]) / (now - before[0])

    def collect(self):
        gauges = {
            name: GaugeMetricFamily(f"grove_app_{name}", doc, labels=["app"])
            for name, doc in _APP_GAUGES.items()
        }
        counters = {
            field: CounterMetricFamily(f"grove_app_{name}", doc, labels=["app"])
            for field, (name, doc) in _APP_COUNTERS.items()
        }
        learned = CounterMetricFamily(
            "grove_app_events_learned", "events the published snapshot has learned", labels=["app"]
        )
        rate = GaugeMetricFamily(
            "grove_app_trainer_events_per_second",
            "events learned per second between this process's last two scrapes",
            labels=["app"],
        )
        age = GaugeMetricFamily(
            "grove_app_snapshot_age_seconds",
            "seconds since the snapshot was published",
            labels=["app"],
        )
        size = GaugeMetricFamily(
            "grove_app_snapshot_bytes", "encoded snapshot size", labels=["app", "part"]
        )
        for config in self.store.list_apps():
            name = config.name
            status = self.store.app_status(name)
            for key, family in gauges.items():
                family.add_metric([name], float(status[key]))
            for field, family in counters.items():
                family.add_metric([name], float(status["stats"].get(field, 0)))
            learned.add_metric([name], float(status["events_learned"]))
            rate.add_metric([name], self._rate(name, status["events_learned"]))
            if status["snapshot_age"] is not None:
                age.add_metric([name], float(status["snapshot_age"]))
            state, serving = self.store.snapshot_sizes(name)
            size.add_metric([name, "state"], float(state))
            size.add_metric([name, "serving"], float(serving))
        yield from gauges.values()
        yield from counters.values()
        yield from (learned, rate, age, size)


class Metrics:
    """The process's registry: request counts, errors and latencies, plus the app collector."""

    def __init__(self, store: Store):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "grove_http_requests", "HTTP requests", ["route", "status"], registry=self.registry
        )
        self.errors = Counter(
            "grove_http_errors",
            "HTTP answers with status >= 400, by status",
            ["status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "grove_http_request_seconds",
            "HTTP request latency",
            ["route"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.operations = Histogram(
            "grove_operation_seconds",
            "latency of decide (decide, rank), decide_batch and reward calls, from the API's side",
            ["operation"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(AppCollector(store))
        self._children: dict[tuple[str, int], tuple] = {}

    def note(self, path: str, status: int, elapsed: float) -> None:
        """One answered request: its route template, status and seconds."""
        children = self._children.get((path, status))
        if children is None:  # labelled children, looked up once per (route, status)
            operation = _OPERATIONS.get(path)
            children = self._children[(path, status)] = (
                self.latency.labels(path),
                self.requests.labels(path, str(status)),
                self.errors.labels(str(status)) if status >= 400 else None,
                self.operations.labels(operation)
                if operation is not None and status < 400 else None,
            )
        latency, requests, errors, operation = children
        latency.observe(elapsed)
        requests.inc()
        if errors is not None:
            errors.inc()
        if operation is not None:
            operation.observe(elapsed)


class MetricsMiddleware:
    """Pure ASGI middleware (no extra task per request): counts and times every request."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        start, status = time.perf_counter(), 500

        async def send_and_note(message):
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            metrics = getattr(scope["app"].state, "metrics", None)
            if metrics is not None:
                # the route template (/apps/{app}/decide), set in this scope by the router
                path = getattr(scope.get("route"), "path", "unmatched")
                metrics.note(path, status, time.perf_counter() - start)


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    registry = request.app.state.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
