"""Dependencies, as named types: ``def decide(caller: CallerDep, services: ServicesDep, ...)``."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, HTTPException, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from service.api import usecases
from service.api.auth import hash_key, is_admin
from service.api.model_cache import ModelCache
from service.api.schemas import APP_NAME
from service.api.usecases import Caller, Services
from service.records import AppConfig
from service.settings import Settings, get_settings
from service.store import Store

__all__ = [
    "AdminDep",
    "AppName",
    "AppVersionDep",
    "BearerDep",
    "CallerDep",
    "ModelsDep",
    "ServicesDep",
    "SettingsDep",
    "StoreDep",
    "hash_key",
    "presented_key",
]


# Dependencies without I/O are ``async``: FastAPI runs a sync dependency in a worker thread, and
# a thread hop per dependency costs more than the whole decide on a busy machine.
async def settings(request: Request) -> Settings:
    """The app's settings: ``create_app(settings)``'s, else the environment's, read once
    (:func:`service.settings.get_settings` is an ``lru_cache``)."""
    return getattr(request.app.state, "settings", None) or get_settings()


SettingsDep = Annotated[Settings, Depends(settings)]

_bearer = HTTPBearer(auto_error=False, description="admin key, or the app's API key")


async def get_store(request: Request) -> Store:
    return request.app.state.store


async def get_models(request: Request) -> ModelCache:
    return request.app.state.models


async def get_services(request: Request, settings: SettingsDep) -> Services:
    """The process's store and model cache with the request's settings (tests override them)."""
    return request.app.state.services.with_settings(settings)


StoreDep = Annotated[Store, Depends(get_store)]
ModelsDep = Annotated[ModelCache, Depends(get_models)]
ServicesDep = Annotated[Services, Depends(get_services)]
#: an app name in a path: the pattern of POST /apps (anything else is 422, never a Redis key)
AppName = Annotated[str, Path(pattern=APP_NAME, description="the app's name")]
BearerDep = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


def presented_key(credentials: HTTPAuthorizationCredentials | None) -> str:
    if credentials is None or not credentials.credentials:
        raise HTTPException(
            401,
            "missing key: send 'Authorization: Bearer <key>'",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return credentials.credentials


async def caller(app: AppName, credentials: BearerDep) -> Caller:
    """The key of ``Authorization: Bearer`` and the app of the path (no I/O: checked by the
    use case, in its one thread-pool call)."""
    return Caller(presented_key(credentials), app)


CallerDep = Annotated[Caller, Depends(caller)]


async def require_admin(credentials: BearerDep, settings: SettingsDep, store: StoreDep) -> None:
    key = presented_key(credentials)
    if not settings.admin_key:
        raise HTTPException(503, "no admin key is configured on this server: set GROVE_ADMIN_KEY")
    if not is_admin(key, settings):
        if store.key_owner(hash_key(key)) is not None:  # only on refusals: no cost when allowed
            raise HTTPException(403, "this endpoint needs the admin key, not an app's API key")
        raise HTTPException(401, "wrong admin key", headers={"WWW-Authenticate": "Bearer"})


AdminDep = Annotated[None, Depends(require_admin)]


async def app_with_version(caller: CallerDep, services: ServicesDep) -> tuple[AppConfig, int]:
    """The app (authenticated by its API key or the admin key) and its model version."""
    return await run_in_threadpool(usecases.app_for, services, caller)


AppVersionDep = Annotated[tuple[AppConfig, int], Depends(app_with_version)]
