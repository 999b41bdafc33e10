"""Personalizer's model file and model replacement, in Grove's own terms.

**The model file** (``GET /model``, ``PUT /model``) is Grove's versioned state, never a pickle
and never Vowpal Wabbit's: one :mod:`service.codec` payload (msgpack with numpy arrays) holding

    {"format": "grove.personalizer-model", "version": 1, "app", "kind", "params",
     "actions", "state": <the learner's to_state()>}

The same model exports the same bytes, and an imported file exports back byte for byte (the
SDKs' own test of export and import checks both): no export time in the file (files written
with an ``exportedAt`` still read), and the decision that checks an import is made by a copy.

An import is checked before anything is written: the codec envelope, the format and version,
a known bandit kind, its params and the state's as ``POST /apps`` checks a policy's (a file
with ``alpha: 1e300`` in its state, or ``ridge: -5`` as its params, was imported, then decides
or a reset answered 500), a state the kind restores from, and a decision made with the
restored learner; anything else is a 400 ``InvalidModelImportFormat``, never a crash. Personalizer's
``signed`` export (a signed zip) has no Grove counterpart: the file is the same either way.

**Replacing a model** (import, reset, a new policy) writes the app's config and a new snapshot
in one transaction: version + 1, the old snapshot's stream offset (so the new model learns the
events that come after the old one's), its own state. The trainer then fails to publish over it
(the snapshot's version moved), drops its learner and takes the app again from the new snapshot;
API processes load the new version at their next request. Events already learned by the old
model are not re-learned. Each replacement names its model with a new ``modelId`` in the
snapshot (its identity: publications keep it).

**A replayed model** (:func:`install_replayed`: the ``warm-start`` job, run after an evaluation's
policy is applied or the policy is changed through ``/configurations/policy``) is installed the same
way, with the offset it has learned up to instead of the old snapshot's: only while that is still
the served snapshot's offset (else the job learns the events since and tries again), and only while
the app's model is still the one the job started from (its ``modelId``) with the same policy.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import redis

from service import codec, keys
from service.models import model_kind
from service.param_checks import check_params
from service.records import AppConfig
from service.redis_text import as_str
from service.redis_watch import read_app, watched

FORMAT = "grove.personalizer-model"
VERSION = 1


class ModelFileError(ValueError):
    """Bytes that are not a Grove model file Grove can serve (400 InvalidModelImportFormat)."""


def export(config: AppConfig, state: dict) -> bytes:
    """The model file of ``config``'s app with the trainer ``state`` of its snapshot."""
    return codec.encode(
        {
            "format": FORMAT,
            "version": VERSION,
            "app": config.name,
            "kind": config.policy_kind,
            "params": config.policy_params,
            "actions": config.action_ids,
            "state": state,
        }
    )


def read(payload: bytes) -> tuple[str, dict[str, Any], dict, Any]:
    """``(kind, params, state, learner)`` of a model file, checked as the module doc says."""
    try:
        content = codec.decode(payload)
    except codec.CodecError as exc:
        raise ModelFileError(f"not a Grove model file (GET /model exports one): {exc}") from None
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise ModelFileError(f"not a Grove model file: its format is not {FORMAT!r}")
    if content.get("version") != VERSION:
        raise ModelFileError(
            f"model file version {content.get('version')!r} is not supported (Grove reads "
            f"version {VERSION})"
        )
    kind_name, params, state = content.get("kind"), content.get("params"), content.get("state")
    if not (isinstance(kind_name, str) and isinstance(params, dict) and isinstance(state, dict)):
        raise ModelFileError("the model file lacks its kind, params or state")
    if state.get("statistics") is False:  # (an auto app's keeps one candidate's model)
        raise ModelFileError("the model file's state is a serving copy (to_state(statistics="
                             "False)): it decides but cannot learn; GET /model exports the "
                             "whole state")
    try:
        kind = model_kind(kind_name)
    except ValueError as exc:
        raise ModelFileError(str(exc)) from None
    if not kind.uses_actions:
        raise ModelFileError(
            f"a {kind_name!r} model does not rank: Personalizer apps need a bandit kind"
        )
    try:  # the params become the app's, the state's are its learner's: as POST /apps checks
        check_params(kind.cls, params)
        fresh(kind_name, params, ["a", "b"])
        if isinstance(state.get("params"), dict):
            check_params(kind.cls, state["params"])
    except (TypeError, ValueError) as exc:
        raise ModelFileError(f"the model file's params are not a {kind_name!r} policy's: {exc}") \
            from None
    try:
        learner = kind.load(state)
        actions = [str(a) for a in content.get("actions") or []][:2] or ["a", "b"]
        # a restored learner must also decide; a copy does (a draw moves its generator)
        kind.decide(kind.load(state), {}, actions, [])
    except Exception as exc:  # noqa: BLE001 - a hostile state may raise anything from_state
        raise ModelFileError(
            f"the model file's state does not restore a {kind_name!r} policy: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    return kind_name, params, state, learner


def fresh(kind_name: str, params: dict[str, Any], actions: list[str]) -> Any:
    """A new learner (TypeError/ValueError for params the kind refuses)."""
    return model_kind(kind_name).new(dict(params), actions)


def replace(client: redis.Redis, name: str, learner: Any, **config_changes: Any) -> AppConfig:
    """Write ``learner`` as the app's new model and ``config_changes`` into its config, in one
    transaction (see the module doc). Returns the new config; KeyError if the app is gone."""

    def attempt(pipe) -> AppConfig:
        raw, (version, offset, *done) = read_app(
            pipe, name, "version", "offset", "eventsLearned", "eventsRejected", "eventsBefore")
        if raw is None or version is None:
            raise KeyError(name)
        config = AppConfig.from_json(raw).replace(updated_at=time.time(), **config_changes)
        # the stream's events before now are not this model's (the app's lag); it learns from
        # the events after the current offset
        snapshot = _new_model(config, learner, version, as_str(offset or "0-0"), (0, 0),
                              sum(int(n or 0) for n in done))
        pipe.multi()
        pipe.hset(keys.config(name), "json", config.to_json())
        pipe.hincrby(keys.config(name), "rev", 1)  # as service.candidates: config caches
        pipe.hset(keys.snapshot(name), mapping=snapshot)
        pipe.execute()
        return config

    return watched(client, name, attempt)


def _new_model(config: AppConfig, learner: Any, version, offset: str,
               counts: tuple[int, int], before: int) -> dict[str, Any]:
    """The snapshot fields of ``learner`` installed as a new model (a new ``modelId``, the
    snapshot's next version) that has learned the stream up to ``offset``: ``counts`` events
    learned and rejected, ``before`` events of the stream up to there that it did not see."""
    kind = model_kind(config.policy_kind)
    learned, rejected = counts
    state = codec.encode(kind.dump(learner))
    serving = codec.encode(kind.dump_for_serving(learner))
    return {
        "version": int(version) + 1,
        "eventsLearned": learned,
        "eventsRejected": rejected,
        "eventsBefore": before,
        "updatedAt": int(time.time() * 1000),  # (once encoded: after the config's time)
        "state": state,
        "serving": serving,
        "stateOffset": offset,
        "stateLearned": learned,
        "stateRejected": rejected,
        "modelId": uuid.uuid4().hex,
    }


def model_id(client: redis.Redis, name: str) -> str:
    """The identity of the app's current model ('' for one never replaced)."""
    return as_str(client.hget(keys.snapshot(name), "modelId") or "")


def install_replayed(client: redis.Redis, name: str, learner: Any, replayed: dict[str, Any]
                     ) -> tuple[str, str]:
    """Install ``learner``, which learned the app's stream up to ``replayed["offset"]``
    (``learned`` events, ``rejected`` refused) with the policy ``kind``/``params``, as the
    model of the app whose model is ``replayed["model_id"]`` (see the module doc).

    Returns ``("installed", offset)``; ``("moved", offset)``: the served snapshot is now at
    ``offset``, learn the events up to it and call again; ``("superseded", why)``: the app's
    model or policy changed since, nothing is written (nor is anything if the app is gone).
    """

    def attempt(pipe) -> tuple[str, str]:
        raw, (version, offset, current, *done) = read_app(
            pipe, name, "version", "offset", "modelId", "eventsLearned", "eventsRejected",
            "eventsBefore")
        if raw is None or version is None:
            return "superseded", f"app {name!r} is gone"
        config = AppConfig.from_json(raw)
        if (config.policy_kind, config.policy_params) != (replayed["kind"], replayed["params"]):
            return "superseded", "the app's policy changed"
        if as_str(current or "") != replayed["model_id"]:
            return "superseded", "the app's model was replaced (reset, import, policy)"
        offset = as_str(offset or "0-0")
        if offset != replayed["offset"]:
            return "moved", offset
        learned, rejected = replayed["learned"], replayed["rejected"]
        # the stream's events up to the offset this model did not see (trimmed, labeled,
        # beyond the replay's limit)
        before = max(0, sum(int(n or 0) for n in done) - learned - rejected)
        snapshot = _new_model(config, learner, version, offset, (learned, rejected), before)
        pipe.multi()
        pipe.hset(keys.snapshot(name), mapping=snapshot)
        pipe.execute()
        return "installed", offset

    return watched(client, name, attempt)
