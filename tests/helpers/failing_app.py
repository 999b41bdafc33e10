"""A FastAPI app with Grove's error layer (``service.api.errors``) and a route that fails as no
handler expects: what the keep-alive test serves with real uvicorn, since none of Grove's own
routes is known to fail (each failure found was fixed)."""

from __future__ import annotations

from fastapi import FastAPI

from service.api import errors


def _app(answer_failures: bool) -> FastAPI:
    app = FastAPI()
    errors.install(app)
    if answer_failures:
        app.add_middleware(errors.AnswerFailures)

    @app.get("/healthz")
    def healthz() -> dict:
        return {"ok": True}

    @app.get("/boom")
    def boom() -> dict:
        raise RuntimeError("a bug of Grove's own")

    return app


def with_answer_failures() -> FastAPI:
    """Grove's way (``service.api.main`` adds the middleware)."""
    return _app(True)


def without_answer_failures() -> FastAPI:
    """Starlette's outermost layer alone: it answers, then raises to the server."""
    return _app(False)
