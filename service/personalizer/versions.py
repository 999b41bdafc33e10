"""Personalizer's two path styles, served by one set of routes under ``/personalizer``.

- v1.0 and v1.1-preview put the version in the path: ``/personalizer/v1.0/rank``,
  ``/personalizer/v1.1-preview.3/multislot/rank``;
- 2022-09-01-preview (``azure-ai-personalizer`` 1.0.0b1, the current SDK) puts it in the query:
  ``/personalizer/rank?api-version=2022-09-01-preview``.

:class:`PersonalizerPaths` (a pure ASGI middleware) rewrites the first style into the second
before routing and leaves the version in ``request.state.personalizer_version``, so every
operation has one route and one implementation. Where the versions' shapes differ (listing
evaluations: a bare array before 2022-09-01-preview, ``{"value": [...]}`` since) the route asks
:func:`version_of`. An ``api-version`` Grove does not know is a 400 naming the ones it serves; a
request without one is taken as the newest (Personalizer required it; Grove is lenient); an
empty one (``?api-version=``) is one Grove does not know, and one given twice with different
values is a 400 too (which one the client meant, only it knows).
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs

from fastapi import Request

from service.personalizer.errors import error_body

PREFIX = "/personalizer"
#: the path versions (v1.1-preview with or without its ".N"), a pattern (the fast path's too)
PATH_VERSION = r"v1\.0|v1\.1-preview(?:\.[0-9]+)?"
_IN_PATH = re.compile(rf"^/personalizer/({PATH_VERSION})(/.*)?$")
#: the query versions Grove serves
QUERY_VERSIONS = ("2022-09-01-preview",)
NEWEST = QUERY_VERSIONS[0]


def version_of(request: Request) -> str:
    """``v1.0``, ``v1.1-preview[.N]`` or ``2022-09-01-preview``: the version the client speaks."""
    return getattr(request.state, "personalizer_version", NEWEST)


def legacy_shapes(request: Request) -> bool:
    """Whether the client speaks a path version (v1.0, v1.1-preview): bare-array lists."""
    return version_of(request).startswith("v1.")


async def _refuse(send, status: int, message: str) -> None:
    status, body = error_body(status, message)
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class PersonalizerPaths:
    """Rewrites ``/personalizer/<path version>/x`` to ``/personalizer/x`` and checks
    ``api-version`` on ``/personalizer/x``; other paths pass untouched."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not (path == PREFIX or path.startswith(PREFIX + "/")):
            return await self.app(scope, receive, send)
        match = _IN_PATH.match(path)
        if match:
            version, rest = match.group(1), match.group(2) or ""
            # in place: outer middlewares (metrics) read the route Starlette sets on this scope
            scope["path"], scope["raw_path"] = PREFIX + rest, (PREFIX + rest).encode()
        else:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"),
                             keep_blank_values=True)
            given = set(query.get("api-version", [NEWEST]))
            if len(given) > 1:
                return await _refuse(send, 400, f"api-version has {len(given)} different values "
                                     f"({', '.join(sorted(map(repr, given)))}): give it once")
            version = given.pop()
            if version not in QUERY_VERSIONS:
                return await _refuse(
                    send,
                    400,
                    f"api-version {version!r} is not served: Grove serves "
                    f"{', '.join(QUERY_VERSIONS)} in the query, and v1.0 and v1.1-preview[.N] "
                    "in the path (/personalizer/v1.0/...)",
                )
        scope["state"] = {**scope.get("state", {}), "personalizer_version": version}
        return await self.app(scope, receive, send)


#: the model-file route under every path style: a model import may be larger than an ordinary
#: request body (the API's body limit lets these paths take as much as a job upload)
MODEL_PATHS = tuple(
    f"{PREFIX}{version}/model"
    for version in ("", "/v1.0", "/v1.1-preview", "/v1.1-preview.1", "/v1.1-preview.2",
                    "/v1.1-preview.3")
)
