"""What the API does, once: decide, reward, activate, predict, learn (and interactions).

Every route that decides or rewards (Grove's native ``/apps/{app}/...`` routes and the Azure
Personalizer routes) calls these functions; the checks (the key opens the app, the app's kind
serves the operation, the context's size, the reward's range, eventIds) live here and nowhere
else. A route only translates its own request shape into these arguments and the result back
into its answer shape.

Errors are ``HTTPException`` (4xx with a message saying what is wrong) or
:class:`service.store.StoreError` (404/409 from Redis' answers); :mod:`service.api.errors` turns
both into the route family's error shape (Personalizer's ``{"error": {"code", "message"}}`` on
its routes).

The request path (decide, reward, activate, learn) is one Redis round trip and no thread: the
app's config comes from the process's cache (:mod:`service.api.app_cache`), the key and the
reward's range are checked against it, the model decides in the event loop, and the one Lua
script (asyncio client) records the decision or joins the reward after checking that the
config is still the current one (its ``rev``); if it is not, the config is read again and the
request tried again. A new model version named by the decide script is loaded in the background
(:mod:`service.api.model_cache`). ``predict`` and ``interactions`` read the model version (one
round trip) and run the model in one worker thread. The event log lines go through a queue
(:mod:`service.logs`): no write on the request path.

Example, a route::

    @router.post("/decide")
    async def decide(body: DecideRequest, caller: CallerDep, services: ServicesDep) -> dict:
        decision = await usecases.decide(services, caller, DecideQuery.of(body))
        return decision.as_answer()
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import groupby
from operator import itemgetter
from typing import Any, TypeVar

import numpy as np
from fastapi import HTTPException

from online.decision import Ranking
from service import codec, keys
from service.api.app_cache import AppCache
from service.api.auth import authorized, hash_key, is_admin, same_key
from service.api.model_cache import ModelCache, ServedModel
from service.logs import events
from service.models import Prediction, WrongKind, model_kind
from service.personalizer.configuration import apprentice
from service.personalizer.slots import reserved_for_later
from service.records import REQUEST_DIGEST, AppConfig, NewDecision
from service.settings import Settings
from service.store import AppRead, Gone, RewardOutcome, Stale, Store

__all__ = [
    "Caller",
    "DecideQuery",
    "Decision",
    "Predicted",
    "RewardOutcome",
    "Services",
    "activate",
    "app_for",
    "app_of",
    "decide",
    "decide_batch",
    "interactions",
    "learn",
    "predict",
    "reward",
]

T = TypeVar("T")

#: a JSON string literal (non-ASCII kept, as Starlette's JSONResponse writes it)
_string = json.encoder.encode_basestring  # type: ignore[attr-defined]

#: tries of a request whose app config changed under it (each change costs one more read)
_ATTEMPTS = 3

#: the most actions of a decision whose answer is kept for a repeat (GROVE_REPEAT_WINDOW): ~13
#: bytes an action, in the request's write and in Redis; with 1,000 actions that cost 30 % of
#: the decides/s (bench/http/README.md). Personalizer's clients rank at most 50.
_MAX_KEPT_RANKING = 64


# -- what the functions take and give -------------------------------------------------------------
@dataclass(frozen=True)
class Services:
    """One API process's shared parts (``app.state.services``; routes get it by ``ServicesDep``)."""

    store: Store
    models: ModelCache
    settings: Settings
    #: the configs of the apps this process serves (per rev)
    apps: AppCache = field(default_factory=AppCache)

    def with_settings(self, settings: Settings) -> Services:
        """The same store and caches with other settings (tests override the settings)."""
        return self if settings is self.settings else replace(self, settings=settings)


@dataclass(frozen=True)
class Caller:
    """Who calls: the key presented and the app the request names.

    ``app=None``: the key itself names the app (Personalizer's subscription key); the admin key
    opens no app that way.
    """

    key: str
    app: str | None = None


@dataclass(frozen=True)
class DecideQuery:
    """One decision to make: a flat context and, optionally, the actions to choose among.

    ``actions=None``: the app's own actions. ``excluded``: ids that must not be chosen.
    ``event_id=None``: Grove makes one. ``deferred``: the decision waits for ``activate``
    before its reward wait time starts (Personalizer's ``deferActivation``).
    ``action_features``: the features the request gave its actions, by id (None: none).
    ``baseline``: the action the client would show without Grove (Personalizer's first action,
    a slot's ``baselineAction``); used only by an app in Personalizer's Apprentice mode (see
    :mod:`service.personalizer.configuration`).
    ``repeatable``: the answer is kept so that a repeat of the request gets it again (the client
    named the eventId, and can repeat it); None: when ``event_id`` is given.
    """

    context: Mapping[str, Any]
    actions: Sequence[str] | None = None
    excluded: Sequence[str] = ()
    event_id: str | None = None
    deferred: bool = False
    action_features: Mapping[str, dict[str, Any]] | None = None
    baseline: str | None = None
    repeatable: bool | None = None

    @classmethod
    def of(cls, request: Any) -> DecideQuery:
        """From a :class:`service.api.schemas.DecideRequest` (the native body)."""
        return cls(
            context=request.context,
            actions=[a.id for a in request.actions] if request.actions is not None else None,
            excluded=tuple(request.excluded_actions),
            event_id=request.event_id,
            deferred=request.defer_activation,
            action_features=None if request.actions is None else
            ({a.id: a.features for a in request.actions if a.features} or None),
        )


@dataclass(frozen=True)
class Decision:
    """A recorded decision: the chosen action, its propensity and the ranking (Grove's order).

    ``baseline``: in Personalizer's Apprentice mode, the action the client is told to show
    (``action`` is then the policy's own draw, recorded and learned); None otherwise.
    """

    event_id: str
    action: str
    probability: float
    ranking: list[tuple[str, float]]
    model_version: int
    deferred: bool = False
    baseline: str | None = None

    def as_answer(self) -> dict:
        """The native ``DecideResponse`` fields (snake_case; the response model camelCases)."""
        return {
            "event_id": self.event_id,
            "action": self.action,
            "probability": self.probability,
            "ranking": [{"id": a, "probability": p} for a, p in self.ranking],
            "model_version": self.model_version,
        }

    def as_json(self) -> bytes:
        """The ``DecideResponse`` body (camelCase JSON), written straight from the ranking:
        the decide route answers it without validating it again (see :func:`_ranking_json`)."""
        return (
            f'{{"eventId":{_string(self.event_id)},"action":{_string(self.action)},'
            f'"probability":{_number(self.probability)},"ranking":{_ranking_json(self.ranking)},'
            f'"modelVersion":{int(self.model_version)}}}'
        ).encode()


def _number(p: float) -> str:
    if not math.isfinite(p):
        raise ValueError(f"probability {p} is not a JSON number")
    return repr(float(p))


class _IdJson(dict):
    """Action id -> its JSON string literal, written on first use and kept per process."""

    def __missing__(self, action: str) -> str:
        if len(self) > 100_000:
            self.clear()
        text = self[action] = _string(action)
        return text


_ID_JSON = _IdJson()


def _ranking_json(ranking: Sequence[tuple[str, float]]) -> str:
    """``[{"id": a, "probability": p}, ...]`` as JSON text, as ``json.dumps`` writes it.

    Written by hand because it was most of a decide's CPU with 1,000 actions: a policy's
    ranking holds a handful of distinct probabilities (the exploration share, the exploited
    one, 0) in runs, so each run is one ``str.join`` of the ids' (cached) literals, with no
    Python code per entry.
    """
    if isinstance(ranking, Ranking):
        return _ranking_json_from_arrays(ranking)
    runs = []
    for p, run in groupby(ranking, key=itemgetter(1)):
        end = f',"probability":{_number(p)}}}'
        between = end + ',{"id":'
        ids = map(_ID_JSON.__getitem__, map(itemgetter(0), run))
        runs.append('{"id":' + between.join(ids) + end)
    return f"[{','.join(runs)}]"


#: candidates object (a policy's inventory list, kept while it is unchanged) -> its ids' JSON
#: literals as an object array, for :func:`_ranking_json_from_arrays`
_LITERALS: dict[int, tuple[Sequence, np.ndarray]] = {}


def _literals(candidates: Sequence) -> np.ndarray:
    cached = _LITERALS.get(id(candidates))
    if cached is not None and cached[0] is candidates:
        return cached[1]
    if len(_LITERALS) >= 256:
        _LITERALS.clear()
    literals = np.empty(len(candidates), object)
    literals[:] = list(map(_ID_JSON.__getitem__, candidates))
    _LITERALS[id(candidates)] = (candidates, literals)
    return literals


def _ranking_json_from_arrays(ranking: Ranking) -> str:
    """:func:`_ranking_json` from the policy's arrays: the ids' literals put in ranking order
    by one numpy take, the runs of equal probability found by numpy, one ``str.join`` per run
    (with 1,000 actions, ~10x less CPU than from the pairs). The runs slice Python lists: a
    trained policy's probabilities mostly differ, one run per action, and numpy's slicing and
    scalars cost ~1.2 us a run (26 distinct probabilities: 82 -> 50 us; most of the rest is
    each float's shortest repr, ~1 us, which ``json.dumps`` pays as well)."""
    literals = _literals(ranking.candidates)[ranking.order].tolist()
    probs = ranking.probabilities
    values = probs.tolist()
    starts = [0, *(np.flatnonzero(probs[1:] != probs[:-1]) + 1).tolist()]
    ends = [*starts[1:], len(values)]
    runs = []
    for a, b in zip(starts, ends):
        end = ',"probability":' + _number(values[a]) + '}'
        runs.append('{"id":' + (end + ',{"id":').join(literals[a:b]) + end)
    return f"[{','.join(runs)}]"


@dataclass(frozen=True)
class Predicted:
    """A supervised kind's answer and the model version that gave it."""

    prediction: Prediction
    model_version: int


# -- authentication -------------------------------------------------------------------------------
def _app_and_version(services: Services, caller: Caller) -> tuple[AppConfig, int]:
    store, settings = services.store, services.settings
    if caller.app is None:
        name = store.key_owner(hash_key(caller.key))
        if name is None:
            raise HTTPException(
                401, "unknown key: use the API key of a Grove app (not the admin key)"
            )
    else:
        name = caller.app
    config, version = store.get_app_and_version(name)
    return authorized(name, config, caller.key, settings, store.key_owner), version


def app_for(services: Services, caller: Caller) -> tuple[AppConfig, int]:
    """The app ``caller`` may use and its current model version (blocking: Redis).

    For routes outside the decide/reward loop (``GET /apps/{app}``, ...); raises 401/403/404.
    """
    return _app_and_version(services, caller)


def _opens(config: AppConfig, key: str, settings: Settings) -> bool:
    return is_admin(key, settings) or same_key(key, config.api_key_hash)


async def _read(services: Services, name: str) -> AppRead | None:
    read = await services.store.read_app_async(name)
    if read is None:
        services.apps.forget(name)
    else:
        services.apps.put(name, read)
    return read


async def _open(services: Services, caller: Caller, fresh: bool = False) -> AppRead:
    """The app ``caller`` may use, from the process's cache (``fresh``: read again first).

    A refused key is checked against a fresh read before it is refused (the key may have been
    changed by another process); the answers are :func:`service.api.auth.authorized`'s.
    """
    store, settings = services.store, services.settings
    key_hash = None
    if caller.app is None:
        key_hash = hash_key(caller.key)
        name = None if fresh else services.apps.owner(key_hash)
        if name is None:
            name = await store.key_owner_async(key_hash)
            if name is None:
                raise HTTPException(
                    401, "unknown key: use the API key of a Grove app (not the admin key)"
                )
            services.apps.remember_owner(key_hash, name)
    else:
        name = caller.app
    read = None if fresh else services.apps.get(name)
    if read is not None and _opens(read.config, caller.key, settings):
        return read
    read = await _read(services, name)
    if read is not None and _opens(read.config, caller.key, settings):
        return read
    if key_hash is not None:
        services.apps.forget_owner(key_hash)
    owner = await store.key_owner_async(hash_key(caller.key))
    authorized(name, read.config if read else None, caller.key, settings, lambda _: owner)
    raise HTTPException(401, f"wrong API key for app {name!r} (or no such app)")  # not reached


async def app_of(services: Services, caller: Caller) -> AppConfig:
    """The app ``caller`` may use (from the process's cache; 401/403/404 as :func:`app_for`)."""
    return (await _open(services, caller)).config


class _Refused(HTTPException):
    """A refusal that rests on the app's config (a reward outside its range): said only after
    a fresh read of the config agrees (the cached one may predate a change)."""


async def _on_current_app(
    services: Services, caller: Caller, attempt: Callable[[AppRead], Awaitable[T]]
) -> T:
    """``attempt(read)`` with the app's cached config, again with a fresh read if the script
    says the config changed (``Stale``), the cached app was deleted (``Gone``: then 404 if it
    is gone for good, or the new app of that name) or the cached config refused the request
    (``_Refused``: refused again only if the fresh config does too)."""
    for k in range(_ATTEMPTS):
        read = await _open(services, caller, fresh=k > 0)
        try:
            return await attempt(read)
        except _Refused as exc:
            if k > 0:
                raise HTTPException(exc.status_code, exc.detail) from None
            services.apps.forget(read.config.name)
        except Stale:
            services.apps.forget(read.config.name)
        except Gone:
            services.apps.forget(read.config.name)
            if k > 0:
                raise
    raise HTTPException(
        503, "the app's configuration changed during the request, several times: retry",
        headers={"Retry-After": "1"},
    )


def _require(config: AppConfig, operation: str):
    """The kind's ``operation`` callable, or 422 naming the routes this app serves."""
    try:
        return model_kind(config.policy_kind).require(operation, config.name)
    except WrongKind as exc:
        raise HTTPException(422, str(exc)) from None


def _check_size(what: str, n: int, max_features: int) -> None:
    if n > max_features:
        raise HTTPException(
            422, f"{what} has {n} features, over the limit of {max_features} (GROVE_MAX_FEATURES)"
        )


# -- decide ---------------------------------------------------------------------------------------
def _decide_one(
    config: AppConfig, model: ServedModel, query: DecideQuery, max_features: int,
    baseline: str | None = None,
) -> tuple[NewDecision, Decision]:
    """``baseline``: Apprentice mode's (:func:`_baseline`), None otherwise."""
    _check_size("the context", len(query.context), max_features)
    decide_fn = _require(config, "decide")
    actions = query.actions if query.actions is not None else config.action_id_tuple
    # the app's actions' features, and over them those the request gave its actions
    features = config.action_features
    if query.action_features:
        features = {**(features or {}), **query.action_features}
    if not actions:
        raise HTTPException(
            422,
            f"no actions to choose from: app {config.name!r} has none and the request gives none",
        )
    excluded = set(query.excluded)
    if excluded and all(a in excluded for a in actions):
        raise HTTPException(422, "every action is excluded (excludedActions)")
    try:
        with model.lock:
            choice = decide_fn(model.learner, dict(query.context), actions, list(excluded),
                               features)
    except (ValueError, TypeError) as exc:
        raise HTTPException(422, f"cannot decide for this context: {exc}") from None
    event_id = query.event_id or uuid.uuid4().hex
    offered = None  # (the app's own actions)
    if excluded or actions is not config.action_id_tuple:
        offered = tuple(a for a in dict.fromkeys(actions) if a not in excluded)
        if offered == config.action_id_tuple:
            offered = None
    record = NewDecision(
        event_id,
        dict(query.context),
        choice.action,
        choice.probability,
        model.version,
        deferred=query.deferred,
        offered=offered,
        # (the request's own: the trainer has the app's, as the API)
        action_features=None if not query.action_features else
        {a: f for a, f in query.action_features.items() if a not in excluded} or None,
        baseline=baseline,
        # a client that names its eventIds can repeat a request: it is answered the same
        ranking=choice.ranking if _repeatable(query) and len(choice.ranking) <= _MAX_KEPT_RANKING
        else None,
    )
    decision = Decision(event_id, choice.action, choice.probability, choice.ranking,
                        model.version, query.deferred, baseline)
    return record, decision


def _repeatable(query: DecideQuery) -> bool:
    return query.event_id is not None if query.repeatable is None else query.repeatable


def _digest(queries: Sequence[DecideQuery]) -> bytes:
    """``REQUEST_DIGEST`` bytes that tell a repeat of these queries (a client's retry) from
    other queries with their eventIds: their contents as the client sent them (a later slot's
    exclusions of the actions chosen before it are not part of them: a repeat's draws may
    differ)."""
    contents = [
        [dict(q.context), None if q.actions is None else list(q.actions), list(q.excluded),
         q.event_id, q.deferred, None if q.action_features is None else dict(q.action_features),
         q.baseline]
        for q in queries
    ]
    return hashlib.blake2b(codec.pack(contents), digest_size=REQUEST_DIGEST).digest()


def _baseline(config: AppConfig, query: DecideQuery) -> str | None:
    """The query's baseline if the app is in Apprentice mode, else None; 422 if that baseline
    is not among its actions or is excluded (the client is told to show it)."""
    if query.baseline is None or not apprentice(config):
        return None
    actions = query.actions if query.actions is not None else config.action_id_tuple
    if query.baseline not in actions or query.baseline in query.excluded:
        raise HTTPException(
            422,
            f"the baseline action {query.baseline!r} (Apprentice mode: the first action, or "
            "the slot's baselineAction) must be an action of the request and not excluded",
        )
    return query.baseline


def _log_decision(config: AppConfig, decision: Decision) -> None:
    """One structured line per recorded decision (the eventId links it to its reward)."""
    events.info(
        "decide",
        extra={
            "app": config.name,
            "eventId": decision.event_id,
            "action": decision.action,
            "probability": decision.probability,
            "modelVersion": decision.model_version,
            "deferred": decision.deferred,
        },
    )


def _log_event(what: str, config: AppConfig, event_id: str, **fields: Any) -> None:
    events.info(what, extra={"app": config.name, "eventId": event_id, **fields})


def _decide_all(
    config: AppConfig,
    model: ServedModel,
    queries: Sequence[DecideQuery],
    batch: bool,
    distinct: bool,
    max_features: int,
) -> list[tuple[NewDecision, Decision]]:
    pairs: list[tuple[NewDecision, Decision]] = []
    allowed = [set(q.actions if q.actions is not None else config.action_id_tuple)
               - set(q.excluded) for q in queries] if distinct else []
    for i, query in enumerate(queries):
        try:
            baseline = _baseline(config, query)  # (before the exclusions of earlier slots)
            if distinct:  # later queries exclude the actions shown before them (the chosen
                # ones; Apprentice mode: the baselines), and each leaves the later ones one
                chosen = {d.baseline or d.action for _, d in pairs}
                reserved = reserved_for_later([a - chosen for a in allowed[i + 1:]])
                if chosen or reserved & allowed[i]:  # (slots.py)
                    query = replace(query, excluded=(*query.excluded, *chosen,
                                                     *sorted(reserved & allowed[i])))
            pairs.append(_decide_one(config, model, query, max_features, baseline))
        except HTTPException as exc:
            if not batch:
                raise
            # say which request of the batch is wrong
            raise HTTPException(exc.status_code, f"requests[{i}]: {exc.detail}") from None
    return pairs


async def _decide_many(
    services: Services,
    caller: Caller,
    queries: Sequence[DecideQuery],
    batch: bool,
    distinct: bool = False,
) -> list[Decision]:
    store, models = services.store, services.models

    async def attempt(read: AppRead) -> list[Decision]:
        config = read.config
        model = await models.serve(store, config, read.version)
        pairs = _decide_all(
            config, model, queries, batch, distinct, services.settings.max_features
        )
        records = [record for record, _ in pairs]
        if any(record.ranking is not None for record in records):
            request = _digest(queries)
            records = [replace(record, request=request) for record in records]
        recorded = await store.record_decisions_async(read, records)
        models.notice(store, config, recorded.version)  # newer: loaded in the background
        if recorded.first is not None:  # a repeated request: its first answers
            repeated = [replace(decision, action=first.action, probability=first.probability,
                                ranking=first.ranking, model_version=first.model_version)
                        for (_, decision), first in zip(pairs, recorded.first, strict=True)]
            for decision in repeated:
                _log_event("decide-repeated", config, decision.event_id, action=decision.action)
            return repeated
        for _, decision in pairs:
            _log_decision(config, decision)
        return [decision for _, decision in pairs]

    return await _on_current_app(services, caller, attempt)


async def decide(services: Services, caller: Caller, query: DecideQuery) -> Decision:
    """Choose an action for ``query.context`` and record the decision (it then waits the app's
    ``rewardWaitTime`` for its reward). 409 if ``query.event_id`` exists, unless the request
    repeats the one that made it (same context, actions, features; no reward or activation
    since): then the first answer again, so that a client may retry a request whose answer it
    did not get. 422 for a context the app cannot take or a kind that does not decide."""
    return (await _decide_many(services, caller, [query], False))[0]


async def decide_batch(
    services: Services, caller: Caller, queries: Sequence[DecideQuery], distinct: bool = False
) -> list[Decision]:
    """Decide every query with one model version, in order; recorded all or none. A bad query
    is 422 naming its index (``requests[i]: ...``); a repeated eventId is 422.

    ``distinct``: each query also excludes the actions chosen for the queries before it
    (multi-slot ranking: one action per slot, never twice).
    """
    if len(queries) > services.settings.max_batch:
        raise HTTPException(422, f"at most {services.settings.max_batch} requests per batch")
    given = [q.event_id for q in queries if q.event_id is not None]
    if len(given) != len(set(given)):
        raise HTTPException(422, "the batch repeats an eventId")
    return await _decide_many(services, caller, queries, True, distinct)


# -- reward and activate --------------------------------------------------------------------------
async def reward(
    services: Services, caller: Caller, event_id: str, value: float
) -> RewardOutcome:
    """Join ``value`` to the decision ``event_id`` (atomically; queued for the trainer).

    422 outside the app's rewardRange; 404 for an unknown or expired eventId; 409 for a
    deferred decision not activated yet, or a second reward under 'earliest' aggregation.
    """

    async def attempt(read: AppRead) -> RewardOutcome:
        low, high = read.config.reward_range
        if not low <= value <= high:  # also refuses NaN
            raise _Refused(422, f"reward {value} is outside the app's rewardRange {[low, high]}")
        outcome = await services.store.reward_async(read, event_id, value)
        _log_event("reward", read.config, event_id, reward=value, state=outcome.state)
        return outcome

    return await _on_current_app(services, caller, attempt)


async def activate(services: Services, caller: Caller, event_id: str) -> None:
    """Start the reward wait time of a deferred decision. 404 unknown/expired, 409 if it is
    active already (callers for whom a repeat is fine catch :class:`service.store.Conflict`)."""

    async def attempt(read: AppRead) -> None:
        await services.store.activate_async(read, event_id)
        _log_event("activate", read.config, event_id)

    await _on_current_app(services, caller, attempt)


# -- supervised kinds: predict, learn, interactions -----------------------------------------------
async def _newest_model(services: Services, config: AppConfig) -> ServedModel:
    """The app's model at the version current now (one round trip; a load waits for it)."""
    store = services.store
    version = await store.bounded(store.aio.hget(keys.snapshot(config.name), "version"))
    return await services.models.latest(services.store, config, int(version or 0))


async def predict(services: Services, caller: Caller, x: Mapping[str, Any]) -> Predicted:
    """P(y = 1 | x) from the app's latest snapshot (kinds that ``predict``; else 422)."""
    config = await app_of(services, caller)
    predict_fn = _require(config, "predict")
    _check_size("x", len(x), services.settings.max_features)
    model = await _newest_model(services, config)

    def run() -> Prediction:
        with model.lock:  # the learner caches its extracted trees: one request at a time
            return predict_fn(model.learner, dict(x))

    try:
        answer = await asyncio.to_thread(run)
    except (ValueError, TypeError) as exc:
        raise HTTPException(422, f"cannot predict for this x: {exc}") from None
    return Predicted(answer, model.version)


async def learn(
    services: Services,
    caller: Caller,
    x: Mapping[str, Any],
    label: int,
    event_id: str | None = None,
) -> str:
    """Queue a labeled event (kinds that ``learn_labeled``; else 422); returns its eventId.
    A client's ``event_id`` given again within the app's rewardWaitTime is a 409."""
    remember = event_id is not None
    event_id = event_id or uuid.uuid4().hex

    async def attempt(read: AppRead) -> str:
        _require(read.config, "learn_labeled")
        _check_size("x", len(x), services.settings.max_features)
        await services.store.learn_labeled_async(read, event_id, dict(x), label, remember)
        _log_event("learn", read.config, event_id, label=label)
        return event_id

    return await _on_current_app(services, caller, attempt)


async def interactions(
    services: Services, caller: Caller, top: int, alpha: float, leaves_only: bool
) -> tuple[dict, int]:
    """The kind's selected interactions (``{"interactions", "trees"}``) and the model version."""
    config = await app_of(services, caller)
    interactions_fn = _require(config, "interactions")
    model = await _newest_model(services, config)

    def run() -> dict:
        with model.lock:
            return interactions_fn(model.learner, top, alpha, leaves_only)

    return await asyncio.to_thread(run), model.version
