"""Dependencies, as named types: ``def decide(app: AppDep, store: StoreDep, ...)``."""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.api.model_cache import ModelCache
from service.api.schemas import APP_NAME
from service.records import AppConfig
from service.settings import Settings, get_settings
from service.store import Store


# Dependencies without I/O are ``async``: FastAPI runs a sync dependency in a worker thread, and
# a thread hop per dependency costs more than the whole decide on a busy machine.
async def settings() -> Settings:
    """The settings, read once (:func:`service.settings.get_settings` is an ``lru_cache``)."""
    return get_settings()


SettingsDep = Annotated[Settings, Depends(settings)]

_bearer = HTTPBearer(auto_error=False, description="admin key, or the app's API key")


async def get_store(request: Request) -> Store:
    return request.app.state.store


async def get_models(request: Request) -> ModelCache:
    return request.app.state.models


StoreDep = Annotated[Store, Depends(get_store)]
ModelsDep = Annotated[ModelCache, Depends(get_models)]
#: an app name in a path: the pattern of POST /apps (anything else is 422, never a Redis key)
AppName = Annotated[str, Path(pattern=APP_NAME, description="the app's name")]
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def _same(key: str, expected_hash: str) -> bool:
    return hmac.compare_digest(hash_key(key), expected_hash)


def _presented(credentials: HTTPAuthorizationCredentials | None) -> str:
    if credentials is None or not credentials.credentials:
        raise HTTPException(
            401,
            "missing key: send 'Authorization: Bearer <key>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return credentials.credentials


def _is_admin(key: str, settings: Settings) -> bool:
    return bool(settings.admin_key) and _same(key, hash_key(settings.admin_key))


async def require_admin(credentials: BearerDep, settings: SettingsDep, store: StoreDep) -> None:
    key = _presented(credentials)
    if not settings.admin_key:
        raise HTTPException(503, "no admin key is configured on this server: set GROVE_ADMIN_KEY")
    if not _is_admin(key, settings):
        if store.key_owner(hash_key(key)) is not None:  # only on refusals: no cost when allowed
            raise HTTPException(403, "this endpoint needs the admin key, not an app's API key")
        raise HTTPException(401, "wrong admin key", headers={"WWW-Authenticate": "Bearer"})


AdminDep = Annotated[None, Depends(require_admin)]


def _authorized_app(
    app: str,
    config: AppConfig | None,
    key: str,
    settings: Settings,
    store: Store | None = None,
) -> AppConfig:
    """The app if ``key`` opens it: 404 (admin only) if it does not exist, 403 for the key of
    another app (``store`` given: the key index is read on refusals only), 401 otherwise."""
    admin = _is_admin(key, settings)
    if config is None and admin:
        raise HTTPException(404, f"app {app!r} not found")
    if config is None or not (admin or _same(key, config.api_key_hash)):
        owner = store.key_owner(hash_key(key)) if store is not None else None
        if owner is not None:
            # a valid key of another app: the same 403 whether or not ``app`` exists
            raise HTTPException(403, f"this API key belongs to another app, not to {app!r}")
        # the same answer for a missing app and a wrong key: app names are not probed
        raise HTTPException(
            401,
            f"wrong API key for app {app!r} (or no such app)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return config


def app_with_version(
    app: AppName, credentials: BearerDep, settings: SettingsDep, store: StoreDep
) -> tuple[AppConfig, int]:
    """The app (authenticated by its API key or the admin key) and its model version."""
    key = _presented(credentials)
    config, version = store.get_app_and_version(app)
    return _authorized_app(app, config, key, settings, store), version


AppVersionDep = Annotated[tuple[AppConfig, int], Depends(app_with_version)]
