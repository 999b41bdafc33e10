"""The warm-start job: a new policy learns the app's log and replaces its fresh model, once,
at the served offset, and never over a model that was replaced meanwhile. The job's ``run``
is called in process on the fixtures' redis-server, beside a real trainer."""

from __future__ import annotations

import random
import time

import pandas as pd

from service import keys
from service.jobs import warm_start
from service.jobs.dataset import Dataset
from service.models import model_kind
from service.personalizer import model_file
from tests.helpers.factories import create, drain

ACTIONS = [f"a{i}" for i in range(5)]


def _play(client, headers, n: int, rng: random.Random, app: str = "fav") -> None:
    """``n`` decisions of the five-action problem (reward 1 when the action is the context's
    favourite), each rewarded."""
    for _ in range(n):
        favourite = rng.choice(ACTIONS)
        body = {"context": {"favorite": favourite, "device": rng.choice("mdt")}}
        answer = client.post(f"/apps/{app}/decide", json=body, headers=headers).json()
        reward = float(answer["action"] == favourite)
        client.post(f"/apps/{app}/reward", json={"eventId": answer["eventId"], "reward": reward},
                    headers=headers)


def _switch(store, app: str, kind: str) -> str:
    """The app's policy switched to a fresh ``kind`` model (as a Personalizer policy update or
    an evaluation's apply does); the new model's id."""
    config = store.require_app(app)
    model_file.replace(store.redis, app, model_file.fresh(kind, {}, config.action_ids),
                       policy_kind=kind, policy_params={})
    return model_file.model_id(store.redis, app)


def _run(store, app: str, progress=None, **params) -> dict:
    dataset = Dataset(frame=pd.DataFrame(), app=app, source={"type": "app", "app": app},
                      store=store)
    return warm_start.run(warm_start.WarmStartParams(**params), dataset,
                          progress or (lambda fraction, message: None))


def _favourites(store, app: str) -> float:
    """The share of contexts whose served model's most probable action is the favourite."""
    info, state = store.load_snapshot(app, serving=True)
    kind = model_kind(store.require_app(app).policy_kind)
    learner, hits = kind.load(state), 0
    for favourite in ACTIONS:
        for device in "mdt":
            choice = kind.decide(learner, {"favorite": favourite, "device": device}, ACTIONS, [],
                                 None)
            hits += max(choice.ranking, key=lambda r: r[1])[0] == favourite
    return hits / 15


def test_a_new_policy_learns_the_log_and_earns_from_its_first_event(client, store, trainer):
    headers = create(client, "fav", actions=ACTIONS)
    _play(client, headers, 600, random.Random(0))
    drain(trainer)
    assert store.snapshot_info("fav").events_learned == 600
    token = _switch(store, "fav", "linucb")
    assert _favourites(store, "fav") <= 0.4  # a fresh model: no idea yet
    result = _run(store, "fav", model_id=token)
    assert result["installed"] and result["eventsLearned"] == 600, result
    info = store.snapshot_info("fav")
    assert (info.events_learned, info.events_before) == (600, 0)
    assert _favourites(store, "fav") == 1.0  # learned from the forest's events
    # the trainer carries on from the replayed model: each later event learned once
    _play(client, headers, 50, random.Random(1))
    drain(trainer)  # (its publication fails: the snapshot moved; it drops the app)
    drain(trainer)  # (and takes it again, from the replayed model's offset)
    assert store.snapshot_info("fav").events_learned == 650
    assert store.app_status("fav")["trainer_lag"] == 0


def test_events_published_during_the_replay_are_learned_before_the_install(client, store,
                                                                           trainer):
    headers = create(client, "fav", actions=ACTIONS)
    _play(client, headers, 200, random.Random(0))
    drain(trainer)
    token = _switch(store, "fav", "linucb")
    _play(client, headers, 1, random.Random(2))
    drain(trainer)  # (its publication fails: the snapshot moved; it drops the app)
    drain(trainer)  # the trainer takes the fresh model, learns the event, publishes
    assert store.snapshot_info("fav").events_learned == 1

    def meanwhile(fraction, message, done=[]):  # noqa: B006 - once
        if not done:  # the trainer learns and publishes 100 more while the replay runs
            done.append(True)
            _play(client, headers, 100, random.Random(1))
            drain(trainer)

    result = _run(store, "fav", meanwhile, model_id=token)
    assert result["installed"] and result["eventsLearned"] == 301, result
    drain(trainer)  # the trainer's own fresh model is dropped: it takes the replayed one
    drain(trainer)
    info = store.snapshot_info("fav")
    assert info.events_learned == 301 and store.app_status("fav")["trainer_lag"] == 0


def test_a_model_replaced_meanwhile_is_never_overwritten(client, store, trainer):
    headers = create(client, "fav", actions=ACTIONS)
    _play(client, headers, 100, random.Random(0))
    drain(trainer)
    token = _switch(store, "fav", "linucb")

    def reset(fraction, message, done=[]):  # noqa: B006 - once
        if not done:
            done.append(True)
            _switch(store, "fav", "trees")

    before = store.redis.hgetall(keys.snapshot("fav"))
    result = _run(store, "fav", reset, model_id=token)
    assert not result["installed"] and "policy" in result["reason"], result
    assert store.redis.hgetall(keys.snapshot("fav")) != before  # (the reset's, not the job's)
    assert store.require_app("fav").policy_kind == "trees"
    assert store.snapshot_info("fav").events_learned == 0
    # and a job given a model id that is no longer the app's does nothing at all
    stale = _run(store, "fav", model_id=token)
    assert not stale["installed"] and "replaced" in stale["reason"]


def test_max_events_replays_the_newest(client, store, trainer):
    headers = create(client, "fav", actions=ACTIONS)
    _play(client, headers, 120, random.Random(0))
    drain(trainer)
    _switch(store, "fav", "linucb")
    result = _run(store, "fav", max_events=50)
    assert result["installed"] and result["eventsLearned"] == 50
    info = store.snapshot_info("fav")
    assert (info.events_learned, info.events_before) == (50, 70)


def test_since_ms_replays_only_the_events_logged_since(client, store, trainer):
    headers = create(client, "fav", actions=ACTIONS)
    _play(client, headers, 40, random.Random(0))
    seconds, micros = store.redis.time()
    since = seconds * 1000 + micros // 1000 + 1
    time.sleep(0.005)
    _play(client, headers, 30, random.Random(1))
    drain(trainer)
    _switch(store, "fav", "linucb")
    result = _run(store, "fav", since_ms=since)
    assert result["installed"] and result["eventsLearned"] == 30, result
    assert _run(store, "fav", since_ms=since + 10 ** 9)["installed"] is False  # none since
