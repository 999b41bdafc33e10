"""Every Redis key Grove uses, in one place.

All keys of one app share the hash tag ``{app}`` so that Redis Cluster keeps an app on one
slot (its Lua scripts touch several of them at once) and shards apps across nodes. The two
global keys (the app index and the trainer heartbeats) are small and live on their own slot.
"""

from __future__ import annotations

PREFIX = "grove"

#: set of app names
APPS = f"{PREFIX}:apps"
#: sorted set trainer id -> last heartbeat (unix ms), read by /readyz
TRAINERS = f"{PREFIX}:trainers"
#: hash SHA-256(API key) -> app name: tells "another app's key" (403) from a wrong key (401)
API_KEYS = f"{PREFIX}:apikeys"
#: consumer group of an app's learning stream
TRAINER_GROUP = "trainers"


def _app(app: str, suffix: str) -> str:
    return f"{PREFIX}:{{{app}}}:{suffix}"


def config(app: str) -> str:
    """String: the app's configuration (JSON), including the hashed API key."""
    return _app(app, "config")


def snapshot(app: str) -> str:
    """Hash: version, offset (last stream id applied), eventsLearned, eventsRejected, updatedAt,
    state (codec bytes: the trainer resumes from it), serving (smaller codec bytes: API processes
    decide from it); all fields written together by one script."""
    return _app(app, "snapshot")


def stream(app: str) -> str:
    """Stream: joined events (decision + reward), learned in order; also the app's event log.

    Fields of an entry: eventId, context (msgpack map), action, probability (the logged
    propensity), reward (in the app's reward range), source (reward | sum | average | default |
    apprentice), modelVersion (of the snapshot that decided), decidedAt (unix ms), and offered
    (msgpack list of the action ids the decision was drawn among) when those were not the app's
    actions (the request named its own, or excluded some); actionFeatures when the request gave
    its actions features; baseline (the action the client showed) for a decision of
    Personalizer's Apprentice mode, and observed (the reward the client reported) when the
    policy's draw was not the baseline, so that ``reward`` is the app's default reward (see
    :mod:`service.scripts`, ``event_entry``). The trainer's consumer
    group is :data:`TRAINER_GROUP`; learned entries are kept ``event_retention`` seconds.
    """
    return _app(app, "events")


def deadlines(app: str) -> str:
    """Sorted set eventId -> deadline (unix ms) of decisions still waiting for a reward."""
    return _app(app, "deadlines")


def decision(app: str, event_id: str) -> str:
    """Hash: one decision record (context, action, probability, state, reward so far)."""
    return _app(app, f"decision:{event_id}")


def answer(app: str, event_id: str) -> str:
    """String, expiring after ``GROVE_REPEAT_WINDOW``: the ranking a decide answered (packed,
    :func:`service.codec.pack_ranking`) when its client named the eventId, so that a repeat of
    the request is answered the same (:data:`service.scripts.DECIDE`)."""
    return _app(app, f"answer:{event_id}")


def label(app: str, event_id: str) -> str:
    """String, expiring: a client's eventId of a labeled event, remembered for the app's
    rewardWaitTime (the same eventId within it is a 409, as decide's)."""
    return _app(app, f"label:{event_id}")


def app_pattern(app: str) -> str:
    """SCAN pattern matching every key of ``app``: the per-event ones (decision records, kept
    answers, labels, slots) are found this way by DELETE /apps/{app} (an app's name has no
    pattern character: ``service.api.schemas.APP_NAME``)."""
    return _app(app, "*")


def slots(app: str, event_id: str) -> str:
    """String (JSON list, expires with the decisions): the eventIds of the slot decisions of
    multi-slot Personalizer event ``event_id`` (service.personalizer.slots)."""
    return _app(app, f"slots:{event_id}")


def personalizer_records(app: str, collection: str) -> str:
    """Hash id -> JSON record of the app's Personalizer ``collection`` ("evaluations" or
    "featureImportances"): the client's id, name, window, the Grove job that computes it and,
    once read after the job ended, its result (kept after the job's record expires)."""
    return _app(app, f"personalizer:{collection}")


def lease(app: str) -> str:
    """String with a TTL: id of the trainer that owns the app (one trainer per app)."""
    return _app(app, "lease")


def stats(app: str) -> str:
    """Hash of counters: decisions, rewarded, defaulted, dropped."""
    return _app(app, "stats")


def tree_selection(app: str) -> str:
    """Hash: a "keep these trees" command for the trainer (written by the ``pruning`` job).

    Fields: trees (JSON list of tree indices of the current forest), nTrees (size of the forest
    they index), id (of the request), requestedAt (unix ms), status (pending | applied |
    rejected), then version (the snapshot that holds the pruned forest) or reason. The trainer,
    the model's single writer, applies a pending command to its learner and publishes a snapshot.
    """
    return _app(app, "tree-selection")


def all_keys(app: str) -> list[str]:
    """The app's fixed keys (decision records are found with :func:`decision_pattern`)."""
    return [
        config(app),
        snapshot(app),
        stream(app),
        deadlines(app),
        lease(app),
        stats(app),
        tree_selection(app),
        personalizer_records(app, "evaluations"),
        personalizer_records(app, "featureImportances"),
    ]
