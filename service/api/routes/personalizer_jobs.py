"""Personalizer's evaluations and feature importances, as Grove batch jobs on the app's log.

- ``PUT /evaluations/{id}`` (2022-09-01-preview) or ``POST /evaluations`` (v1.0, v1.1-preview:
  201 with the evaluation and its ``Location``) submits a ``personalizer-evaluation`` job over
  the app's logged events in ``[startTime, endTime]``; ``GET`` reads its status and, once done,
  its result as Personalizer's ``Evaluation`` (the time series aggregated at the asked
  ``intervalInMinutes``, ``Expanding`` or ``Rolling``); ``DELETE`` forgets it (and cancels a
  job still running). What is estimated, and how: :mod:`service.personalizer.evaluation`.
- ``POST /configurations/applyFromEvaluation`` switches the app to a policy the evaluation
  valued (its learning settings); its new model then learns the app's log in a ``warm-start``
  job (:mod:`service.jobs.warm_start`; its id is the evaluation's ``warmStartJobId``) and
  replaces the fresh one when done, as Personalizer applied the evaluation's model too.
- ``/featureImportances`` do the same for ``personalizer-feature-importance`` jobs
  (:mod:`service.personalizer.importance`).

The client's ids live in one Redis hash per app and collection
(:func:`service.keys.personalizer_records`); a finished job's result is copied there when first
read, so it outlives the job's own retention (``GROVE_JOB_RETENTION``).
"""

from __future__ import annotations

import json
import math
import re
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from service import keys
from service.api import usecases
from service.api.deps import ServicesDep
from service.api.personalizer_policy import json_body, new_model, set_policy, warm_start
from service.api.routes.jobs import JobsDep
from service.api.routes.personalizer import CallerDep
from service.api.usecases import Caller, Services
from service.jobs.queue import JobQueue
from service.personalizer import durations, learning_settings
from service.personalizer.errors import PersonalizerError, bad_request
from service.personalizer.evaluation import BUCKET_MS, Candidate, default_candidates
from service.personalizer.versions import PREFIX, legacy_shapes
from service.records import AppConfig

router = APIRouter(prefix=PREFIX, tags=["personalizer"])

EVALUATIONS, IMPORTANCES = "evaluations", "featureImportances"
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,256}$")
#: Grove job states -> Personalizer's statuses
_STATUS = {
    "queued": "NotSubmitted",
    "running": "Running",
    "done": "Succeeded",
    "failed": "Failed",
    "cancelled": "Canceled",
}
_NOT_FOUND = {EVALUATIONS: "EvaluationNotFound", IMPORTANCES: "FeatureImportanceNotFound"}
_EXISTS = {EVALUATIONS: "EvaluationAlreadyExists", IMPORTANCES: "FeatureImportanceAlreadyExists"}


def _time(value: Any, name: str, code: str) -> float:
    """Unix seconds of an ISO 8601 date-time (a naive one is UTC)."""
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        raise bad_request(f"{name} must be an ISO 8601 date-time, got {value!r}", code) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _check_id(value: str, collection: str) -> str:
    if not _ID.match(value):
        raise bad_request(f"an id is 1 to 256 of A-Z a-z 0-9 _ . : -, got {value!r}")
    return value


# -- records -------------------------------------------------------------------------------------
def _records(services: Services, config: AppConfig, collection: str) -> dict[str, dict]:
    raw = services.store.redis.hgetall(keys.personalizer_records(config.name, collection))
    return {k.decode() if isinstance(k, bytes) else k: json.loads(v) for k, v in raw.items()}


def _record(services: Services, config: AppConfig, collection: str, record_id: str) -> dict:
    raw = services.store.redis.hget(keys.personalizer_records(config.name, collection), record_id)
    if raw is None:
        raise PersonalizerError(
            404, _NOT_FOUND[collection], f"{collection[:-1]} {record_id!r} not found"
        )
    return json.loads(raw)


def _save(services: Services, config: AppConfig, collection: str, record: dict) -> None:
    services.store.redis.hset(
        keys.personalizer_records(config.name, collection), record["id"], json.dumps(record)
    )


def _settle(services: Services, jobs: JobQueue, config: AppConfig, collection: str,
            record: dict) -> dict:
    """The record with its job's status (and result, copied once the job has ended)."""
    if record.get("status") in ("Succeeded", "Failed", "Canceled", "OptimalPolicyApplied"):
        return record
    job = jobs.get(record["jobId"])
    if job is None:
        record = {**record, "status": "Failed", "description": "its job expired unread"}
        _save(services, config, collection, record)
        return record
    status = _STATUS[job.state.value]
    record = {**record, "status": status, "description": job.error or job.message}
    if job.state.finished:
        record["result"] = job.result
        _save(services, config, collection, record)
    return record


def _submit(services: Services, jobs: JobQueue, config: AppConfig, collection: str,
            record: dict, kind: str, params: dict) -> dict:
    key = keys.personalizer_records(config.name, collection)
    if services.store.redis.hexists(key, record["id"]):
        raise bad_request(
            f"{collection[:-1]} with id {record['id']} already exists", _EXISTS[collection]
        )
    source = {"type": "app", "app": config.name, "from": record["startTime"],
              "to": record["endTime"]}
    job_id = jobs.submit(kind, params, source, app=config.name)
    record = {**record, "jobId": job_id, "status": "NotSubmitted",
              "creationTime": durations.instant(time.time())}
    if not services.store.redis.hsetnx(key, record["id"], json.dumps(record)):
        jobs.cancel(job_id)  # another request took the id meanwhile
        raise bad_request(
            f"{collection[:-1]} with id {record['id']} already exists", _EXISTS[collection]
        )
    return record


def _window(body: dict, code: str) -> tuple[float, float]:
    start = _time(body.get("startTime"), "startTime", code)
    end = _time(body.get("endTime"), "endTime", code)
    if end < start:
        raise bad_request("endTime must not be before startTime", code)
    return start, end


# -- evaluations ---------------------------------------------------------------------------------
def _candidates(config: AppConfig, body: dict) -> list[Candidate]:
    policies = body.get("policies") or []
    if not isinstance(policies, list) or len(policies) > 10:
        raise bad_request("policies is a list of at most 10 learning settings",
                          "InvalidEvaluationContract")
    candidates = default_candidates(config, bool(body.get("enablePolicyOptimization")))
    names = {c.name for c in candidates}
    for policy in policies:
        if not isinstance(policy, dict) or not isinstance(policy.get("name"), str) or not (
            isinstance(policy.get("arguments"), str)
        ):
            raise bad_request("each policy is {'name', 'arguments'}", "InvalidEvaluationContract")
        if policy["name"] in names:
            raise bad_request(f"policy name {policy['name']!r} is used twice (or is a built-in "
                              "candidate's)", "DuplicateCustomPolicyNames")
        names.add(policy["name"])
        try:
            parsed = learning_settings.parse(policy["arguments"], config.policy_kind)
        except learning_settings.LearningSettingsError as exc:
            raise bad_request(f"policy {policy['name']!r}: {exc}",
                              "InvalidPolicyConfiguration") from None
        kind = parsed.kind or config.policy_kind
        params = parsed.params if (parsed.kind or parsed.params) else dict(config.policy_params)
        try:
            learning_settings.check(kind, params)
        except ValueError as exc:
            raise bad_request(f"policy {policy['name']!r}: {exc}",
                              "InvalidPolicyConfiguration") from None
        candidates.append(Candidate(policy["name"], "Custom", policy["arguments"], kind, params))
    return candidates


def _create_evaluation(services: Services, jobs: JobQueue, caller: Caller, evaluation_id: str,
                       body: dict) -> dict:
    config, _ = usecases.app_for(services, caller)
    name = body.get("name")
    if not isinstance(name, str) or not 1 <= len(name) <= 256:
        raise bad_request("name is a string of 1 to 256 characters", "InvalidEvaluationContract")
    start, end = _window(body, "InvalidEvaluationContract")
    candidates = _candidates(config, body)
    params = {
        "start_ms": int(start * 1000),
        "end_ms": int(end * 1000),
        "candidates": [c.__dict__ for c in candidates],
    }
    record = {"id": evaluation_id, "name": name, "startTime": durations.instant(start),
              "endTime": durations.instant(end),
              "evaluationType": "Manual",
              "policies": [{"name": c.name, "arguments": c.arguments} for c in candidates]}
    return _submit(services, jobs, config, EVALUATIONS, record, "personalizer-evaluation", params)


@router.put("/evaluations/{evaluationId}", status_code=200, response_class=Response)
async def create_evaluation(
    evaluationId: str, request: Request, caller: CallerDep, services: ServicesDep, jobs: JobsDep
) -> Response:
    """Submit an offline evaluation under the client's id (2022-09-01-preview)."""
    body = await json_body(request)
    _check_id(evaluationId, EVALUATIONS)
    await run_in_threadpool(_create_evaluation, services, jobs, caller, evaluationId, body)
    return Response(status_code=200)


@router.post("/evaluations", status_code=201)
async def create_evaluation_v1(
    request: Request, caller: CallerDep, services: ServicesDep, jobs: JobsDep
) -> Response:
    """Submit an offline evaluation; Grove names it (v1.0 and v1.1-preview)."""
    body = await json_body(request)
    evaluation_id = uuid.uuid4().hex
    record = await run_in_threadpool(
        _create_evaluation, services, jobs, caller, evaluation_id, body
    )
    location = str(request.url_for("get_evaluation", evaluationId=evaluation_id))
    return Response(json.dumps(_details(record)), status_code=201,
                    media_type="application/json", headers={"Location": location})


def _details(record: dict) -> dict:
    return {key: record.get(key) for key in
            ("id", "name", "startTime", "endTime", "creationTime", "status", "evaluationType")}


def _series(policy: dict, result: dict, start_s: float | None, end_s: float | None,
            interval_min: int, rolling: bool) -> list[dict]:
    """Personalizer's time series of one policy from the job's 5-minute buckets."""
    low, high = result["rewardRange"]
    span, step = high - low, max(1, interval_min) * 60_000
    rows = [b for b in policy["buckets"]
            if (start_s is None or b[0] >= start_s * 1000 - BUCKET_MS)
            and (end_s is None or b[0] <= end_s * 1000)]
    data, n, total, squares = [], 0, 0.0, 0.0
    groups: dict[int, list] = {}
    for row in rows:
        groups.setdefault(row[0] // step * step, []).append(row)
    for stamp in sorted(groups):
        if rolling:
            n, total, squares = 0, 0.0, 0.0
        for _, count, s, s2 in groups[stamp]:
            n, total, squares = n + count, total + s, squares + s2
        mean = total / n
        half = 1.96 * math.sqrt(max(0.0, squares / n - mean**2) / max(1, n - 1)) if n > 1 else 0
        data.append({
            "timeStamp": durations.instant(stamp / 1000),
            "expectedReward": low + mean * span,
            "confidenceInterval": [low + (mean - half) * span, low + (mean + half) * span],
        })
    return data


def _evaluation(record: dict, start: float | None, end: float | None, interval: int,
                window: str) -> dict:
    out = {**_details(record), "description": record.get("description") or ""}
    result = record.get("result")
    if result:
        out["optimalPolicy"] = result.get("optimalPolicy") or "Online"
        out["content"] = {
            "startTime": record["startTime"],
            "endTime": record["endTime"],
            "intervalInMinutes": interval,
            "value": [
                {
                    "name": p["name"],
                    "arguments": p["arguments"],
                    "policySource": p["policySource"],
                    "slotId": "",
                    "summary": p["summary"],
                    "estimates": p["estimates"],
                    "timeseries": {"data": _series(p, result, start, end, interval,
                                                   window.lower() == "rolling")},
                }
                for p in result["policies"]
            ],
        }
    return out


def _get_evaluation(services, jobs, caller, evaluation_id: str) -> dict:
    config, _ = usecases.app_for(services, caller)
    return _settle(services, jobs, config, EVALUATIONS,
                   _record(services, config, EVALUATIONS, evaluation_id))


@router.get("/evaluations/{evaluationId}", name="get_evaluation")
async def get_evaluation(
    evaluationId: str,
    caller: CallerDep,
    services: ServicesDep,
    jobs: JobsDep,
    startTime: str | None = None,
    endTime: str | None = None,
    intervalInMinutes: int = Query(default=5, ge=5),
    window: str = "Expanding",
) -> dict:
    """The evaluation's status and, once done, its policies' values and time series."""
    if window.lower() not in ("expanding", "rolling"):
        raise bad_request(f"window is Expanding or Rolling, got {window!r}")
    start = _time(startTime, "startTime", "BadRequest") if startTime else None
    end = _time(endTime, "endTime", "BadRequest") if endTime else None
    record = await run_in_threadpool(_get_evaluation, services, jobs, caller, evaluationId)
    return _evaluation(record, start, end, intervalInMinutes, window)


def _list(services, jobs, caller, collection: str) -> list[dict]:
    config, _ = usecases.app_for(services, caller)
    records = _records(services, config, collection).values()
    settled = [_settle(services, jobs, config, collection, r) for r in records]
    return sorted(settled, key=lambda r: r.get("creationTime") or "")


def _page(request: Request, items: list[dict], top: int | None, skip: int) -> Any:
    items = items[skip:][: top if top is not None else None]
    return items if legacy_shapes(request) else {"value": items, "nextLink": None}


@router.get("/evaluations")
async def list_evaluations(
    request: Request,
    caller: CallerDep,
    services: ServicesDep,
    jobs: JobsDep,
    top: int | None = Query(default=None, ge=0),
    skip: int = Query(default=0, ge=0),
    filter: str | None = None,  # noqa: A002 (Personalizer's query name)
) -> Any:
    """Every evaluation of the app (all are 'Manual': Grove runs no automatic ones)."""
    records = await run_in_threadpool(_list, services, jobs, caller, EVALUATIONS)
    items = [_details(r) for r in records]
    if filter and "evaluationType" in filter and "manual" not in filter.lower():
        items = []
    return _page(request, items, top, skip)


def _delete(services, jobs, caller, collection: str, record_id: str) -> None:
    config, _ = usecases.app_for(services, caller)
    record = _record(services, config, collection, record_id)
    if record.get("status") not in ("Succeeded", "Failed", "Canceled", "OptimalPolicyApplied"):
        jobs.cancel(record["jobId"])
    services.store.redis.hdel(keys.personalizer_records(config.name, collection), record_id)


@router.delete("/evaluations/{evaluationId}", status_code=204, response_class=Response)
async def delete_evaluation(
    evaluationId: str, caller: CallerDep, services: ServicesDep, jobs: JobsDep
) -> Response:
    await run_in_threadpool(_delete, services, jobs, caller, EVALUATIONS, evaluationId)
    return Response(status_code=204)


def _apply(services, jobs, caller, body: dict) -> None:
    config, _ = usecases.app_for(services, caller)
    evaluation_id, policy_name = body.get("evaluationId"), body.get("policyName")
    if not isinstance(evaluation_id, str) or not isinstance(policy_name, str):
        raise bad_request("the body is {'evaluationId', 'policyName'}", "InvalidContract")
    record = _settle(services, jobs, config, EVALUATIONS,
                     _record(services, config, EVALUATIONS, evaluation_id))
    if record.get("status") not in ("Succeeded", "OptimalPolicyApplied"):
        raise bad_request(f"evaluation {evaluation_id!r} must be completed first "
                          f"(it is {record.get('status')})", "EvaluationNotCompleted")
    policies = {p["name"]: p for p in (record.get("result") or {}).get("policies", [])}
    chosen = policies.get(policy_name)
    if chosen is None:
        raise PersonalizerError(404, "LearningSettingsNotFound",
                                f"evaluation {evaluation_id!r} has no policy {policy_name!r}")
    if chosen["policySource"] == "Online":
        return  # the policy that served: nothing changes
    if chosen["policySource"] in ("Random", "Baseline"):
        raise bad_request(f"{policy_name!r} is a reference, not a Grove policy to apply",
                          "InvalidContract")
    parsed = learning_settings.parse(chosen["arguments"], config.policy_kind)
    kind = parsed.kind or config.policy_kind
    params = parsed.params if (parsed.kind or parsed.params) else dict(config.policy_params)
    applied = set_policy(services, config, policy_name, kind, params, parsed.exploration,
                         chosen["arguments"])
    record = {**record, "status": "OptimalPolicyApplied", "applied": policy_name}
    if new_model(config, applied):
        # a new model: it learns the app's log (service.jobs.warm_start), as Personalizer
        # applied an evaluation's model with its settings
        record["warmStartJobId"] = warm_start(services, jobs, applied)
    _save(services, config, EVALUATIONS, record)


@router.post("/configurations/applyFromEvaluation", status_code=204, response_class=Response)
async def apply_from_evaluation(
    request: Request, caller: CallerDep, services: ServicesDep, jobs: JobsDep
) -> Response:
    """Switch the app to a policy of a finished evaluation (its model learns the app's log in
    a ``warm-start`` job)."""
    body = await json_body(request)
    await run_in_threadpool(_apply, services, jobs, caller, body)
    return Response(status_code=204)


# -- feature importances -------------------------------------------------------------------------
def _create_importance(services, jobs, caller, importance_id: str, body: dict) -> dict:
    config, _ = usecases.app_for(services, caller)
    name = body.get("name")
    if not isinstance(name, str) or not 1 <= len(name) <= 256:
        raise bad_request("name is a string of 1 to 256 characters", "InvalidContract")
    start, end = _window(body, "InvalidContract")
    record = {"id": importance_id, "name": name, "startTime": durations.instant(start),
              "endTime": durations.instant(end)}
    params = {"start_ms": int(start * 1000), "end_ms": int(end * 1000)}
    return _submit(services, jobs, config, IMPORTANCES, record,
                   "personalizer-feature-importance", params)


@router.put("/featureImportances/{featureImportanceId}", status_code=200, response_class=Response)
async def create_feature_importance(
    featureImportanceId: str,
    request: Request,
    caller: CallerDep,
    services: ServicesDep,
    jobs: JobsDep,
) -> Response:
    """Submit a feature importance job under the client's id."""
    body = await json_body(request)
    _check_id(featureImportanceId, IMPORTANCES)
    await run_in_threadpool(
        _create_importance, services, jobs, caller, featureImportanceId, body
    )
    return Response(status_code=200)


def _importance_public(record: dict, with_scores: bool = True) -> dict:
    out = {key: record.get(key) for key in
           ("id", "name", "startTime", "endTime", "creationTime", "status")}
    if with_scores:
        out["description"] = record.get("description") or ""
        out["featureScores"] = (record.get("result") or {}).get("featureScores", [])
    return out


def _get_importance(services, jobs, caller, importance_id: str) -> dict:
    config, _ = usecases.app_for(services, caller)
    return _settle(services, jobs, config, IMPORTANCES,
                   _record(services, config, IMPORTANCES, importance_id))


@router.get("/featureImportances/{featureImportanceId}")
async def get_feature_importance(
    featureImportanceId: str, caller: CallerDep, services: ServicesDep, jobs: JobsDep
) -> dict:
    """The job's status and, once done, the features' normalised scores (best first)."""
    record = await run_in_threadpool(
        _get_importance, services, jobs, caller, featureImportanceId
    )
    return _importance_public(record)


@router.get("/featureImportances")
async def list_feature_importances(
    request: Request,
    caller: CallerDep,
    services: ServicesDep,
    jobs: JobsDep,
    top: int | None = Query(default=None, ge=0),
    skip: int = Query(default=0, ge=0),
) -> Any:
    records = await run_in_threadpool(_list, services, jobs, caller, IMPORTANCES)
    return _page(request, [_importance_public(r, False) for r in records], top, skip)


@router.delete(
    "/featureImportances/{featureImportanceId}", status_code=204, response_class=Response
)
async def delete_feature_importance(
    featureImportanceId: str, caller: CallerDep, services: ServicesDep, jobs: JobsDep
) -> Response:
    await run_in_threadpool(_delete, services, jobs, caller, IMPORTANCES, featureImportanceId)
    return Response(status_code=204)

