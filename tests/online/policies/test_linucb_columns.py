"""LinUCB at ``max_columns``: a feature that has stopped coming gives its column to a new one,
forgotten exactly; features that keep coming keep theirs."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from online.policies.linucb import LinUCB
from tests.online.policies.test_trees_policy import _plain

ACTIONS = ["a0", "a1", "a2", "a3"]


def linucb(**params):
    policy = LinUCB(seed=0, **params)
    for a in ACTIONS:
        policy.add_action(a)
    return policy


def campaigns(n, every, live=4, seed=0):
    """``(context, best action)``: ``live`` campaigns at once (as a category's value), the
    oldest replaced by a new one every ``every`` events."""
    rng = random.Random(seed)
    running, started = list(range(live)), live
    for i in range(n):
        if i and i % every == 0:
            running, started = running[1:] + [started], started + 1
        c = rng.choice(running)
        yield {"campaign": f"c{c}"}, ACTIONS[c % 4]


def play(policy, stream, seed=0):
    rng = random.Random(seed)
    earned = []
    for x, best in stream:
        d = policy.decide(x)
        earned.append(float(d.action == best) if rng.random() < 0.9 else float(rng.random() < .5))
        policy.learn_one(x, d.action, earned[-1], d.probability)
    return earned


def test_campaigns_past_the_bound_take_the_columns_of_ended_ones():
    policy = linucb(max_columns=8)
    earned = play(policy, campaigns(6000, every=100))  # 63 campaigns through 8 columns
    assert np.mean(earned[-1000:]) > 0.8  # ~0.25 with the first 8 campaigns' columns only
    assert policy.features_left_out < 100
    names = policy._encoder.column_names
    assert "campaign=c62" in names and "campaign=c0" not in names


def test_features_that_keep_coming_keep_their_columns():
    policy = linucb(max_columns=8)
    rng = random.Random(1)
    stream = [({"v": f"x{rng.randrange(20)}"}, "a0") for _ in range(4000)]  # 20 values, 8 slots
    play(policy, stream)
    first = []
    for x, _ in stream:
        if x["v"] not in first:
            first.append(x["v"])
    assert sorted(policy._encoder.column_names) == sorted(f"v={v}" for v in first[:8])


def test_forgetting_a_column_is_the_model_that_never_saw_its_feature():
    rng = random.Random(2)
    events = [({"f": rng.random(), "g": rng.choice([0, 1.0]), "h": rng.random() * 3},
               rng.choice(ACTIONS[:2]), rng.random()) for _ in range(300)]
    full, without = LinUCB(seed=0), LinUCB(seed=0)
    for x, a, r in events:
        full.learn_one(x, a, r, 0.5)
        without.learn_one({"f": x["f"], "g": 0.0, "h": x["h"]}, a, r, 0.5)
    full._forget_columns([1])  # g
    assert full._encoder.column_names == without._encoder.column_names == ["f", "g", "h"]
    np.testing.assert_allclose(full._A_inv[:2, :4, :4], without._A_inv[:2, :4, :4], atol=1e-10)
    np.testing.assert_allclose(full._b[:2, :4], without._b[:2, :4], atol=1e-10)


def test_learn_many_forgets_where_learn_one_does():
    one, many = linucb(max_columns=6), linucb(max_columns=6)
    rng = random.Random(3)
    events = [(x, rng.choice(ACTIONS), float(rng.random() < 0.5), 0.25)
              for x, _ in campaigns(3000, every=60, live=3)]
    for x, a, r, p in events:
        one.learn_one(x, a, r, p)
    many.learn_many(events)
    assert one._encoder.column_names == many._encoder.column_names
    np.testing.assert_allclose(many._A_inv, one._A_inv, atol=1e-9)
    np.testing.assert_allclose(many._b, one._b, atol=1e-9)
    np.testing.assert_array_equal(many._seen, one._seen)


def test_when_each_feature_was_seen_survives_a_state_and_an_old_state_loads():
    policy = linucb(max_columns=8)
    play(policy, campaigns(1500, every=100))
    state = json.loads(json.dumps(_plain(policy.to_state())))
    copy = LinUCB.from_state(state)
    np.testing.assert_array_equal(copy._seen[:, :8], policy._seen[:, :8])
    more = list(campaigns(3000, every=100, seed=4))[1500:]
    assert play(copy, more, seed=5) == play(policy, more, seed=5)
    old = json.loads(json.dumps(state))
    old["version"] = 2
    del old["model"]["seen"]
    assert LinUCB.from_state(old).features_left_out == policy.features_left_out
    bad = json.loads(json.dumps(state))
    bad["model"]["seen"] = [[1, 2]] * 4
    with pytest.raises(ValueError, match="seen"):
        LinUCB.from_state(bad)


@pytest.mark.parametrize("events", [0, 1])
def test_a_policy_without_actions_or_columns_round_trips(events):
    policy = LinUCB(seed=0)  # (what an app's candidate is before its first event)
    if events:
        policy.check_context({"f": 1.0})
        policy._encoder.learn_encode({"f": 1.0, "g": "x"})  # columns, still no action
    copy = LinUCB.from_state(policy.to_state())  # (arrays as the service stores them)
    assert copy._encoder.n_columns == policy._encoder.n_columns
    copy.learn_one({"f": 2.0, "h": 1.0}, "a0", 1.0, 1.0)
    assert copy.n_learned == 1
