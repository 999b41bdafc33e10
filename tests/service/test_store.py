"""The Lua scripts behind decide / reward / activate / expiry, at the store level (no learner)."""

import time

import pytest

from service import codec, keys
from service.records import Aggregation, NewDecision
from service.store import Conflict, NotFound, Store
from tests.helpers.factories import make_config


def decision(event_id: str, deferred: bool = False) -> NewDecision:
    return NewDecision(event_id, {"x": 1.0, "site": "a"}, "a", 0.5, 0, deferred=deferred)


def expire(store, config, default: float = 0.0):
    """Run the expiry script on every due decision (what the trainer does)."""
    due = [
        d.decode() for d in store.redis.zrangebyscore(keys.deadlines(config.name), "-inf", "+inf")
    ]
    return store.scripts.expire(
        keys=[
            keys.config(config.name),
            keys.deadlines(config.name),
            keys.stream(config.name),
            keys.stats(config.name),
        ]
        + [keys.decision(config.name, i) for i in due],
        args=[config.uid, repr(default)] + due,
    )


def stream_entries(store, name):
    return [
        {k.decode(): v for k, v in fields.items()}
        for _, fields in store.redis.xrange(keys.stream(name))
    ]


def test_all_keys_of_an_app_share_its_hash_tag():
    for key in keys.all_keys("shop") + [keys.decision("shop", "e1")]:
        assert "{shop}" in key


def test_create_app_twice_conflicts(store, empty_state):
    config = make_config()
    store.create_app(config, empty_state)
    with pytest.raises(Conflict):
        store.create_app(make_config(), empty_state)
    assert store.get_app("shop") == config
    assert store.snapshot_info("shop").version == 0


def test_decision_record_has_a_deadline_and_existing_event_id_conflicts(store, empty_state):
    config = make_config(reward_wait_time=30)
    store.create_app(config, empty_state)
    store.record_decisions(config, [decision("e1")])
    deadline = store.redis.zscore(keys.deadlines("shop"), "e1")
    assert abs(deadline / 1000 - (time.time() + 30)) < 2
    assert store.redis.pttl(keys.decision("shop", "e1")) > 0  # every record expires
    with pytest.raises(Conflict, match="e1"):
        store.record_decisions(config, [decision("e2"), decision("e1")])
    assert not store.redis.exists(keys.decision("shop", "e2"))  # all or none


def kept(event_id: str, action: str = "a", request: bytes = b"request-digest-1", **fields):
    """A decision whose client named the eventId: its answer is kept, for a request of that
    16-byte digest (the API's: the request as the client sent it)."""
    ranking = [(action, 0.75), ("b" if action == "a" else "a", 0.25)]
    return NewDecision(event_id, {"x": 1.0, "site": "a"}, action, 0.75, 3, ranking=ranking,
                       request=request, **fields)


def test_a_repeated_request_is_answered_as_the_first_and_writes_nothing(store, empty_state):
    config = make_config()
    store.create_app(config, empty_state)
    assert store.record_decisions(config, [kept("e1"), kept("e2", "b")]).first is None
    before = store.redis.hgetall(keys.stats("shop"))
    # the retry drew other actions (another draw, or a newer model): the first answers stand
    repeat = store.record_decisions(config, [kept("e1", "b"), kept("e2", "a")])
    assert [(f.action, f.probability, f.model_version, f.ranking) for f in repeat.first] == [
        ("a", 0.75, 3, [("a", 0.75), ("b", 0.25)]), ("b", 0.75, 3, [("b", 0.75), ("a", 0.25)])]
    assert store.redis.hgetall(keys.stats("shop")) == before  # not counted twice
    assert store.redis.hget(keys.decision("shop", "e1"), "action") == b"a"
    assert store.redis.zcard(keys.deadlines("shop")) == 2


def test_a_repeat_is_answered_within_the_repeat_window_only(store, empty_state, settings):
    config = make_config(reward_wait_time=30)
    store.create_app(config, empty_state)
    store.record_decisions(config, [kept("e1")])
    assert 0 < store.redis.pttl(keys.answer("shop", "e1")) <= settings.repeat_window * 1000
    store.redis.delete(keys.answer("shop", "e1"))  # the window has passed
    with pytest.raises(Conflict, match="e1"):
        store.record_decisions(config, [kept("e1")])
    off = Store(store.redis, settings.model_copy(update={"repeat_window": 0.0}))
    off.record_decisions(config, [kept("e2")])
    assert not store.redis.exists(keys.answer("shop", "e2"))
    with pytest.raises(Conflict, match="e2"):
        off.record_decisions(config, [kept("e2")])


@pytest.mark.parametrize("change", ["request", "deferred", "one more", "no digest"])
def test_another_request_with_the_event_id_is_a_conflict(store, empty_state, change):
    config = make_config()
    store.create_app(config, empty_state)
    store.record_decisions(config, [kept("e1")])
    again = {
        "request": [kept("e1", request=b"request-digest-2")],
        "deferred": [kept("e1", deferred=True)],  # (the API's digest differs too)
        "one more": [kept("e1"), kept("e9")],  # a batch is repeated whole or not at all
        "no digest": [kept("e1", request=b"")],
    }[change]
    with pytest.raises(Conflict, match="e1"):
        store.record_decisions(config, again)
    assert not store.redis.exists(keys.decision("shop", "e9"))


def test_a_decision_rewarded_or_not_kept_is_not_answered_again(store, empty_state):
    config = make_config()
    store.create_app(config, empty_state)
    store.record_decisions(config, [kept("e1"), decision("e2")])
    store.reward(config, "e1", 1.0)  # the client had the answer: a new request, not a retry
    for again in (kept("e1"), decision("e2"), kept("e2")):
        with pytest.raises(Conflict):
            store.record_decisions(config, [again])


def test_a_deferred_decision_is_answered_again_until_it_is_activated(store, empty_state):
    config = make_config()
    store.create_app(config, empty_state)
    store.record_decisions(config, [kept("d1", deferred=True)])
    assert store.record_decisions(config, [kept("d1", deferred=True)]).first[0].action == "a"
    store.activate(config, "d1")
    with pytest.raises(Conflict):
        store.record_decisions(config, [kept("d1", deferred=True)])


def test_earliest_reward_joins_once_and_appends_to_the_stream(store, empty_state):
    config = make_config()
    store.create_app(config, empty_state)
    store.record_decisions(config, [decision("e1")])
    assert store.reward(config, "e1", 0.75).state == "joined"
    with pytest.raises(Conflict, match="already has its reward"):
        store.reward(config, "e1", 1.0)
    [entry] = stream_entries(store, "shop")
    assert entry["eventId"] == b"e1" and float(entry["reward"]) == 0.75
    assert entry["source"] == b"reward" and float(entry["probability"]) == 0.5
    assert codec.unpack(entry["context"]) == {"x": 1.0, "site": "a"}
    assert store.redis.zcard(keys.deadlines("shop")) == 0
    with pytest.raises(NotFound):
        store.reward(config, "unknown", 1.0)


def test_reward_after_the_wait_time_is_refused_and_the_default_is_learned(store, empty_state):
    config = make_config(reward_wait_time=0.05)
    store.create_app(config, empty_state)
    store.record_decisions(config, [decision("e1")])
    time.sleep(0.1)
    with pytest.raises(NotFound, match="wait time is over"):
        store.reward(config, "e1", 1.0)
    assert [int(x) for x in expire(store, config, default=0.25)[1:]] == [1, 0]
    [entry] = stream_entries(store, "shop")
    assert entry["source"] == b"default" and float(entry["reward"]) == 0.25
    assert not store.redis.exists(keys.decision("shop", "e1"))
    assert expire(store, config)[1] == 0  # learned once


def test_sum_aggregation_adds_rewards_until_the_deadline(store, empty_state):
    config = make_config(reward_wait_time=0.6, reward_aggregation=Aggregation.sum)
    store.create_app(config, empty_state)
    store.record_decisions(config, [decision("e1")])
    assert store.reward(config, "e1", 0.25).state == "accumulating"
    outcome = store.reward(config, "e1", 0.5)
    assert (outcome.reward_sum, outcome.reward_count) == (0.75, 2)
    assert stream_entries(store, "shop") == []
    time.sleep(0.65)
    expire(store, config, default=0.0)
    [entry] = stream_entries(store, "shop")
    assert entry["source"] == b"sum" and float(entry["reward"]) == 0.75
    assert store.app_status("shop")["stats"]["rewarded"] == 1


def test_rewards_for_unknown_or_expired_events_are_counted(store, empty_state):
    """Personalizer's routes answer them 204: the count is what shows they were lost."""
    config = make_config(reward_wait_time=0.3)
    store.create_app(config, empty_state)
    store.record_decisions(config, [decision("e1")])
    with pytest.raises(NotFound, match="unknown"):
        store.reward(config, "never-decided", 1.0)
    time.sleep(0.35)
    with pytest.raises(NotFound, match="wait time is over"):
        store.reward(config, "e1", 1.0)
    assert store.app_status("shop")["stats"]["unmatched"] == 2


def test_average_aggregation_learns_the_mean_at_the_deadline(store, empty_state):
    """Personalizer's ``average``: accumulated as ``sum``, learned with the rewards' mean."""
    config = make_config(reward_wait_time=0.6, reward_aggregation=Aggregation.average)
    store.create_app(config, empty_state)
    store.record_decisions(config, [decision("e1")])
    for reward in (0.25, 0.5, 0.1):
        assert store.reward(config, "e1", reward).state == "accumulating"
    assert stream_entries(store, "shop") == []
    time.sleep(0.65)
    expire(store, config, default=0.0)
    [entry] = stream_entries(store, "shop")
    assert entry["source"] == b"average" and float(entry["reward"]) == (0.25 + 0.5 + 0.1) / 3


def test_deferred_decision_needs_activation_and_is_dropped_without_it(store, empty_state):
    config = make_config(reward_wait_time=0.6)
    store.create_app(config, empty_state)
    store.record_decisions(config, [decision("d1", deferred=True), decision("d2", deferred=True)])
    with pytest.raises(Conflict, match="not activated"):
        store.reward(config, "d1", 1.0)
    store.activate(config, "d1")
    with pytest.raises(Conflict, match="already active"):
        store.activate(config, "d1")
    assert store.reward(config, "d1", 1.0).state == "joined"
    time.sleep(0.65)
    expire(store, config)
    assert [e["eventId"] for e in stream_entries(store, "shop")] == [b"d1"]
    assert store.app_status("shop")["stats"] == {"decisions": 2, "rewarded": 1, "dropped": 1}


def test_scripts_refuse_to_write_into_a_deleted_or_recreated_app(store, empty_state):
    old = make_config()
    store.create_app(old, empty_state)
    store.record_decisions(old, [decision("e1"), kept("e2")])
    store.delete_app("shop")
    assert store.redis.keys("*{shop}*") == []  # the decisions and their kept answers too
    with pytest.raises(NotFound):
        store.reward(old, "e1", 1.0)
    new = make_config()
    store.create_app(new, empty_state)
    with pytest.raises(NotFound):  # same name, other uid
        store.record_decisions(old, [decision("e2")])
    with pytest.raises(NotFound):
        store.delete_app("nope")


def test_update_app_changes_only_what_is_given(store, empty_state):
    config = make_config()
    store.create_app(config, empty_state)
    updated = store.update_app("shop", default_reward=0.5)
    assert updated.default_reward == 0.5 and updated.actions == config.actions
    assert store.get_app("shop") == updated
    with pytest.raises(NotFound):
        store.update_app("nope", default_reward=0.5)
