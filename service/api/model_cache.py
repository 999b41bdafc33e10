"""Each API process serves decide from the latest snapshot, decoded once per version."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from service.codec import CodecError
from service.models import ModelKind, model_kind
from service.records import AppConfig
from service.store import Store


@dataclass
class ServedModel:
    uid: str
    version: int
    kind: ModelKind
    learner: Any
    # decide advances the learner's RNG: one request at a time per model
    lock: threading.Lock = field(default_factory=threading.Lock)


class ModelCache:
    def __init__(self) -> None:
        self._models: dict[str, ServedModel] = {}
        self._loading: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, store: Store, config: AppConfig, version: int) -> ServedModel:
        """The app's model at ``version`` or newer, loading the snapshot if the cache is older."""
        served = self._models.get(config.name)
        if served is not None and served.uid == config.uid and served.version >= version:
            return served
        with self._guard:
            loading = self._loading.setdefault(config.name, threading.Lock())
        with loading:  # one thread decodes a new version; the others wait and reuse it
            served = self._models.get(config.name)
            if served is not None and served.uid == config.uid and served.version >= version:
                return served
            info, state = store.load_snapshot(config.name, serving=True)
            kind = model_kind(config.policy_kind)
            try:
                learner = kind.load_for_serving(state)
            except (ValueError, TypeError, KeyError) as exc:
                raise CodecError(f"{kind.name} cannot restore from this snapshot: {exc}") from exc
            seed = store.settings.decide_seed
            if seed is not None and kind.reseed is not None:  # reproducible draws (replays)
                kind.reseed(learner, seed)
            served = ServedModel(config.uid, info.version, kind, learner)
            self._models[config.name] = served
            return served

    def forget(self, name: str) -> None:
        self._models.pop(name, None)
