"""/jobs: submit a batch job on an uploaded table or on an app's logged events, follow it,
fetch its result, cancel it.

Access: the admin key, or the API key of the app the job reads (``app``). A job on an upload
without ``app`` is the admin's alone.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.formparsers import MultiPartException, MultiPartParser

from service.api.auth import authorized, hash_key, is_admin, same_key
from service.api.deps import AdminDep, BearerDep, SettingsDep, StoreDep, presented_key
from service.api.schemas import APP_NAME
from service.feature_checks import check_json_text
from service.jobs.dataset import FORMATS, event_count, guess_format
from service.jobs.kinds import KINDS, job_kind
from service.jobs.queue import JobQueue
from service.jobs.records import JobRecord
from service.redis_client import connect_jobs
from service.settings import Settings
from service.store import Store

router = APIRouter(prefix="/jobs", tags=["jobs"])

#: room for the multipart envelope (boundaries, headers, the params field) around the file
_MULTIPART_SLACK = 1 << 20


async def get_jobs(request: Request) -> JobQueue:
    jobs = getattr(request.app.state, "jobs", None)
    if jobs is None:
        store = request.app.state.store
        # the job queue's own Redis (GROVE_JOB_REDIS_URL), or REDIS_URL's when it is not a cluster
        jobs = request.app.state.jobs = JobQueue(connect_jobs(store.settings), store.settings)
    return jobs


JobsDep = Annotated[JobQueue, Depends(get_jobs)]


class JobFromEvents(BaseModel):
    """JSON body: run the job on the ``last`` logged events of ``app``."""

    model_config = ConfigDict(extra="forbid")

    app: str = Field(pattern=APP_NAME)
    last: int = Field(ge=1, description="how many of the newest logged events")
    params: dict[str, Any] = Field(default_factory=dict)


_BODY_DOC = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["file"],
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "params": {"type": "string", "description": "the job's parameters (JSON)"},
                        "app": {"type": "string", "description": "app the job belongs to"},
                        "format": {"type": "string", "enum": list(FORMATS)},
                    },
                }
            },
            "application/json": {"schema": JobFromEvents.model_json_schema()},
        },
    }
}


def _too_large(limit: int) -> HTTPException:
    return HTTPException(413, f"the dataset exceeds {limit} bytes (GROVE_JOB_MAX_UPLOAD)")


async def _read_upload(
    request: Request, limit: int
) -> tuple[bytes, dict[str, Any], str | None, dict]:
    """(file bytes, params, app, source) of a multipart upload, refusing more than ``limit``."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit + _MULTIPART_SLACK:
        raise _too_large(limit)

    async def bounded():
        seen = 0
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > limit + _MULTIPART_SLACK:
                raise _too_large(limit)
            yield chunk

    try:
        form = await MultiPartParser(request.headers, bounded(), max_files=1, max_fields=10).parse()
    except MultiPartException as exc:
        raise HTTPException(400, f"bad multipart body: {exc.message}") from None
    try:
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise HTTPException(422, "the multipart body needs the dataset as a file field 'file'")
        data = await upload.read()
        if len(data) > limit:
            raise _too_large(limit)
        try:
            params = json.loads(form.get("params") or "{}")
        except json.JSONDecodeError as exc:
            raise HTTPException(422, f"field 'params' is not JSON: {exc}") from None
        if not isinstance(params, dict):
            raise HTTPException(422, "field 'params' must be a JSON object")
        try:
            check_json_text(params, "field 'params'")
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        fmt = form.get("format") or guess_format(upload.filename, upload.content_type)
        if fmt not in FORMATS:
            raise HTTPException(422, f"format must be one of {list(FORMATS)}, got {fmt!r}")
        app = form.get("app") or None
        source = {"type": "upload", "format": fmt, "bytes": len(data), "filename": upload.filename}
        return data, params, app, source
    finally:
        await form.close()


def _check_submitter(key: str, app: str | None, store: Store, settings: Settings) -> None:
    if app is None:
        if not is_admin(key, settings):
            raise HTTPException(403, "a job on an upload without 'app' needs the admin key")
        return
    authorized(app, store.get_app(app), key, settings, store.key_owner)


def _key_owner(key: str, store: Store) -> str:
    """The app whose API key ``key`` is (401 if none)."""
    owner = store.key_owner(hash_key(key))
    if owner is None:
        raise HTTPException(401, "wrong key", headers={"WWW-Authenticate": "Bearer"})
    return owner


def _check_reader(
    key: str, record: JobRecord | None, job_id: str, store: Store, settings: Settings
):
    if record is None:
        raise HTTPException(
            404, f"job {job_id!r} not found (unknown, or expired after its retention)"
        )
    if is_admin(key, settings):
        return record
    config = store.get_app(record.app) if record.app else None
    if config is not None and same_key(key, config.api_key_hash):
        return record
    _key_owner(key, store)  # 401 for a key of no app
    raise HTTPException(403, f"this key cannot access job {job_id!r}")


@router.get("/kinds")
def list_kinds() -> list[dict]:
    """The job kinds and their parameters (JSON schema)."""
    return [
        {"kind": k.name, "summary": k.summary, "params": k.params.model_json_schema()}
        for k in KINDS.values()
    ]


@router.get("/workers")
def list_workers(jobs: JobsDep, _: AdminDep) -> list[dict]:
    """The job workers alive (admin): a queue without workers keeps its jobs queued."""
    return jobs.workers()


@router.post("/{kind}", status_code=202, openapi_extra=_BODY_DOC)
async def submit(
    kind: str,
    request: Request,
    credentials: BearerDep,
    settings: SettingsDep,
    store: StoreDep,
    jobs: JobsDep,
) -> JSONResponse:
    """Queue a job: multipart (``file`` = CSV or Parquet, ``params`` = JSON, optional ``app``)
    or JSON ``{"app": ..., "last": N, "params": {...}}`` for the app's logged events."""
    key = presented_key(credentials)
    try:
        job = job_kind(kind)
    except KeyError as exc:
        raise HTTPException(404, exc.args[0]) from None
    content_type = request.headers.get("content-type", "")
    data = None
    if content_type.startswith("multipart/form-data"):
        data, params, app, source = await _read_upload(request, settings.job_max_upload)
    elif content_type.startswith("application/json"):
        try:
            body = JobFromEvents.model_validate_json(await request.body())
        except ValidationError as exc:
            raise HTTPException(422, jsonable_encoder(exc.errors(include_url=False))) from None
        try:
            check_json_text(body.params, "params")
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        if body.last > settings.job_max_events:
            raise HTTPException(
                422, f"last={body.last} exceeds {settings.job_max_events} (GROVE_JOB_MAX_EVENTS)"
            )
        params, app = body.params, body.app
        source = {"type": "events", "app": app, "last": body.last}
    else:
        raise HTTPException(
            415, "send multipart/form-data (a file) or application/json ({app, last, params})"
        )
    await run_in_threadpool(_check_submitter, key, app, store, settings)
    try:
        job.params.model_validate(params)
    except ValidationError as exc:
        raise HTTPException(
            422,
            {
                "message": f"invalid parameters for {kind!r}",
                "errors": jsonable_encoder(exc.errors(include_url=False)),
            },
        ) from None
    if source["type"] == "events" and not await run_in_threadpool(event_count, store.redis, app):
        raise HTTPException(422, f"app {app!r} has no logged events yet")
    job_id = await run_in_threadpool(jobs.submit, kind, params, source, app, data)
    record = await run_in_threadpool(jobs.get, job_id)
    return JSONResponse(record.public(), status_code=202, headers={"Location": f"/jobs/{job_id}"})


@router.get("")
def list_jobs(
    credentials: BearerDep,
    settings: SettingsDep,
    store: StoreDep,
    jobs: JobsDep,
    app: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[dict]:
    """Newest first, without results. The admin sees every job (or ``?app=``'s); an app's key
    sees that app's."""
    key = presented_key(credentials)
    if not is_admin(key, settings):
        owner = _key_owner(key, store)
        if app is not None and app != owner:
            raise HTTPException(403, f"this API key belongs to another app, not to {app!r}")
        app = owner
    return [r.public(with_result=False) for r in jobs.store.list(limit=limit, app=app)]


@router.get("/{job_id}")
def get_job(
    job_id: str, credentials: BearerDep, settings: SettingsDep, store: StoreDep, jobs: JobsDep
) -> dict:
    """State, progress, timings, and the result once the job is done."""
    key = presented_key(credentials)
    record = _check_reader(key, jobs.get(job_id), job_id, store, settings)
    return record.public()


@router.delete("/{job_id}")
def cancel_job(
    job_id: str, credentials: BearerDep, settings: SettingsDep, store: StoreDep, jobs: JobsDep
) -> JSONResponse:
    """Cancel: a queued job at once (200), a running one at its next progress report (202)."""
    key = presented_key(credentials)
    _check_reader(key, jobs.get(job_id), job_id, store, settings)
    outcome = jobs.cancel(job_id)
    if outcome == "gone":
        raise HTTPException(404, f"job {job_id!r} not found")
    if outcome in ("done", "failed"):
        raise HTTPException(409, f"job {job_id!r} has already ended: {outcome}")
    record = jobs.get(job_id, reap=False)
    return JSONResponse(record.public(), status_code=202 if outcome == "cancelling" else 200)
