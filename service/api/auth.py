"""API keys: hashing and the one rule that says which key opens which app.

Grove keeps only the SHA-256 of an app's API key. A request names its app (``/apps/{app}/...``)
or, on the Personalizer routes, lets the key name it; either way :func:`authorized` decides,
with the same answers: 404 for the admin on a missing app, 403 for another app's key, 401
otherwise (the same 401 for a missing app and a wrong key, so app names cannot be probed).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
from collections.abc import Callable

from fastapi import HTTPException

from service.records import AppConfig
from service.settings import Settings


def hash_key(key: str) -> str:
    """The SHA-256 (hex) Grove stores instead of a key."""
    return hashlib.sha256(key.encode()).hexdigest()


def same_key(key: str, expected_hash: str) -> bool:
    """Whether ``key`` hashes to ``expected_hash`` (constant-time comparison)."""
    return hmac.compare_digest(hash_key(key), expected_hash)


@functools.lru_cache(maxsize=4)
def _admin_hash(admin_key: str) -> str:
    return hash_key(admin_key)


def is_admin(key: str, settings: Settings) -> bool:
    return bool(settings.admin_key) and same_key(key, _admin_hash(settings.admin_key))


def authorized(
    app: str,
    config: AppConfig | None,
    key: str,
    settings: Settings,
    key_owner: Callable[[str], str | None] | None = None,
) -> AppConfig:
    """The app if ``key`` opens it: 404 (admin only) if it does not exist, 403 for the key of
    another app (``key_owner(hash)`` given: the key index is read on refusals only), 401
    otherwise."""
    admin = is_admin(key, settings)
    if config is None and admin:
        raise HTTPException(404, f"app {app!r} not found")
    if config is None or not (admin or same_key(key, config.api_key_hash)):
        owner = key_owner(hash_key(key)) if key_owner is not None else None
        if owner is not None:
            # a valid key of another app: the same 403 whether or not ``app`` exists
            raise HTTPException(403, f"this API key belongs to another app, not to {app!r}")
        raise HTTPException(
            401,
            f"wrong API key for app {app!r} (or no such app)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return config
