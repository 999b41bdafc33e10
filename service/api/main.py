"""The FastAPI application: opens Redis in the lifespan and includes one router per resource.

``uvicorn service.api.main:create_app --factory`` runs it with settings from the environment.
"""

from __future__ import annotations

import gc
from contextlib import asynccontextmanager

from fastapi import FastAPI

from service.api import errors
from service.api.fast import GroveAPI
from service.api.limits import BodyLimitMiddleware
from service.api.model_cache import ModelCache
from service.api.routes import (
    apps,
    decisions,
    evaluations,
    health,
    jobs,
    metrics,
    personalizer,
    predictions,
)
from service.api.usecases import Services
from service.models import warm_up
from service.personalizer.versions import MODEL_PATHS
from service.redis_client import connect, connect_async, connect_scripts
from service.settings import Settings, get_settings
from service.store import Store

_frozen = False


def _freeze_startup_objects() -> None:
    """Warm the kinds up, then keep what startup built out of every later garbage collection.

    An API process holds ~260,000 objects from its imports (FastAPI, pydantic, numpy, numba,
    ...), none of them ever garbage, and its first decides imported ~50,000 more (the
    compiler's registries). Those imports under load set off full collections, each walking
    every object with every request of the process waiting: 2-3 per 15 s of load at 116-364 ms
    each (``python -m bench.http.gc``), the p99 of the HTTP benchmark. The warm-up (each
    deciding kind builds a tiny model and decides once) moves those imports to startup, and
    ``gc.freeze`` keeps startup's objects out of every later collection, so that one that does
    come walks what requests allocate only (frozen objects are still freed when nothing refers
    to them). Once per process.
    """
    global _frozen
    if _frozen:  # once per process (tests build many apps in one process)
        return
    warm_up()
    gc.collect()
    gc.freeze()
    _frozen = True


def create_app(settings: Settings | None = None) -> FastAPI:
    """The API; ``settings`` (tests) replaces the environment's for every dependency."""
    chosen = settings or get_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        client = connect(chosen)  # lazy: no connection until the first request
        # the request path's client (decide, reward, ...: no thread); the sync one serves the
        # admin routes, which run in worker threads
        aio = connect_async(chosen)
        pipe = connect_scripts(chosen, aio)  # decide, reward, ...: one pipelined connection
        app.state.store = Store(client, chosen, aio=aio, aio_scripts=pipe)
        app.state.models = ModelCache()
        app.state.metrics = metrics.Metrics(app.state.store)
        app.state.services = Services(app.state.store, app.state.models, chosen)
        _freeze_startup_objects()
        yield
        client.close()
        await aio.aclose()
        if pipe is not None:
            await pipe.aclose()

    app = GroveAPI(
        title="Grove",
        summary="Online-learning decisions for ad serving (Bandit Forest), state in Redis.",
        version="0.1.0",
        lifespan=lifespan,
    )
    # read by deps.settings (not a dependency override: FastAPI re-analyses every dependency
    # of every request while any override is set, which costs more than the whole decide)
    app.state.settings = chosen
    errors.install(app)
    app.include_router(health.router)
    app.include_router(apps.router)
    app.include_router(decisions.router)
    app.include_router(predictions.router)
    app.include_router(evaluations.router)
    app.include_router(metrics.router)
    app.include_router(jobs.router)
    personalizer.install(app)  # its routers, both path styles, 501 for the rest
    # innermost: what no handler answered becomes a JSON 500 here, counted by the metrics
    app.add_middleware(errors.AnswerFailures)
    app.add_middleware(metrics.MetricsMiddleware)
    # added last: the outermost, so an oversized body is refused before anything else runs
    app.add_middleware(
        BodyLimitMiddleware,
        limit=chosen.max_body,
        wide_limit=chosen.job_max_upload + 64 * 1024,  # the jobs route counts the file itself
        wide_prefixes=("/jobs", *MODEL_PATHS),  # uploads and Personalizer model imports
    )

    return app
