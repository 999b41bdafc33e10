"""The fast path of ``POST /apps/{app}/decide`` and ``/reward``, and of Personalizer's
``/rank`` and ``/events/{eventId}/reward`` (single- and multi-slot): the same route functions,
called without FastAPI's per-request machinery.

Profiled under wrk, FastAPI's routing, dependency resolution and body handling cost an API
process more CPU per decide than the decide itself (the use case, its Redis script and the
model; see bench/http/README.md). :class:`FastRoutes` sits in front of the app
(:class:`GroveAPI`) and serves the two routes of the online loop directly: it matches the
path, reads the body (within ``GROVE_MAX_BODY``), validates it with the route's own pydantic
model, builds the route's own dependencies (:class:`service.api.usecases.Caller`, the
process's :class:`~service.api.usecases.Services`), awaits the route function of
:mod:`service.api.routes.decisions` (or :mod:`service.api.routes.personalizer`: its key in
``Ocp-Apim-Subscription-Key`` or as a Bearer, its answer through the route's response model, as
FastAPI would), sends its answer and counts it in the metrics as the metrics middleware would.
Personalizer's paths are taken in both styles (``/personalizer/v1.0/rank``, and
``/personalizer/rank`` with no query or ``?api-version=`` the newest version): the rest, an
unknown version among them, goes to the stack's :class:`~service.personalizer.versions
.PersonalizerPaths`.

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
from starlette.responses import JSONResponse

from service.api.routes import decisions, personalizer
from service.api.schemas import APP_NAME, EVENT_ID, DecideRequest, RewardRequest
from service.api.usecases import Caller
from service.personalizer.slots import MULTI_SLOT_EVENT_ID
from service.personalizer.versions import NEWEST, PATH_VERSION


@dataclass(frozen=True)
class _Route:
    """A route served here: its body model, its function, its template (for metrics), the
    response model its answer goes through (None: the function answers a Response) and the
    path parameters the function takes before the body."""

    body: type[BaseModel]
    call: Callable[..., Awaitable[Any]]
    template: str
    answer: type[BaseModel] | None = None
    status: int = 200
    path_args: tuple[str, ...] = ()


_ROUTES = {
    "decide": _Route(DecideRequest, decisions.decide, "/apps/{app}/decide"),
    "reward": _Route(RewardRequest, decisions.reward, "/apps/{app}/reward"),
    "rank": _Route(personalizer.RankRequest, personalizer.rank, "/personalizer/rank",
                   personalizer.RankResponse, 201),
    "events": _Route(personalizer.RewardRequest, personalizer.reward,
                     "/personalizer/events/{eventId}/reward", path_args=("eventId",)),
    "multislot/rank": _Route(personalizer.MultiSlotRankRequest, personalizer.rank_multi_slot,
                             "/personalizer/multislot/rank", personalizer.MultiSlotRankResponse,
                             201),
    "multislot/events": _Route(personalizer.MultiSlotRewardRequest,
                               personalizer.reward_multi_slot,
                               "/personalizer/multislot/events/{eventId}/reward",
                               path_args=("eventId",)),
}
_PATH = re.compile(r"^/apps/([^/]+)/(decide|reward)$")
_APP = re.compile(APP_NAME)
_PERSONALIZER = re.compile(
    rf"^/personalizer(?:/({PATH_VERSION}))?/(multislot/)?(?:(rank)|events/([^/]+)/reward)$")
#: the eventIds each family's routes take (the stack answers the others)
_EVENT_IDS = {"": re.compile(EVENT_ID), "multislot/": re.compile(MULTI_SLOT_EVENT_ID)}
#: the query strings of a Personalizer request served here (anything else: the stack's checks)
_QUERIES = (b"", f"api-version={NEWEST}".encode())


def _keys(scope: dict, limit: int) -> tuple[str | None, str | None, bool]:
    """The request's Bearer key, its ``Ocp-Apim-Subscription-Key``, and whether its declared
    body is within ``limit`` (over it the stack refuses it, 413, before reading it)."""
    bearer = subscription = None
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").partition(" ")
            bearer = key.strip() or None if scheme.lower() == "bearer" else None
        elif name == b"ocp-apim-subscription-key":
            subscription = value.decode("latin-1") or None
        elif name == b"content-length" and (not value.isdigit() or int(value) > limit):
            return None, None, False
    return bearer, subscription, True


def _match(scope: dict, limit: int) -> tuple[_Route, Caller, dict] | None:
    """The route, caller and path parameters of a request served here; None: the stack's."""
    if scope["type"] != "http" or scope["method"] != "POST":
        return None
    path = scope["path"]
    native = _PATH.match(path)
    if native is not None:
        bearer, _, within = _keys(scope, limit)
        if bearer is None or not within or not _APP.match(native.group(1)):
            return None
        return _ROUTES[native.group(2)], Caller(bearer, native.group(1)), {"app": native.group(1)}
    found = _PERSONALIZER.match(path) if path.startswith("/personalizer/") else None
    if found is None:
        return None
    version, family, rank, event_id = found.groups()
    family = family or ""
    if version is None and scope.get("query_string", b"") not in _QUERIES:
        return None
    if event_id is not None and not _EVENT_IDS[family].match(event_id):
        return None
    bearer, subscription, within = _keys(scope, limit)
    key = subscription or bearer
    if key is None or not within:
        return None
    # as PersonalizerPaths leaves it (the routes' version_of reads it)
    scope["state"] = {**scope.get("state", {}), "personalizer_version": version or NEWEST}
    if rank:
        return _ROUTES[family + "rank"], Caller(key, app=None), {}
    return _ROUTES[family + "events"], Caller(key, app=None), {"eventId": event_id}


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
        limit = self.api.state.settings.max_body
        served = _match(scope, limit)
        if served is None:
            return await self.stack(scope, receive, send)
        route, caller, path_params = served
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
        try:
            parsed = route.body.model_validate_json(body)
        except ValidationError:  # FastAPI answers it, in its own words
            return await self.stack(scope, _replay(chunks, receive), send)
        api = self.api
        scope["app"] = api
        scope["route"] = _Served(route.template)
        scope["path_params"] = path_params
        try:
            response = await route.call(*(path_params[n] for n in route.path_args), parsed,
                                        caller, api.state.services)
            if route.answer is not None:  # (the route's response model, as FastAPI applies it)
                response = JSONResponse(route.answer.model_validate(response).model_dump(
                    mode="json"), status_code=route.status)
        except Exception as exc:
            handler = _lookup_exception_handler(api.exception_handlers, exc)
            if handler is None:
                raise
            response = await handler(Request(scope, receive), exc)
        await response(scope, receive, send)
        metrics = getattr(api.state, "metrics", None)
        if metrics is not None:
            metrics.note(route.template, response.status_code, time.perf_counter() - start)
        return None


def _replay(messages: list[dict], receive):
    """``receive`` that first gives back the messages already read."""
    pending = list(messages)

    async def replayed():
        if pending:
            return pending.pop(0)
        return await receive()

    return replayed
