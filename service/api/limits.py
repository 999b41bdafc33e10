"""Request body limit: a pure ASGI middleware that counts the bytes it passes on.

A declared ``Content-Length`` over the limit is refused before anything is read; a chunked body
(no length) is counted as it arrives and refused at the first chunk past the limit, so a client
cannot make a process buffer more than the limit. The answer is 413 with a JSON ``detail``.
"""

from __future__ import annotations

import json

from fastapi import HTTPException


class BodyTooLarge(HTTPException):
    """Raised from ``receive``: an HTTPException, so FastAPI's body reading lets it through
    (it turns other errors into 400) and the app's handler answers 413."""

    def __init__(self, limit: int, setting: str):
        super().__init__(413, f"request body over the limit of {limit} bytes ({setting})")


class BodyLimitMiddleware:
    """Refuses bodies over ``limit`` bytes (``wide_limit`` under ``wide_prefixes``: uploads)."""

    def __init__(self, app, limit: int, wide_limit: int | None = None, wide_prefixes=()):
        self.app = app
        self.limit = limit
        self.wide_limit = wide_limit if wide_limit is not None else limit
        self.wide_prefixes = tuple(wide_prefixes)

    def _limit(self, path: str) -> tuple[int, str]:
        if self.wide_prefixes and path.startswith(self.wide_prefixes):
            return self.wide_limit, "GROVE_JOB_MAX_UPLOAD"
        return self.limit, "GROVE_MAX_BODY"

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit, setting = self._limit(scope.get("path", ""))
        for name, value in scope.get("headers", ()):
            if name == b"content-length":
                if not value.isdigit() or int(value) > limit:
                    return await _refuse(send, limit, setting)
                break
        seen = 0
        started = False

        async def counting_receive():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit, setting)
            return message

        async def noting_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, noting_send)
        except BodyTooLarge:
            if not started:  # else the answer is under way: the connection just ends
                await _refuse(send, limit, setting)


async def _refuse(send, limit: int, setting: str) -> None:
    body = json.dumps(
        {"detail": f"request body over the limit of {limit} bytes ({setting})"}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
