"""The trees policy codes at most ``max_columns`` feature columns: a stream that sends a new key
with every event (an id as a key) keeps its memory and its refits bounded."""

from __future__ import annotations

import json
import random

import pytest

from online.policies.trees import MAX_COLUMNS, TreeEnsemblePolicy
from tests.online.policies.test_trees_policy import _plain


def new_key_stream(n, seed=0):
    rng = random.Random(seed)
    for i in range(n):
        # a new key every event, one number and one category always there
        yield {f"user.{i}": 1, "hour": rng.random() * 24, "device": rng.choice("abc")}


def learn(policy, contexts, seed=0):
    rng = random.Random(seed)
    for x in contexts:
        d = policy.decide(x)
        reward = float(d.action == "a1" and x["device"] == "a" or rng.random() < 0.1)
        policy.learn_one(x, d.action, reward, d.probability)


def test_new_keys_past_the_bound_are_left_out_and_the_policy_keeps_learning():
    policy = TreeEnsemblePolicy(n_trees=10, max_columns=12, seed=0)
    for a in ["a1", "a2", "a3"]:
        policy.add_action(a)
    learn(policy, new_key_stream(600))
    assert policy.feature_columns == 12  # hour, device and the first ten keys
    assert policy.features_left_out == 590  # every later event's key
    assert policy._window.n_columns <= 12 * 2 and policy.n_refits > 3
    late = {"user.599": 1, "hour": 3.0, "device": "a"}
    assert sum(policy.decide(late).probabilities.values()) == pytest.approx(1.0)
    assert max(policy.scores(late), key=policy.scores(late).get) == "a1"

    copy = TreeEnsemblePolicy.from_state(json.loads(json.dumps(_plain(policy.to_state()))))
    assert copy.max_columns == 12 and copy.features_left_out == 590
    learn(copy, new_key_stream(50, seed=1))
    assert copy.feature_columns == 12 and copy.features_left_out == 630  # user.0-9 coded


def test_a_state_written_before_the_bound_loads_bounded():
    policy = TreeEnsemblePolicy(n_trees=5, max_columns=8, seed=0)
    for a in ["a1", "a2"]:
        policy.add_action(a)
    learn(policy, new_key_stream(100))
    state = _plain(policy.to_state())
    del state["params"]["max_columns"]  # what a state of the last version held
    state["encoder"]["max_columns"] = None
    del state["encoder"]["left_out"]
    old = TreeEnsemblePolicy.from_state(state)
    assert old.max_columns == MAX_COLUMNS and old._encoder.max_columns == MAX_COLUMNS
    assert old.features_left_out == 0


@pytest.mark.parametrize("bad", [0, -1, 2.5])
def test_max_columns_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="max_columns"):
        TreeEnsemblePolicy(max_columns=bad)
