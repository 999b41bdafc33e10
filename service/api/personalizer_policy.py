"""What several Personalizer route modules share: reading a JSON object body, switching an
app to another policy (``/configurations/policy`` and an evaluation's apply both do), and the
``warm-start`` job a new model then learns the app's log in.

Routes import these from here, never from one another's private functions.
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import HTTPException, Request

from service.api.usecases import Services
from service.feature_checks import check_json_text
from service.personalizer import configuration, learning_settings, model_file
from service.personalizer.errors import bad_request
from service.records import AppConfig

#: what a policy change retrains on: Personalizer reset the model on a change of its reward or
#: exploration settings and "retrain[ed] it with the last 2 days of data" (its how-to-settings
#: page); an evaluation's apply replays the whole log instead (the evaluation's model was
#: trained on its window, which can be far longer)
RETRAIN_MS = 2 * 24 * 3600 * 1000


async def json_body(request: Request) -> dict[str, Any]:
    try:
        body = json.loads(await request.body() or b"null")
    except ValueError as exc:
        raise bad_request(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise bad_request("the body must be a JSON object")
    try:
        check_json_text(body)  # its names are stored, and written back by later reads
    except ValueError as exc:
        raise bad_request(str(exc)) from None
    return body



def set_policy(
    services: Services,
    config: AppConfig,
    name: str,
    kind: str,
    params: dict,
    exploration: float | None,
    arguments: str | None = None,
) -> AppConfig:
    """Switch ``config``'s app to ``kind``/``params``: a fresh model if they change, else only
    the settings (name, exploration floor). ``arguments``: the learning settings they were
    read from, answered back while the policy is still theirs (:func:`policy_arguments`)."""
    extra: dict[str, Any] = {"policyName": name}
    if exploration is not None:
        extra["explorationPercentage"] = exploration
    # the floor (--epsilon, explorationPercentage) is a parameter of kinds that have one
    floor = exploration if exploration is not None else configuration.exploration_floor(config)
    if "explorationPercentage" in configuration.stored(config) or exploration is not None:
        params = configuration.with_floor(kind, params, floor)
    extra["policyArguments"] = None if arguments is None else {
        "text": arguments, "kind": kind, "params": dict(params), "floor": floor}
    if kind == config.policy_kind and params == config.policy_params:
        return services.store.update_app(config.name, extra=configuration.touched(config, **extra))
    try:
        learner = model_file.fresh(kind, params, config.action_ids)
    except (TypeError, ValueError) as exc:
        accepted = ", ".join("--" + p for p in learning_settings.parameters(kind))
        raise bad_request(
            f"policy {kind!r} refuses these parameters: {exc} (it takes {accepted})",
            "InvalidPolicyConfiguration",
        ) from None
    extra["modelCreatedAt"] = configuration.now()
    try:
        return model_file.replace(
            services.store.redis,
            config.name,
            learner,
            policy_kind=kind,
            policy_params=dict(params),
            extra=configuration.touched(config, **extra),
        )
    except KeyError:
        raise HTTPException(404, f"app {config.name!r} not found") from None


def new_model(before: AppConfig, after: AppConfig) -> bool:
    """Whether a :func:`set_policy` from ``before`` to ``after`` gave the app a fresh model."""
    return (after.policy_kind, after.policy_params) != (before.policy_kind, before.policy_params)


def warm_start(services: Services, jobs, config: AppConfig,
               since_ms: int | None = None) -> str:
    """Submit the ``warm-start`` job in which the app's new (fresh) model learns its log
    (:mod:`service.jobs.warm_start`; ``since_ms``: only the events logged since); its id. The
    job installs nothing if the model is replaced again before it is done."""
    token = model_file.model_id(services.store.redis, config.name)
    params: dict[str, Any] = {"model_id": token}
    if since_ms is not None:
        params["since_ms"] = since_ms
    return jobs.submit("warm-start", params, {"type": "app", "app": config.name},
                       app=config.name)


def retrain_since(services: Services) -> int:
    """The ``since_ms`` of a policy change's retraining: :data:`RETRAIN_MS` ago by Redis's
    clock (the one a stream entry's id reads)."""
    seconds, micros = services.store.redis.time()
    return int(seconds) * 1000 + int(micros) // 1000 - RETRAIN_MS


def policy_arguments(config: AppConfig) -> str:
    """The app's policy as Personalizer's learning settings: the arguments it was set with, as
    Personalizer answered them (the SDKs' own tests check that an update and a later read give
    back what was sent), while the policy, its parameters and its floor are still what they
    set; else (changed since through Grove's API or the service configuration, or never set
    through this route) Grove's own terms (:func:`learning_settings.render`)."""
    given = configuration.stored(config).get("policyArguments")
    floor = configuration.exploration_floor(config)
    if given and (given["kind"], given["params"], given["floor"]) == (
            config.policy_kind, config.policy_params, floor):
        return given["text"]
    return learning_settings.render(config.policy_kind, config.policy_params, floor)
