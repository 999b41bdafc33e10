"""Exceptions -> ``{"detail": ...}`` answers: 4xx for bad requests, 503 when Redis is away."""

from __future__ import annotations

import logging

import redis
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from service.codec import CodecError
from service.store import StoreError

log = logging.getLogger("grove.api")


def install(app: FastAPI) -> None:
    @app.exception_handler(StoreError)
    async def store_error(request: Request, exc: StoreError) -> JSONResponse:
        return JSONResponse({"detail": exc.detail}, status_code=exc.status)

    @app.exception_handler(redis.RedisError)
    async def redis_error(request: Request, exc: redis.RedisError) -> JSONResponse:
        log.warning("Redis error on %s %s: %s", request.method, request.url.path, exc)
        return JSONResponse(
            {"detail": f"storage unavailable: Redis did not answer ({type(exc).__name__}: {exc}); "
                       "retry shortly"},
            status_code=503,
            headers={"Retry-After": "1"},
        )

    @app.exception_handler(CodecError)
    async def codec_error(request: Request, exc: CodecError) -> JSONResponse:
        log.error("unreadable model snapshot on %s: %s", request.url.path, exc)
        return JSONResponse({"detail": f"the app's model snapshot cannot be read: {exc}"},
                            status_code=503)
