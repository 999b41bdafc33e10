"""The fast path of ``POST /apps/{app}/decide`` and ``/reward``: the same route functions,
called without FastAPI's per-request machinery.

Profiled under wrk, FastAPI's routing, dependency resolution and body handling cost an API
process more CPU per decide than the decide itself (the use case, its Redis script and the
model; see bench/http/README.md). :class:`FastRoutes` sits in front of the app
(:class:`GroveAPI`) and serves the two routes of the online loop directly: it matches the
path, reads the body (within ``GROVE_MAX_BODY``), validates it with the route's own pydantic
model, builds the route's own dependencies (:class:`service.api.usecases.Caller`, the
process's :class:`~service.api.usecases.Services`), awaits the route function of
:mod:`service.api.routes.decisions`, sends its answer and counts it in the metrics as the
metrics middleware would.

Anything unusual goes to the app's stack unchanged, with the body it has read, so that every
error answer stays the app's own: a body over the limit (its 413), a malformed or invalid body,
a missing or non-Bearer key, an app name outside the pattern, another method. Errors of the use
case (401/403/404/409/422, Redis unavailable, ...) are answered by the app's registered
exception handlers, as FastAPI would.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ValidationError
from starlette._exception_handler import _lookup_exception_handler
from starlette.requests import Request

from service.api.routes import decisions
from service.api.schemas import APP_NAME, DecideRequest, RewardRequest
from service.api.usecases import Caller

#: operation -> (body model, route function); the route's template, for metrics
_ROUTES: dict[str, tuple[type[BaseModel], Callable[..., Awaitable[Any]], str]] = {
    "decide": (DecideRequest, decisions.decide, "/apps/{app}/decide"),
    "reward": (RewardRequest, decisions.reward, "/apps/{app}/reward"),
}
_PATH = re.compile(r"^/apps/([^/]+)/(decide|reward)$")
_APP = re.compile(APP_NAME)


def _bearer(scope: dict, limit: int) -> str | None:
    """The Bearer key of the request; None without one or with a declared body over ``limit``
    (the stack refuses it, 413, before reading it)."""
    key = None
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").partition(" ")
            key = key.strip() or None if scheme.lower() == "bearer" else None
        elif name == b"content-length" and (not value.isdigit() or int(value) > limit):
            return None
    return key


@dataclass(frozen=True)
class _Served:
    """What ``scope["route"]`` says of a request served here: its route template (the metrics
    middleware labels requests by it, as it does FastAPI's routes)."""

    path: str


class GroveAPI(FastAPI):
    """FastAPI with :class:`FastRoutes` in front of it (see the module doc): the two routes it
    serves skip FastAPI's and Starlette's entry (and FastAPI's OpenTelemetry hooks, when a
    provider is configured; Grove's own ``/metrics`` count them); the rest goes to FastAPI."""

    _fast: FastRoutes | None = None

    async def __call__(self, scope, receive, send):
        if self._fast is None:
            self._fast = FastRoutes(super().__call__, self)
        await self._fast(scope, receive, send)


class FastRoutes:
    """Serves decide and reward before the app's stack (see the module doc)."""

    def __init__(self, stack, api: FastAPI) -> None:
        self.stack = stack  # the app as FastAPI serves it
        self.api = api

    async def __call__(self, scope, receive, send):
        match = None
        if scope["type"] == "http" and scope["method"] == "POST":
            match = _PATH.match(scope["path"])
        limit = self.api.state.settings.max_body if match else 0
        key = _bearer(scope, limit) if match else None
        if match is None or key is None or not _APP.match(match.group(1)):
            return await self.stack(scope, receive, send)
        start = time.perf_counter()
        chunks, seen = [], 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return None
            chunks.append(message)
            seen += len(message.get("body", b""))
            if seen > limit:  # the stack's body limit refuses it
                return await self.stack(scope, _replay(chunks, receive), send)
            if not message.get("more_body", False):
                break
        body = b"".join(m.get("body", b"") for m in chunks)
        model, route, template = _ROUTES[match.group(2)]
        try:
            parsed = model.model_validate_json(body)
        except ValidationError:  # FastAPI answers it, in its own words
            return await self.stack(scope, _replay(chunks, receive), send)
        api = self.api
        scope["app"] = api
        scope["route"] = _Served(template)
        scope["path_params"] = {"app": match.group(1)}
        try:
            response = await route(parsed, Caller(key, match.group(1)), api.state.services)
        except Exception as exc:
            handler = _lookup_exception_handler(api.exception_handlers, exc)
            if handler is None:
                raise
            response = await handler(Request(scope, receive), exc)
        await response(scope, receive, send)
        metrics = getattr(api.state, "metrics", None)
        if metrics is not None:
            metrics.note(template, response.status_code, time.perf_counter() - start)
        return None


def _replay(messages: list[dict], receive):
    """``receive`` that first gives back the messages already read."""
    pending = list(messages)

    async def replayed():
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
