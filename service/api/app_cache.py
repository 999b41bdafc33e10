"""Each API process keeps the configs of the apps it serves, keyed by their ``rev``.

A decide or reward then needs no Redis read before its one script: the script checks that the
config it was decided with is still current (``uid:rev``, :mod:`service.scripts`) and answers
``stale`` otherwise, and the use case reads the config again and retries. Any write of an app's
config bumps its ``rev`` (``Store.update_app``, ``service.candidates``, the Personalizer model
import), so no request is ever served from a config that changed: the cache only saves the read.

Personalizer's routes name the app by its key: the process also remembers which app a key hash
opened (dropped as soon as that app's config refuses the key).
"""

from __future__ import annotations

from service.store import AppRead


class AppCache:
    """App name -> :class:`service.store.AppRead`; API-key hash -> app name."""

    def __init__(self, max_apps: int = 10_000) -> None:
        self._apps: dict[str, AppRead] = {}
        self._owners: dict[str, str] = {}
        self._max = max_apps

    def get(self, name: str) -> AppRead | None:
        return self._apps.get(name)

    def put(self, name: str, read: AppRead) -> None:
        if len(self._apps) >= self._max and name not in self._apps:
            self._apps.clear()  # crude but bounded: a process serving >10k apps re-reads them
        self._apps[name] = read

    def forget(self, name: str) -> None:
        self._apps.pop(name, None)

    def owner(self, key_hash: str) -> str | None:
        return self._owners.get(key_hash)

    def remember_owner(self, key_hash: str, name: str) -> None:
        if len(self._owners) >= self._max:
            self._owners.clear()
        self._owners[key_hash] = name

    def forget_owner(self, key_hash: str) -> None:
        self._owners.pop(key_hash, None)
