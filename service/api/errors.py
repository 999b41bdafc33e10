"""Exceptions -> ``{"detail": ...}`` answers: 4xx for bad requests, 503 when Redis is away."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

import redis
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from redis.exceptions import RedisClusterException
from starlette.exceptions import HTTPException

from service.codec import CodecError
from service.personalizer.errors import error_body as personalizer_error
from service.redis_client import UNAVAILABLE
from service.store import StoreError

log = logging.getLogger("grove.api")


def _json_safe(value: Any) -> Any:
    """Validation errors echo the input, which may hold NaN/Infinity: JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


class _EchoSafeJSON(JSONResponse):
    """A JSON answer that may echo the request's text: a lone surrogate (JSON's ``\\ud800``
    escape) cannot be written as UTF-8, so such an answer is written with ASCII escapes."""

    def render(self, content: Any) -> bytes:
        try:
            return super().render(content)
        except UnicodeEncodeError:
            return json.dumps(content, ensure_ascii=True, allow_nan=False,
                              separators=(",", ":")).encode("ascii")


def answer(
    request: Request, status: int, detail: Any, headers=None, code: str | None = None
) -> JSONResponse:
    """``{"detail": ...}``, or Personalizer's ``{"error": {"code", "message"}}`` (and its 400
    for a malformed request) on its routes (:mod:`service.personalizer.errors`)."""
    detail = _json_safe(detail)
    if request.url.path.startswith("/personalizer"):
        status, body = personalizer_error(status, detail, code)
    else:
        body = {"detail": detail}
    return _EchoSafeJSON(body, status_code=status, headers=headers)


def install(app: FastAPI) -> None:
    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return answer(request, 422, jsonable_encoder(exc.errors()))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return answer(
            request,
            exc.status_code,
            exc.detail,
            getattr(exc, "headers", None),
            getattr(exc, "personalizer_code", None),
        )

    @app.exception_handler(StoreError)
    async def store_error(request: Request, exc: StoreError) -> JSONResponse:
        return answer(request, exc.status, exc.detail)

    @app.exception_handler(RedisClusterException)  # not a RedisError: e.g. no node answers
    @app.exception_handler(redis.RedisError)
    async def redis_error(request: Request, exc: Exception) -> JSONResponse:
        log.warning("Redis error on %s %s: %s", request.method, request.url.path, exc)
        if isinstance(exc, UNAVAILABLE):
            detail = f"Redis is unavailable ({exc}); the service recovers when it is back: retry"
        else:
            detail = f"Redis refused the operation ({type(exc).__name__}: {exc}); retry later"
        return answer(request, 503, detail, {"Retry-After": "1"})

    @app.exception_handler(CodecError)
    async def codec_error(request: Request, exc: CodecError) -> JSONResponse:
        log.error("unreadable model snapshot on %s: %s", request.url.path, exc)
        return answer(request, 503, f"the app's model snapshot cannot be read: {exc}")

    # what nothing above answers, on the fast path (FastRoutes looks handlers up here); the
    # others reach AnswerFailures
    app.exception_handler(Exception)(unhandled)


async def unhandled(request: Request, exc: Exception) -> JSONResponse:
    """A failure of Grove's own, not the request's: a JSON 500 that says so (Personalizer's
    shape on its routes: the SDKs raised a connection error on Starlette's plain text), logged
    with its traceback."""
    log.error("unhandled %s on %s %s", type(exc).__name__, request.method, request.url.path,
              exc_info=exc)
    return answer(request, 500, f"Grove failed on this request ({type(exc).__name__}); the "
                  "error is in its log")


class AnswerFailures:
    """ASGI middleware: an exception no handler answered gets :func:`unhandled`'s 500, and is
    not raised on. Starlette's outermost layer answers it too, but then raises it to the server,
    and uvicorn closes the connection: a client's next request on it was reset."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = False

        async def watched(message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            if started:  # (too late for an answer: the server ends the connection)
                raise
            response = await unhandled(Request(scope), exc)
            await response(scope, receive, send)
        return None
