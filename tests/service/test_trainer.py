"""The trainer: learns joined events and expired defaults once, survives its own death."""

import os
import sys
import threading
import time

import pytest

from service import codec, keys
from service.redis_client import connect
from service.redis_text import as_str
from service.trainer import REFIT_NICENESS, Trainer
from tests.helpers.factories import create, drain, make_settings


def decide(client, headers, n, app="shop", **extra):
    body = {"requests": [{"context": {"x": i % 2, "site": "s"}, **extra} for i in range(n)]}
    answer = client.post(f"/apps/{app}/decide/batch", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
    return [r["eventId"] for r in answer.json()["responses"]]


def reward(client, headers, events, value=1.0, app="shop"):
    for event in events:
        answer = client.post(
            f"/apps/{app}/reward", json={"eventId": event, "reward": value}, headers=headers
        )
        assert answer.status_code == 200, answer.text


def status(client, headers, app="shop"):
    return client.get(f"/apps/{app}", headers=headers).json()


def test_rewards_and_expired_defaults_are_learned_once(client, trainer):
    shop = create(client, rewardWaitTime=1.0, defaultReward=0.0)
    events = decide(client, shop, 10)
    reward(client, shop, events[:4])
    drain(trainer)
    assert status(client, shop)["eventsLearned"] == 4
    time.sleep(1.05)
    drain(trainer)
    drain(trainer)
    s = status(client, shop)
    assert s["eventsLearned"] == 10 and s["pendingDecisions"] == 0 and s["trainerLag"] == 0
    assert s["stats"] == {"decisions": 10, "rewarded": 4, "defaulted": 6}
    assert s["trainerAlive"]


@pytest.mark.skipif(sys.platform != "linux", reason="a nice value per thread is Linux's")
def test_refits_run_nicer_than_the_learning_loop(trainer):
    def nice() -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    loop = nice()
    assert trainer._refits.submit(nice).result(timeout=10) == min(19, loop + REFIT_NICENESS)
    assert nice() == loop  # the loop's own thread keeps its priority


def test_a_trainer_that_dies_is_replaced_from_the_snapshot(client, settings):
    """Trainer 1 learns past its snapshot and dies; trainer 2 waits out the lease, resumes from
    the snapshot and re-reads after its offset: nothing lost, nothing learned twice."""
    slow = make_settings(settings.redis_url, snapshot_interval=3600, snapshot_events=10**6)
    first = Trainer(connect(slow), slow, trainer_id="first")
    shop = create(client, rewardWaitTime=60)
    reward(client, shop, decide(client, shop, 15))
    drain(first)  # learns and publishes 15 (drain forces a snapshot)
    reward(client, shop, decide(client, shop, 10))
    first.refresh_leases()
    assert first.step() == 10  # learned, not published: then it "dies" (no shutdown)
    first.refresh_leases()  # its last beat: the 1 s lease must still run when `second` looks,
    # however slow the machine was while `first` learned
    assert status(client, shop)["eventsLearned"] == 15

    second = Trainer(connect(slow), slow, trainer_id="second")
    second.refresh_leases()
    assert "shop" not in second.owned  # the lease of the dead trainer still runs
    time.sleep(slow.trainer_lease + 0.1)
    drain(second)
    s = status(client, shop)
    assert s["eventsLearned"] == 25 and s["trainerLag"] == 0

    # the zombie wakes up: its snapshot would double-count, so it is refused and it lets go
    assert not first.maybe_publish("shop", force=True)
    assert "shop" not in first.owned
    assert status(client, shop)["eventsLearned"] == 25


def test_one_trainer_per_app_and_apps_shared_between_trainers(client, settings):
    create(client, "shop")
    create(client, "news")
    a = Trainer(connect(settings), settings, trainer_id="a")
    b = Trainer(connect(settings), settings, trainer_id="b")
    a.refresh_leases()
    b.refresh_leases()
    assert set(a.owned) == {"news", "shop"} and not b.owned
    a.shutdown()  # clean stop hands the apps over at once
    b.refresh_leases()
    assert set(b.owned) == {"news", "shop"}


def test_sum_aggregation_learns_the_sum_at_the_deadline(client, trainer, store):
    shop = create(client, rewardWaitTime=1.0, rewardAggregation="sum", rewardRange=[0, 10])
    [event] = decide(client, shop, 1)
    reward(client, shop, [event], 2.0)
    answer = client.post(
        "/apps/shop/reward", json={"eventId": event, "reward": 3.0}, headers=shop
    ).json()
    assert (answer["state"], answer["rewardSum"], answer["rewardCount"]) == ("accumulating", 5.0, 2)
    drain(trainer)
    assert status(client, shop)["eventsLearned"] == 0
    time.sleep(1.05)
    drain(trainer)
    drain(trainer)
    assert status(client, shop)["eventsLearned"] == 1
    [(_, fields)] = store.redis.xrange(keys.stream("shop"))
    assert fields[b"source"] == b"sum" and float(fields[b"reward"]) == 5.0


def test_new_actions_reach_the_learner_and_deleted_apps_are_dropped(client, trainer):
    from tests.helpers.factories import ADMIN

    create(client, "shop")
    trainer.refresh_leases()
    assert sorted(trainer.owned["shop"].learner.actions) == ["a", "b", "c"]
    client.patch("/apps/shop", json={"actions": ["a", "b", "d"]}, headers=ADMIN)
    trainer.refresh_leases()
    assert sorted(trainer.owned["shop"].learner.actions) == ["a", "b", "d"]
    client.delete("/apps/shop", headers=ADMIN)
    trainer.refresh_leases()
    assert "shop" not in trainer.owned


@pytest.mark.parametrize("kind", ["auto", "trees", "linucb"])
def test_a_removed_actions_late_rewards_are_learned_and_leave_it_out(client, trainer, kind):
    from tests.helpers.factories import ADMIN

    shop = create(client, "shop", policy={"kind": kind, "params": {"seed": 1}})
    trainer.refresh_leases()
    body = {"requests": [{"context": {"x": i % 2}} for i in range(60)]}
    answer = client.post("/apps/shop/decide/batch", json=body, headers=shop)
    on_c = [r["eventId"] for r in answer.json()["responses"] if r["action"] == "c"]
    assert on_c  # uniform at first: ~20 of 60
    client.patch("/apps/shop", json={"actions": ["a", "b"]}, headers=ADMIN)  # c's campaign ends
    trainer.refresh_leases()
    reward(client, shop, on_c)
    drain(trainer)
    learner = trainer.owned["shop"].learner
    assert sorted(learner.actions) == ["a", "b"] and learner.n_learned == len(on_c)


def test_the_actions_a_request_offered_reach_the_learner_with_its_event(client, trainer, store):
    """A decision drawn among the request's own actions (or with some excluded) is learned with
    those actions, rewarded or defaulted, so that auto evaluates its candidates over them; one
    drawn among the app's actions carries none."""
    shop = create(client, rewardWaitTime=1.0, defaultReward=0.0,  # actions a, b, c
                  policy={"kind": "auto", "params": {"seed": 1}})
    trainer.refresh_leases()
    named = decide(client, shop, 6, actions=["b", "a", "x"])
    excluded = decide(client, shop, 6, excludedActions=["c"])
    plain = decide(client, shop, 6)
    reward(client, shop, named[:3] + excluded[:3] + plain[:3])
    drain(trainer)
    time.sleep(1.05)
    drain(trainer)
    drain(trainer)
    entries = {as_str(f[b"eventId"]): f for _, f in store.redis.xrange(keys.stream("shop"))}
    assert len(entries) == 18
    for event in named:
        assert codec.unpack(entries[event][b"offered"]) == ["b", "a", "x"]
    for event in excluded:
        assert codec.unpack(entries[event][b"offered"]) == ["a", "b"]
    assert all(b"offered" not in entries[event] for event in plain)
    learner = trainer.owned["shop"].learner
    assert learner.n_learned == 18
    assert [e["events"] for e in learner.evaluations()] == [18, 18]


def test_a_request_s_new_actions_are_served_from_their_first_events(client, trainer):
    """Actions that come with requests after the trees' last refit (the day's articles) are
    learned from their first events, by the trainer and in the model the API serves: the one
    that pays is served most long before another refit. Before, they were unseen until then,
    drawn uniformly (~4 of 20 here)."""
    shop = create(client, policy={"kind": "trees", "params": {"seed": 1, "refit_fraction": 1.0}})
    reward(client, shop, decide(client, shop, 40))  # a, b, c: one refit (at 32), the only one
    drain(trainer)
    new = ["n1", "n2", "n3", "n4", "n5"]
    for _ in range(5):
        body = {"requests": [{"context": {"x": i % 2, "site": "s"}, "actions": new}
                             for i in range(20)]}
        served = client.post("/apps/shop/decide/batch", json=body, headers=shop).json()
        for r in served["responses"]:
            reward(client, shop, [r["eventId"]], value=float(r["action"] == "n3"))
        drain(trainer)
    assert [r["action"] for r in served["responses"]].count("n3") >= 15
    learner = trainer.owned["shop"].learner
    assert learner.n_refits == 1 and learner.n_learned == 140


def test_a_malformed_event_is_counted_not_fatal(client, trainer, store):
    shop = create(client)
    store.redis.xadd(
        keys.stream("shop"),
        {
            "eventId": "junk",
            "context": b"\xc1",
            "action": "a",
            "probability": "0.5",
            "reward": "1",
            "source": "reward",
        },
    )
    reward(client, shop, decide(client, shop, 3))
    drain(trainer)
    s = status(client, shop)
    assert (s["eventsLearned"], s["eventsRejected"], s["trainerLag"]) == (3, 1, 0)


def test_a_bad_event_inside_a_run_rejects_it_alone(client, trainer, store):
    """The trainer hands reward events to the forest in runs (learn_many): a bad event in the
    middle is rejected alone, the ones before and after it are learned once, in order, and the
    forest ends exactly as one that learned the good events one by one."""
    shop = create(client, rewardWaitTime=60)
    trainer.refresh_leases()
    owned = trainer.owned["shop"]
    reference = owned.kind.load(owned.kind.dump(owned.learner))
    reward(client, shop, decide(client, shop, 4))
    bad = {"eventId": "bad", "context": codec.pack({"x": 1}), "action": "a", "reward": "1"}
    store.redis.xadd(keys.stream("shop"), {**bad, "probability": "0", "source": "reward"})
    reward(client, shop, decide(client, shop, 5))
    drain(trainer)
    s = status(client, shop)
    assert (s["eventsLearned"], s["eventsRejected"], s["trainerLag"]) == (9, 1, 0)

    for _, fields in store.redis.xrange(keys.stream("shop")):
        if fields[b"eventId"] != b"bad":
            reference.learn_one(
                codec.unpack(fields[b"context"]),
                fields[b"action"].decode(),
                float(fields[b"reward"]),
                float(fields[b"probability"]),
            )
    assert_same_state(owned.learner.to_state(), reference.to_state())


def assert_same_state(a, b, where="state"):
    import numpy as np

    if isinstance(b, dict):
        assert isinstance(a, dict) and a.keys() == b.keys(), where
        for key in b:
            assert_same_state(a[key], b[key], f"{where}.{key}")
    elif isinstance(b, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(b, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_state(x, y, f"{where}[{i}]")
    else:
        assert a == b, where


def test_learned_events_older_than_the_retention_are_trimmed(client, redis_url):
    settings = make_settings(redis_url, event_retention=0)
    trainer = Trainer(connect(settings), settings)
    shop = create(client)
    reward(client, shop, decide(client, shop, 20))
    drain(trainer)
    offset = trainer.owned["shop"].offset
    remaining = trainer.redis.xrange(keys.stream("shop"))
    assert [entry_id.decode() for entry_id, _ in remaining] == [offset]  # older ones are gone
    assert status(client, shop)["eventsLearned"] == 20


@pytest.mark.slow
def test_trainer_run_loop_stops_cleanly_and_publishes(client, settings):
    import threading

    shop = create(client)
    trainer = Trainer(connect(settings), settings)
    stop = threading.Event()
    thread = threading.Thread(target=trainer.run, args=(stop,))
    thread.start()
    reward(client, shop, decide(client, shop, 12))
    deadline = time.monotonic() + 10
    while status(client, shop)["eventsLearned"] < 12 and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.set()
    thread.join(10)
    s = status(client, shop)
    assert s["eventsLearned"] == 12 and not s["trainerAlive"]  # lease released on stop


def test_api_processes_serve_a_smaller_snapshot_that_decides_like_the_trainer(
    client, trainer, store
):
    shop = create(client, rewardWaitTime=60)
    events = decide(client, shop, 60)
    reward(client, shop, events[::2], 1.0)
    reward(client, shop, events[1::2], 0.0)
    drain(trainer)
    info, full = store.load_snapshot("shop")
    _, serving = store.load_snapshot("shop", serving=True)
    assert len(codec.encode(serving)) < len(codec.encode(full))
    kind = trainer.owned["shop"].kind
    learner, server = kind.load(full), kind.load(serving)
    for x in range(6):
        context = {"x": x % 2, "site": "s"}
        assert kind.decide(learner, context, ["a", "b", "c"], []) == kind.decide(
            server, context, ["a", "b", "c"], []
        )


def test_the_whole_state_is_checkpointed_at_its_rate_and_a_new_owner_resumes_there(
        client, settings, store):
    """Snapshots between checkpoints carry the serving model only; a trainer taking the app
    over starts from the checkpoint, learns the events after it again (once) and publishes
    only when it has caught up with the served snapshot (the counts never go back)."""
    rare = make_settings(settings.redis_url, snapshot_interval=0, checkpoint_rate=1,
                         trainer_batch=4)  # a checkpoint only when forced (hand-over, stop)
    first = Trainer(connect(rare), rare, trainer_id="first")
    shop = create(client, rewardWaitTime=60)
    reward(client, shop, decide(client, shop, 15))
    drain(first)  # the forced publication is a checkpoint
    checkpoint, _ = store.load_checkpoint("shop")
    assert checkpoint.events_learned == 15 and checkpoint.offset == checkpoint.served_offset

    reward(client, shop, decide(client, shop, 10))
    first.refresh_leases()
    while first.step():
        pass
    served = status(client, shop)
    assert served["eventsLearned"] == 25  # published, without the whole state:
    later, _ = store.load_checkpoint("shop")
    assert (later.events_learned, later.offset) == (15, checkpoint.offset)
    assert later.version == served["modelVersion"] and later.served_offset > later.offset
    pending = client.app.state.store.redis.xpending(keys.stream("shop"), keys.TRAINER_GROUP)
    assert pending["pending"] == 10  # acknowledged at the next checkpoint only
    first.refresh_leases()  # its last beat; then it dies

    second = Trainer(connect(rare), rare, trainer_id="second")
    time.sleep(rare.trainer_lease + 0.1)
    second.refresh_leases()
    assert second.owned["shop"].events_learned == 15  # from the checkpoint
    second.learn("shop")  # 4 of the 10 events after it
    assert not second.maybe_publish("shop")  # behind the served snapshot: not published
    assert status(client, shop)["eventsLearned"] == 25
    drain(second)
    s = status(client, shop)
    assert s["eventsLearned"] == 25 and s["trainerLag"] == 0
    final, _ = store.load_checkpoint("shop")
    assert final.events_learned == 25 and final.offset == final.served_offset


def test_a_snapshot_written_before_checkpoints_resumes_from_its_offset(client, trainer, store):
    shop = create(client, rewardWaitTime=60)
    reward(client, shop, decide(client, shop, 5))
    drain(trainer)
    store.redis.hdel(keys.snapshot("shop"), "stateOffset", "stateLearned", "stateRejected")
    checkpoint, state = store.load_checkpoint("shop")
    info, same = store.load_snapshot("shop")
    assert (checkpoint.offset, checkpoint.events_learned) == (info.offset, 5)
    assert codec.encode(state) == codec.encode(same)


def test_a_trainer_whose_lease_ran_out_reads_nothing_once_another_took_the_app(client, settings):
    """A take-over slower than the lease (or a paused trainer) leaves two trainers that think
    they own the app: the one whose lease ran out must not read the entries the new owner's
    rewind made available again (they would be delivered to it, and never learned)."""
    shop = create(client, rewardWaitTime=60)
    first = Trainer(connect(settings), settings, trainer_id="first")
    first.refresh_leases()
    assert "shop" in first.owned
    reward(client, shop, decide(client, shop, 5))
    first.redis.delete(keys.lease("shop"))  # its lease ran out
    second = Trainer(connect(settings), settings, trainer_id="second")
    second.refresh_leases()
    assert "shop" in second.owned
    assert first.learn("shop") == 0 and "shop" not in first.owned  # reads nothing, lets go
    drain(second)
    assert status(client, shop)["eventsLearned"] == 5
