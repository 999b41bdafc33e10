"""Personalizer's error answers: ``{"error": {"code", "message"}}`` with Personalizer's codes.

Personalizer answered every 4xx of a malformed request with **400** and a code from its
``PersonalizerErrorCode`` list (``BadRequest``, ``InvalidRewardRequest``, ...); the SDKs turn
401 into ``ClientAuthenticationError``, 404 into ``ResourceNotFoundError``, 409 into
``ResourceExistsError`` and anything else into ``HttpResponseError`` carrying the code. So on
the ``/personalizer`` routes Grove answers 400 where its own routes answer 422, and a route can
raise :class:`PersonalizerError` to give the specific code.

Grove's own code ``UnsupportedOperation`` (status 501, which azure-core does not retry) marks a
route Grove does not serve, so that a client can tell it from a missing resource (404
``ResourceNotFound``, ``EvaluationNotFound``, ...).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import HTTPException

#: the default code of each status (Personalizer's names; 501 is Grove's own)
CODES = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "PermissionDenied",
    404: "ResourceNotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    413: "PayloadSizeExceeded",
    501: "UnsupportedOperation",
    503: "ServiceUnavailable",
}


class PersonalizerError(HTTPException):
    """An error with a Personalizer code (``InvalidRewardRequest``, ``EvaluationNotFound``...)."""

    def __init__(self, status: int, code: str, message: str, headers: dict | None = None):
        super().__init__(status, message, headers=headers)
        self.personalizer_code = code


def bad_request(message: str, code: str = "BadRequest") -> PersonalizerError:
    return PersonalizerError(400, code, message)


def _message(detail: Any) -> str:
    """A readable message; pydantic's error list becomes ``where: what; ...``."""
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list) and all(isinstance(e, dict) and "msg" in e for e in detail):
        parts = []
        for error in detail:
            where = ".".join(str(p) for p in error.get("loc", ()) if p != "body")
            parts.append(f"{where}: {error['msg']}" if where else error["msg"])
        return "; ".join(parts)
    return json.dumps(detail, default=str)


def error_body(status: int, detail: Any, code: str | None = None) -> tuple[int, dict]:
    """The status and body Personalizer's clients expect for Grove's ``status`` and ``detail``.

    >>> error_body(422, [{"loc": ["body", "actions"], "msg": "Field required"}])
    (400, {'error': {'code': 'BadRequest', 'message': 'actions: Field required'}})
    >>> error_body(404, "eventId 'x' is unknown")[1]["error"]["code"]
    'ResourceNotFound'
    """
    if status == 422:
        status = 400
    if code is None:
        code = CODES.get(status, "InternalServerError" if status >= 500 else "BadRequest")
    return status, {"error": {"code": code, "message": _message(detail)}}
