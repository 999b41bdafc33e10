"""/apps: create, list, read, change and delete apps (admin key; an app may read itself)."""

from __future__ import annotations

import logging
import secrets
import time
import uuid

from fastapi import APIRouter, HTTPException, status

from service import codec
from service.api.deps import AdminDep, AppName, AppVersionDep, ModelsDep, StoreDep, hash_key
from service.api.schemas import ActionSpec, AppCreate, AppCreated, AppPublic, AppUpdate, PolicySpec
from service.codec import CodecError
from service.models import model_kind
from service.records import Action, AppConfig
from service.store import StoreError

router = APIRouter(prefix="/apps", tags=["apps"])
log = logging.getLogger("grove.api")


def to_public(config: AppConfig, store_status: dict) -> dict:
    return AppPublic(
        name=config.name,
        policy=PolicySpec(kind=config.policy_kind, params=config.policy_params),
        actions=[ActionSpec(id=a.id, features=a.features) for a in config.actions],
        reward_wait_time=config.reward_wait_time,
        default_reward=config.default_reward,
        reward_range=config.reward_range,
        reward_aggregation=config.reward_aggregation,
        created_at=config.created_at,
        updated_at=config.updated_at,
        **store_status,
    ).model_dump()


def _actions(specs: list[ActionSpec]) -> tuple[Action, ...]:
    return tuple(Action(id=a.id, features=a.features) for a in specs)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=AppCreated)
def create_app(body: AppCreate, store: StoreDep, _: AdminDep) -> dict:
    """Create an app; the answer holds its API key, shown this once."""
    try:
        kind = model_kind(body.policy.kind)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    action_ids = [a.id for a in body.actions]
    try:
        learner = kind.new(dict(body.policy.params), action_ids)
    except (TypeError, ValueError) as exc:
        raise HTTPException(422, f"invalid policy params for {kind.name!r}: {exc}") from None
    except ImportError as exc:
        raise HTTPException(503, f"policy kind {kind.name!r} is not available: {exc}") from None
    api_key = "grove_" + secrets.token_urlsafe(32)
    now = time.time()
    config = AppConfig(
        name=body.name,
        uid=uuid.uuid4().hex,
        policy_kind=kind.name,
        policy_params=dict(body.policy.params),
        actions=_actions(body.actions),
        reward_wait_time=body.reward_wait_time,
        default_reward=body.default_reward,
        reward_range=tuple(body.reward_range),
        reward_aggregation=body.reward_aggregation,
        api_key_hash=hash_key(api_key),
        created_at=now,
        updated_at=now,
    )
    store.create_app(
        config, codec.encode(kind.dump(learner)), codec.encode(kind.dump_for_serving(learner))
    )
    return {**to_public(config, store.app_status(config.name)), "api_key": api_key}


@router.get("", response_model=list[AppPublic])
def list_apps(store: StoreDep, _: AdminDep) -> list[dict]:
    return [to_public(c, store.app_status(c.name)) for c in store.list_apps()]


@router.get("/{app}", response_model=AppPublic)
def get_app(app_version: AppVersionDep, store: StoreDep, models: ModelsDep) -> dict:
    """The app with its model version, events learned, pending decisions and trainer lag.

    Once it answered, this process serves (at least) the model version it reports: the API
    loads new snapshots in the background, and a client that waits for the trainer (tests,
    ``grove replay --sync-every``) waits here."""
    config, _ = app_version
    status_ = store.app_status(config.name)
    try:
        served = models.get(store, config, status_["model_version"])
    except (CodecError, StoreError) as exc:  # the status is still worth answering
        log.warning("app %r: cannot load model version %s: %s", config.name,
                    status_["model_version"], exc)
    else:
        status_["changes_found"] = getattr(served.learner, "n_changes", None)
        status_["events_since_refit"] = getattr(served.learner, "events_since_refit", None)
        status_["feature_columns"] = getattr(served.learner, "feature_columns", None)
        status_["features_left_out"] = getattr(served.learner, "features_left_out", None)
        status_["explained_share"] = getattr(served.learner, "explained", None)
    return to_public(config, status_)


@router.patch("/{app}", response_model=AppPublic)
def update_app(app: AppName, body: AppUpdate, store: StoreDep, _: AdminDep) -> dict:
    """Change the actions, the reward wait time or the default reward."""
    changes: dict = {}
    if body.actions is not None:
        kind = model_kind(store.require_app(app).policy_kind)
        if not kind.uses_actions:
            raise HTTPException(
                422, f"app {app!r} is a {kind.name!r} app: it takes no actions; leave 'actions' out"
            )
        changes["actions"] = _actions(body.actions)
    if body.reward_wait_time is not None:
        changes["reward_wait_time"] = body.reward_wait_time
    if body.default_reward is not None:
        config = store.require_app(app)
        low, high = config.reward_range
        if not low <= body.default_reward <= high:
            raise HTTPException(
                422,
                f"defaultReward {body.default_reward} is outside the app's "
                f"rewardRange {[low, high]}",
            )
        changes["default_reward"] = body.default_reward
    config = store.update_app(app, **changes) if changes else store.require_app(app)
    return to_public(config, store.app_status(app))


@router.delete("/{app}", status_code=status.HTTP_204_NO_CONTENT)
def delete_app(app: AppName, store: StoreDep, models: ModelsDep, _: AdminDep) -> None:
    """Delete the app, its model, its pending decisions and its logged events."""
    store.delete_app(app)
    models.forget(app)
