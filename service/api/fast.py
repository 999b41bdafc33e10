"""The fast path of ``POST /apps/{app}/decide`` and ``/reward``: the same route functions,
called without FastAPI's per-request machinery.

Profiled under wrk, FastAPI's routing, dependency resolution and body handling cost an API
process more CPU per decide than the decide itself (the use case, its Redis script and the
model; see bench/http/README.md). This ASGI middleware serves the two routes of the online
loop directly: it matches the path, reads the body, validates it with the route's own pydantic
model, builds the route's own dependencies (:class:`service.api.usecases.Caller`, the
process's :class:`~service.api.usecases.Services`) and awaits the route function of
:mod:`service.api.routes.decisions`, whose answer it sends.

Anything unusual goes to FastAPI unchanged, with the body it has read, so that every error
answer stays FastAPI's own: a malformed or invalid body, a missing or non-Bearer key, an app
name outside the pattern, another method. Errors of the use case (401/403/404/409/422, Redis
unavailable, ...) are answered by the app's registered exception handlers, as FastAPI would.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

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


def _bearer(scope: dict) -> str | None:
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").partition(" ")
            return key.strip() or None if scheme.lower() == "bearer" else None
    return None


@dataclass(frozen=True)
class _Served:
    """What ``scope["route"]`` says of a request served here: its route template (the metrics
    middleware labels requests by it, as it does FastAPI's routes)."""

    path: str


class FastRoutes:
    """Serves decide and reward before FastAPI's router (see the module doc)."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send):
        match = None
        if scope["type"] == "http" and scope["method"] == "POST":
            match = _PATH.match(scope["path"])
        key = _bearer(scope) if match else None
        if match is None or key is None or not _APP.match(match.group(1)):
            return await self.app(scope, receive, send)
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return None
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        model, route, template = _ROUTES[match.group(2)]
        try:
            parsed = model.model_validate_json(body)
        except ValidationError:  # FastAPI answers it, in its own words
            return await self.app(scope, _replay(body, receive), send)
        app = scope["app"]
        scope["route"] = _Served(template)
        scope["path_params"] = {"app": match.group(1)}
        try:
            response = await route(parsed, Caller(key, match.group(1)), app.state.services)
        except Exception as exc:
            handler = _lookup_exception_handler(app.exception_handlers, exc)
            if handler is None:
                raise
            response = await handler(Request(scope, receive), exc)
        await response(scope, receive, send)
        return None


def _replay(body: bytes, receive):
    """``receive`` that first gives back the body already read."""
    given = False

    async def replayed():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
