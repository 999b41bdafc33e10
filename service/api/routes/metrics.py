"""/metrics: Prometheus text format.

Per-app gauges are read from Redis at scrape time, so every API process (replica or uvicorn
worker) reports the same values; request counters and latencies are per process.
"""

from __future__ import annotations

import time

from fastapi import APIRouter, Request, Response
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily

from service.store import Store

router = APIRouter(tags=["health"])

_APP_GAUGES = {
    "model_version": "version of the app's published model snapshot",
    "events_learned": "events the published snapshot has learned",
    "pending_decisions": "decisions waiting for a reward or their deadline",
    "trainer_lag": "events queued for learning but not in the published snapshot",
    "trainer_lag_seconds": "age of the oldest event not in the published snapshot",
}


class AppCollector:
    """Reads every app's status from Redis when Prometheus scrapes."""

    def __init__(self, store: Store):
        self.store = store

    def collect(self):
        families = {
            name: GaugeMetricFamily(f"grove_app_{name}", doc, labels=["app"])
            for name, doc in _APP_GAUGES.items()
        }
        for config in self.store.list_apps():
            status = self.store.app_status(config.name)
            for name, family in families.items():
                family.add_metric([config.name], float(status[name]))
        yield from families.values()


class Metrics:
    """The process's registry: request counts and latencies, plus the per-app collector."""

    def __init__(self, store: Store):
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "grove_http_requests", "HTTP requests", ["route", "status"], registry=self.registry
        )
        self.latency = Histogram(
            "grove_http_request_seconds",
            "HTTP request latency",
            ["route"],
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=self.registry,
        )
        self.registry.register(AppCollector(store))


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
                metrics.latency.labels(path).observe(time.perf_counter() - start)
                metrics.requests.labels(path, str(status)).inc()


@router.get("/metrics", include_in_schema=False)
def metrics(request: Request) -> Response:
    registry = request.app.state.metrics.registry
    return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
