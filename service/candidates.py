"""An auto app's candidates: their evaluations, and changes to them on a live app.

The figures come from the app's published snapshot (``evaluations()`` and ``switches`` of the
learner, public methods of :class:`online.policies.auto.AutoPolicy`). A change of candidates
(or of the exploration floor) is applied to the full snapshot and written back as the next model
version in one transaction with the app's config (WATCH/MULTI on both keys, the same app hash
tag): the trainer's next publish then fails on the version, it takes the app again from this
snapshot and re-learns the events after its offset, so nothing learned is lost or learned twice.
The change is made to the trainer's last checkpoint (the whole state), so the served model, its
offset and counters become the checkpoint's; the trainer learns the events after it again.
"""

from __future__ import annotations

import re
import time
from typing import Any

import redis

from service import codec, keys
from service.models import model_kind
from service.param_checks import check_candidate_params
from service.records import AppConfig
from service.redis_watch import read_app, watched

#: every candidate learns every event, so each one costs the trainer a whole policy's time
MAX_CANDIDATES = 8
MAX_NAME = 64
#: a candidate name: it appears in logs, metrics-adjacent figures and URLs' JSON, so plain
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$"


def check_candidates(specs: Any) -> None:
    """``ValueError`` when an auto policy's candidate list is longer than
    :data:`MAX_CANDIDATES` or names a candidate other than by a short plain name (POST /apps and
    PATCH /candidates alike; the policy checks the rest: kinds, params, duplicates)."""
    if not isinstance(specs, list):
        return  # the policy names the problem
    if len(specs) > MAX_CANDIDATES:
        raise ValueError(f"at most {MAX_CANDIDATES} candidates, got {len(specs)}")
    for spec in specs:
        name = spec.get("name") if isinstance(spec, dict) else None
        if name is not None and not (isinstance(name, str) and len(name) <= MAX_NAME
                                     and re.match(NAME, name)):
            raise ValueError(f"candidate name {str(name)[:80]!r}: 1 to {MAX_NAME} letters, "
                             "digits and _.:- (starting with a letter or digit)")
    check_candidate_params(specs)


class NotAuto(ValueError):
    """The app's policy has no candidates (not an ``auto`` app)."""


class Gone(KeyError):
    """The app or its snapshot does not exist."""


def _figures(learner: Any) -> dict:
    return {"candidates": learner.evaluations(), "switches": learner.switches,
            "floor": learner.floor, "serving": learner.serving, "held": learner.held}


def _require_auto(config: AppConfig, learner: Any) -> None:
    if not hasattr(learner, "evaluations"):
        raise NotAuto(f"app {config.name!r} is a {config.policy_kind!r} app: evaluations and "
                      "candidates are for 'auto' apps (POST /apps with policy kind 'auto')")


def evaluations(store, config: AppConfig) -> dict:
    """The candidates' figures and the switches, from the published (serving) snapshot."""
    _, state = store.load_snapshot(config.name, serving=True)
    learner = model_kind(config.policy_kind).load(state)
    _require_auto(config, learner)
    return _figures(learner)


def change(client: redis.Redis, name: str, candidates: list[dict] | None = None,
           serving: str | None = None, floor: float | None = None) -> dict:
    """Apply a change of candidates / serving candidate / floor to the app's model.

    Raises :class:`Gone`, :class:`NotAuto`, ``CandidateConflict`` (removing the serving
    candidate without naming another) or ``ValueError`` (unknown kinds, bad params).
    """

    def attempt(pipe) -> dict:
        raw, (version, state, state_offset, state_learned, state_rejected) = read_app(
            pipe, name, "version", "state", "stateOffset", "stateLearned", "stateRejected")
        if raw is None or version is None or state is None:
            raise Gone(name)
        config = AppConfig.from_json(raw)
        kind = model_kind(config.policy_kind)
        learner = kind.load(codec.decode(state))
        _require_auto(config, learner)
        if candidates is not None:
            check_candidates(candidates)
            learner.set_candidates(candidates, serving=serving)
        elif serving is not None:
            learner.serve(serving)
        if floor is not None:
            learner.set_floor(floor)
        params = {**config.policy_params, "candidates": learner.candidates,
                  "floor": learner.floor}
        config = config.replace(policy_params=params, updated_at=time.time())
        pipe.multi()
        pipe.hset(keys.config(name), "json", config.to_json())
        pipe.hincrby(keys.config(name), "rev", 1)  # API processes cache the config per rev
        at_checkpoint = {}  # the served model is now the checkpoint's, at its offset
        if state_offset is not None:  # (else the state is at 'offset' already)
            at_checkpoint = {"offset": state_offset, "eventsLearned": state_learned,
                             "eventsRejected": state_rejected}
        pipe.hset(keys.snapshot(name), mapping={
            "version": int(version) + 1,
            "updatedAt": int(time.time() * 1000),
            "state": codec.encode(kind.dump(learner)),
            "serving": codec.encode(kind.dump_for_serving(learner)),
            **at_checkpoint,
        })
        pipe.execute()
        return _figures(learner)

    return watched(client, name, attempt)
