"""Personalizer's configuration, policy, model and logs routes, on a Grove app.

The app's own API key (``Ocp-Apim-Subscription-Key``) opens these as it opens rank and reward:
Personalizer had one key per resource for both (README). What each maps to is in
:mod:`service.personalizer.configuration`, :mod:`service.personalizer.learning_settings` and
:mod:`service.personalizer.model_file`. v1.0 clients update with PATCH, later ones with PUT:
both are served.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool

from service import candidates, keys
from service.api import usecases
from service.api.deps import ServicesDep
from service.api.personalizer_policy import (
    json_body,
    new_model,
    policy_arguments,
    retrain_since,
    set_policy,
    warm_start,
)
from service.api.routes.jobs import JobsDep
from service.api.routes.personalizer import CallerDep
from service.api.schemas import PolicySpec
from service.api.usecases import Caller, Services
from service.personalizer import configuration, durations, learning_settings, model_file
from service.personalizer.errors import PersonalizerError, bad_request
from service.personalizer.versions import PREFIX
from service.records import AppConfig

router = APIRouter(prefix=PREFIX, tags=["personalizer"])

#: the response header that names the ``warm-start`` job a policy change submitted
WARM_START_HEADER = "Grove-Warm-Start-Job"


def _app(services: Services, caller: Caller) -> AppConfig:
    config, _ = usecases.app_for(services, caller)
    return config


# -- service configuration ----------------------------------------------------------------------
@router.get("/configurations/service")
async def get_service_configuration(caller: CallerDep, services: ServicesDep) -> dict:
    """Personalizer's ServiceConfiguration of the app (rewardWaitTime as ISO 8601, ...)."""
    config = await run_in_threadpool(_app, services, caller)
    return configuration.public(config, services.settings.event_retention)


def _update_service(services: Services, caller: Caller, body: dict) -> dict:
    config = _app(services, caller)
    try:
        changes = configuration.changes(config, body)
    except configuration.ConfigurationError as exc:
        raise bad_request(str(exc), "InvalidServiceConfiguration") from None
    config = services.store.update_app(config.name, **changes)
    exploration = body.get("explorationPercentage")
    if exploration is not None and config.policy_kind == "auto":
        # the auto policy changes its floor live (the same model, its next version)
        try:
            candidates.change(services.store.redis, config.name, floor=float(exploration))
        except candidates.Gone:
            raise HTTPException(404, f"app {config.name!r} not found") from None
    return configuration.public(config, services.settings.event_retention)


@router.put("/configurations/service")
@router.patch("/configurations/service", include_in_schema=False)
async def update_service_configuration(
    request: Request, caller: CallerDep, services: ServicesDep
) -> dict:
    """Update the fields given (checked all first; see the mapping in the module doc)."""
    body = await json_body(request)
    return await run_in_threadpool(_update_service, services, caller, body)


# -- learning settings (policy) -----------------------------------------------------------------
def _policy(config: AppConfig) -> dict:
    name = configuration.stored(config).get("policyName") or config.policy_kind
    return {"name": name, "arguments": policy_arguments(config)}


@router.get("/configurations/policy")
async def get_policy(caller: CallerDep, services: ServicesDep) -> dict:
    """The app's policy as Personalizer's learning settings (see :func:`policy_arguments`)."""
    return _policy(await run_in_threadpool(_app, services, caller))


def _retrained(services: Services, jobs, before: AppConfig, after: AppConfig,
               response: Response) -> dict:
    """The policy answer of a change from ``before`` to ``after``; a new model retrains on
    the last two days of the app's log, as Personalizer's did (a ``warm-start`` job, whose id
    the ``Grove-Warm-Start-Job`` header gives)."""
    if new_model(before, after):
        response.headers[WARM_START_HEADER] = warm_start(services, jobs, after,
                                                         retrain_since(services))
    return _policy(after)


def _update_policy(services: Services, jobs, caller: Caller, body: dict,
                   response: Response) -> dict:
    config = _app(services, caller)
    name, arguments = body.get("name"), body.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, str):
        raise bad_request(
            "a policy is {'name': string, 'arguments': string}", "InvalidPolicyContract"
        )
    if len(name) > 256 or len(arguments) > 1024:
        raise bad_request(
            "name is at most 256 characters and arguments 1024", "InvalidPolicyContract"
        )
    try:
        parsed = learning_settings.parse(arguments, config.policy_kind)
    except learning_settings.LearningSettingsError as exc:
        raise bad_request(str(exc), "InvalidPolicyConfiguration") from None
    kind = parsed.kind or config.policy_kind
    params = parsed.params if parsed.kind or parsed.params else config.policy_params
    changed = set_policy(services, config, name, kind, params, parsed.exploration, arguments)
    return _retrained(services, jobs, config, changed, response)


@router.put("/configurations/policy")
@router.patch("/configurations/policy", include_in_schema=False)
async def update_policy(request: Request, response: Response, caller: CallerDep,
                        services: ServicesDep, jobs: JobsDep) -> dict:
    """Set the app's policy from learning settings; a new kind or params give a new model,
    which learns the last two days of the app's log."""
    body = await json_body(request)
    return await run_in_threadpool(_update_policy, services, jobs, caller, body, response)


def _reset_policy(services: Services, jobs, caller: Caller, response: Response) -> dict:
    before = config = _app(services, caller)
    default = PolicySpec()  # what POST /apps gives an app that names no policy
    extra = configuration.stored(config)
    config = set_policy(
        services, config, default.kind, default.kind, dict(default.params), None
    )
    if "explorationPercentage" in extra:  # back to the default floor too
        rest = configuration.stored(config)
        rest.pop("explorationPercentage", None)
        config = services.store.update_app(
            config.name, extra={**config.extra, configuration.EXTRA: rest}
        )
    return _retrained(services, jobs, before, config, response)


@router.delete("/configurations/policy")
async def reset_policy(response: Response, caller: CallerDep, services: ServicesDep,
                       jobs: JobsDep) -> dict:
    """Back to Grove's default policy and the default exploration floor; a new model learns
    the last two days of the app's log."""
    return await run_in_threadpool(_reset_policy, services, jobs, caller, response)


# -- model --------------------------------------------------------------------------------------
def _export(services: Services, caller: Caller) -> bytes:
    config = _app(services, caller)
    _, state = services.store.load_snapshot(config.name)
    return model_file.export(config, state)


@router.get("/model", response_class=Response)
async def export_model(caller: CallerDep, services: ServicesDep, signed: bool = False) -> Response:
    """The app's model file: Grove's versioned state (``signed`` makes no difference)."""
    payload = await run_in_threadpool(_export, services, caller)
    return Response(payload, media_type="application/octet-stream")


def _import(services: Services, caller: Caller, payload: bytes) -> None:
    config = _app(services, caller)
    try:
        kind, params, _, learner = model_file.read(payload)
    except model_file.ModelFileError as exc:
        raise bad_request(str(exc), "InvalidModelImportFormat") from None
    if kind != config.policy_kind:  # an import replaces the model, not the learning settings
        raise bad_request(
            f"the model file holds a {kind!r} model and app {config.name!r} learns with "
            f"{config.policy_kind!r}: import a model of its kind (the policy, PUT "
            "/configurations/policy, changes the kind)", "InvalidModelImportFormat")
    try:
        model_file.replace(
            services.store.redis,
            config.name,
            learner,
            policy_kind=kind,
            policy_params=dict(params),
            extra=configuration.touched(config, modelCreatedAt=configuration.now()),
        )
    except KeyError:
        raise HTTPException(404, f"app {config.name!r} not found") from None


@router.put("/model", status_code=204, response_class=Response)
async def import_model(request: Request, caller: CallerDep, services: ServicesDep) -> Response:
    """Replace the app's model with a Grove model file (from ``GET /model``); 400 otherwise."""
    payload = await request.body()
    if not payload:
        raise bad_request("the body must be a model file (GET /model)", "InvalidModelImportFormat")
    await run_in_threadpool(_import, services, caller, payload)
    return Response(status_code=204)


def _reset_model(services: Services, caller: Caller) -> None:
    config = _app(services, caller)
    learner = model_file.fresh(config.policy_kind, config.policy_params, config.action_ids)
    try:
        model_file.replace(
            services.store.redis,
            config.name,
            learner,
            extra=configuration.touched(config, modelCreatedAt=configuration.now()),
        )
    except KeyError:
        raise HTTPException(404, f"app {config.name!r} not found") from None


@router.delete("/model", status_code=204, response_class=Response)
async def reset_model(caller: CallerDep, services: ServicesDep) -> Response:
    """A fresh model of the app's policy; it learns from the events that come next."""
    await run_in_threadpool(_reset_model, services, caller)
    return Response(status_code=204)


def _model_properties(services: Services, caller: Caller) -> dict:
    config = _app(services, caller)
    info = services.store.snapshot_info(config.name)
    if info is None:
        raise PersonalizerError(404, "ResourceNotFound", f"app {config.name!r} has no model")
    return {
        "creationTime": durations.instant(configuration.model_created_at(config)),
        "lastModifiedTime": durations.instant(info.updated_at_ms / 1000 if info.updated_at_ms
                                              else configuration.model_created_at(config)),
    }


@router.get("/model/properties")
async def get_model_properties(caller: CallerDep, services: ServicesDep) -> dict:
    """When the current model started and when it last changed."""
    return await run_in_threadpool(_model_properties, services, caller)


# -- logs ---------------------------------------------------------------------------------------
def _stream_time(entry_id: bytes | str) -> str:
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return durations.instant(int(text.split("-")[0]) / 1000)


def _log_properties(services: Services, caller: Caller) -> dict:
    config = _app(services, caller)
    stream, client = keys.stream(config.name), services.store.redis
    first = client.xrange(stream, count=1)
    last = client.xrevrange(stream, count=1)
    if not first:
        return {"dateRange": {"from": None, "to": None}}
    return {"dateRange": {"from": _stream_time(first[0][0]), "to": _stream_time(last[0][0])}}


@router.get("/logs/properties")
async def get_log_properties(caller: CallerDep, services: ServicesDep) -> dict:
    """The time range of the app's logged events (its learning stream)."""
    return await run_in_threadpool(_log_properties, services, caller)


def _delete_logs(services: Services, caller: Caller) -> None:
    config = _app(services, caller)
    info = services.store.snapshot_info(config.name)
    if info is None or info.offset in (None, "0-0", "0"):
        return
    ms, _, seq = info.offset.partition("-")
    # XTRIM MINID drops ids below it: every event the model has learned, none it has not
    # (those are still to learn: accepted rewards are never lost)
    services.store.redis.xtrim(
        keys.stream(config.name), minid=f"{ms}-{int(seq or 0) + 1}", approximate=False
    )


@router.delete("/logs", status_code=204, response_class=Response)
async def delete_logs(caller: CallerDep, services: ServicesDep) -> Response:
    """Delete the app's logged events that its model has learned."""
    await run_in_threadpool(_delete_logs, services, caller)
    return Response(status_code=204)

