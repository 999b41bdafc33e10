"""The trees policy codes at most ``max_columns`` feature columns: a stream that sends a new key
with every event (an id as a key) keeps its memory and its refits bounded."""

from __future__ import annotations

import json
import random

import numpy as np
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


def campaigns(n, first, seed=0):
    """Contexts of four campaigns ``first .. first+3``, one key each (``{"camp.5": 1}``); the
    best action is ``a{campaign % 4}``."""
    rng = random.Random(seed)
    for _ in range(n):
        c = first + rng.randrange(4)
        yield {f"camp.{c}": 1}, f"a{c % 4}"


def play(policy, stream, seed=0):
    """Decide and learn every event; the rewards earned."""
    rng = random.Random(seed)
    earned = []
    for x, best in stream:
        d = policy.decide(x)
        earned.append(float(d.action == best or rng.random() < 0.05))
        policy.learn_one(x, d.action, earned[-1], d.probability)
    return earned


def test_a_campaign_gone_from_the_window_leaves_its_column_to_a_new_one():
    # four columns, taken by the first campaigns; the next four are learned once the window
    # (400 events) holds none of the first: a policy at its bound keeps adapting
    policy = TreeEnsemblePolicy(n_trees=10, max_columns=4, window=400, seed=0)
    for a in ["a0", "a1", "a2", "a3"]:
        policy.add_action(a)
    play(policy, campaigns(1000, first=0))
    assert sorted(policy._encoder.column_names) == ["camp.0", "camp.1", "camp.2", "camp.3"]
    earned = play(policy, campaigns(3000, first=4), seed=1)
    assert sorted(policy._encoder.column_names) == ["camp.4", "camp.5", "camp.6", "camp.7"]
    assert policy.feature_columns == 4 and policy.features_left_out > 0
    assert sum(earned[-500:]) / 500 > 0.8  # ~0.25 when the new campaigns stay left out
    assert policy.decide({"camp.6": 1}).action == "a2"

    copy = TreeEnsemblePolicy.from_state(json.loads(json.dumps(_plain(policy.to_state()))))
    for c in range(10):
        x = {f"camp.{c}": 1}
        assert copy.decide(x).probabilities == policy.decide(x).probabilities


def test_a_column_is_freed_only_when_no_event_since_the_refit_began_has_it():
    policy = TreeEnsemblePolicy(n_trees=5, max_columns=2, window=50, auto_refit=False, seed=0)
    policy.add_action("a0")
    for x in [{"old": 1.0}, {"kept": 1.0}] + [{"kept": 2.0}] * 60:
        policy.learn_one(x, "a0", 1.0, 1.0)
    assert policy._encoder.column_names == ["old", "kept"]
    job = policy.start_refit()  # the window: "kept" only
    policy.learn_one({"old": 3.0}, "a0", 0.0, 1.0)  # while the refit runs
    policy.finish_refit(job())
    assert policy._encoder.column_names == ["old", "kept"]  # its value is in the window
    for _ in range(60):
        policy.learn_one({"kept": 2.0}, "a0", 1.0, 1.0)
    policy.finish_refit(policy.start_refit()())
    assert policy._encoder.column_names == [None, "kept"] and policy.feature_columns == 1
    policy.learn_one({"new": 5.0}, "a0", 1.0, 1.0)
    assert policy._encoder.column_names == ["new", "kept"]
    assert policy._encoder.encode({"old": 3.0})[1] is False


def test_columns_are_freed_only_at_the_bound():
    policy = TreeEnsemblePolicy(n_trees=5, max_columns=3, window=50, auto_refit=False, seed=0)
    policy.add_action("a0")
    for x in [{"old": 1.0}] + [{"kept": 2.0}] * 60:
        policy.learn_one(x, "a0", 1.0, 1.0)
    policy.finish_refit(policy.start_refit()())
    assert policy._encoder.column_names == ["old", "kept"]  # a column to spare: none freed


def test_values_no_event_of_the_window_has_are_forgotten_at_a_refit():
    """An id sent as a value: the codes held stay about the window's, not the stream's."""
    policy = TreeEnsemblePolicy(n_trees=5, window=200, seed=0)
    for a in ["a1", "a2"]:
        policy.add_action(a)
    rng = random.Random(0)
    for i in range(2000):
        x = {"user": f"u{i}", "tier": "gold" if i % 3 else "free"}
        d = policy.decide(x)
        policy.learn_one(x, d.action, float(rng.random() < 0.3), d.probability)
    held = len(policy._encoder.to_state()["codes"]["user"])
    assert 200 <= held < 200 * 1.5  # the window and the events since its last refit
    assert policy._encoder.encode({"user": "u1999", "tier": "gold"})[1]  # in the window
    assert not policy._encoder.encode({"user": "u5", "tier": "gold"})[1]  # forgotten
    assert policy._encoder.categories_of(1) == ["free", "gold"]  # every value is in the window
    # codes are given again: the largest stays about the window's, and no two values share one
    assert policy._encoder.code_counts()[1].tolist()[0] < 200 * 1.5
    users = policy._encoder.to_state()["code_numbers"]["user"]
    assert len(set(users)) == len(users) == held
    copy = TreeEnsemblePolicy.from_state(json.loads(json.dumps(_plain(policy.to_state()))))
    x = {"user": "u1990", "tier": "free"}
    assert copy.probabilities(x) == policy.probabilities(x)


def test_a_new_value_given_a_forgotten_code_is_new_to_the_trees():
    """Codes of forgotten values are given again; a value that takes one is still a value the
    trees in use never saw (no trees in its scores), in one row and in a batch, and after a
    state round trip."""
    policy = TreeEnsemblePolicy(n_trees=5, window=200, seed=0, auto_refit=False)
    for a in ["a1", "a2"]:
        policy.add_action(a)
    for i in range(600):
        policy.learn_one({"user": f"u{i}", "tier": "gold"}, "a1", float(i % 2), 0.5)
    policy.finish_refit(policy.start_refit()())  # forgets u0 .. u399 (not in the window)
    fresh = {"user": "new", "tier": "gold"}
    policy.learn_one(fresh, "a2", 1.0, 0.5)
    code = policy._encoder.encode(fresh)[0][0]
    assert code == 0.0  # u0's, the smallest free
    old = policy._encoder.encode({"user": "u599", "tier": "gold"})[0]
    new = policy._encoder.encode(fresh)[0]
    assert policy._new_values(new[None]).tolist() == [True]
    assert policy._new_values(old[None]).tolist() == [False]
    assert policy._new_values(np.vstack([old, new, old])).tolist() == [False, True, False]
    copy = TreeEnsemblePolicy.from_state(json.loads(json.dumps(_plain(policy.to_state()))))
    assert copy._new_values(np.vstack([old, new])).tolist() == [False, True]


def test_a_state_from_before_codes_were_given_again_keeps_the_trees_known_values():
    """A state written with ``codes_seen`` (each code column's count when the trees copied
    their window) reads as the codes below that count that the encoder holds: the values the
    trees counted as seen then."""
    policy = TreeEnsemblePolicy(n_trees=5, window=300, seed=0, auto_refit=False)
    for a in ["a1", "a2"]:
        policy.add_action(a)
    for i in range(400):
        policy.learn_one({"page": f"id{i % 250}", "tier": "gold"}, "a1", float(i % 2), 0.5)
    policy.finish_refit(policy.start_refit()())
    policy.learn_one({"page": "late", "tier": "gold"}, "a2", 1.0, 0.5)  # after the copy
    state = json.loads(json.dumps(_plain(policy.to_state())))
    known = state["model"].pop("known_codes")
    counts = [250.0, 1.0]  # what the old state said: 250 pages and one tier given by then
    state["model"]["codes_seen"] = {"columns": known["columns"], "counts": counts}
    old = TreeEnsemblePolicy.from_state(state)
    assert old._known_codes[0] == policy._known_codes[0]
    for mask, now in zip(old._known_codes[1], policy._known_codes[1]):
        assert np.array_equal(mask, now)
    late = old._encoder.encode({"page": "late", "tier": "gold"})[0]
    assert old._new_values(late[None]).tolist() == [True]
