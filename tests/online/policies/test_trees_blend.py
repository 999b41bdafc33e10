"""The weight of each action's trees over its linear base, from held-out predictions."""

from __future__ import annotations

import json
import random

import numpy as np

from online.policies.refit import BLEND_MIN_EVENTS, tree_weights
from online.policies.trees import TreeEnsemblePolicy
from tests.online.policies.test_trees_policy import _plain, favorite_stream, play, small


def xor_stream(n, seed=0):
    """Reward 1 for action a1 when exactly one of two flags is set, for a2 otherwise: no linear
    model of the flags predicts it, trees do."""
    rng = random.Random(seed)
    for _ in range(n):
        yield {"f": rng.random() < 0.5, "g": rng.random() < 0.5, "noise": rng.random()}


def xor_best(x):
    return "a1" if x["f"] != x["g"] else "a2"


def test_tree_weights_are_the_held_out_least_squares_fit_clipped_to_0_1():
    rng = np.random.default_rng(0)
    n = 400
    actions = rng.integers(0, 4, n).astype(np.int32)
    linear, trees = rng.random(n), rng.normal(0, 0.3, n)
    truth = np.array([0.3, 2.0, -1.0, 0.7])  # 2 and -1 are clipped
    rewards = linear + truth[actions] * trees + rng.normal(0, 0.01, n)
    held = np.column_stack([linear, trees]).astype(np.float32)
    held[actions == 3] = np.nan  # no model when they were learned
    got = tree_weights(actions, rewards, held, 5)

    def fit(rows, centre=1.0):  # least squares, a prior of BLEND_MIN_EVENTS events at centre
        t, e = trees[rows], (rewards - linear)[rows]
        prior = BLEND_MIN_EVENTS * (t @ t) / len(t)
        return (t @ e + prior * centre) / (t @ t + prior)

    known = actions != 3
    pooled = fit(known)  # all actions' events, shrunk towards 1
    assert 0 < pooled < 1
    # each action's own events, shrunk towards the pooled weight
    np.testing.assert_allclose(got[0], fit(actions == 0, pooled), rtol=1e-5)
    assert 0.3 < got[0] < pooled  # ~(100 events x 0.3 + 50 prior events x pooled) / 150
    assert got[1] == 1.0 and got[2] == 0.0  # clipped (true weights 2 and -1)
    # none held out for action 3, action 4 never played: the pooled fit
    assert abs(got[3] - pooled) < 1e-6 and got[3] == got[4]
    few = np.flatnonzero(actions == 0)[BLEND_MIN_EVENTS - 1:]
    held[few] = np.nan
    assert tree_weights(actions, rewards, held, 5)[0] == tree_weights(actions, rewards, held, 5)[3]
    # fewer than BLEND_MIN_EVENTS in all: every action's trees weigh 1
    held[np.arange(n) >= BLEND_MIN_EVENTS - 1] = np.nan
    assert (tree_weights(actions, rewards, held, 5) == 1.0).all()


def test_the_window_keeps_what_the_models_predicted_before_learning_each_event():
    policy = small()
    play(policy, favorite_stream(300, seed=1))
    x = {"favorite": "a2", "device": "tv", "hour": 3.0}
    xv, _ = policy._encoder.encode(x)
    k = policy.actions.index("a2")
    expected = (policy._linear.predict(xv, np.array([k]))[0],
                policy._ensemble.predict(xv, np.array([k]))[0])
    policy.learn_one(x, "a2", 1.0, 0.5)
    np.testing.assert_allclose(policy._window.held_out()[-1], expected, rtol=1e-6)
    # before the first fit there is no model: nothing held out
    fresh = small()
    fresh.learn_one(x, "a2", 1.0, 0.5)
    assert np.isnan(fresh._window.held_out()).all()


def test_noise_trees_lose_their_weight_and_needed_trees_keep_it():
    noise = small(n_trees=30)
    rng = random.Random(4)
    for x in favorite_stream(3000, seed=4):  # rewards that no context predicts
        d = noise.decide(x)
        noise.learn_one(x, d.action, float(rng.random() < 0.3), d.probability)
    assert noise._blend.mean() < 0.5, noise._blend
    needed = TreeEnsemblePolicy(n_trees=30, seed=3)
    needed.add_action("a1")
    needed.add_action("a2")
    rewards = play(needed, xor_stream(3000, seed=5), best=xor_best)
    assert needed._blend.mean() > 0.7, needed._blend  # (each is noisy: ~350 events)
    assert rewards[-1000:].mean() > 0.9


def test_weights_round_trip_and_old_states_weigh_trees_1():
    policy = small()
    play(policy, favorite_stream(800, seed=2))
    assert policy._blend.shape == (len(policy.actions),)
    state = json.loads(json.dumps(_plain(policy.to_state())))
    copy = TreeEnsemblePolicy.from_state(state)
    np.testing.assert_array_equal(copy._blend, policy._blend)
    np.testing.assert_array_equal(copy._window.held_out(), policy._window.held_out())
    contexts = list(favorite_stream(50, seed=9))
    assert [copy.probabilities(x) for x in contexts] == [policy.probabilities(x) for x in contexts]
    # a state written before the weights: every action's trees weigh 1, nothing held out
    old = small(weigh_trees=False)
    play(old, favorite_stream(800, seed=2))
    state = json.loads(json.dumps(_plain(old.to_state())))
    del state["model"]["blend"], state["model"]["window"]["held_out"]
    del state["params"]["weigh_trees"]
    loaded = TreeEnsemblePolicy.from_state(state)
    assert loaded.weigh_trees and (loaded._blend == 1.0).all()
    assert np.isnan(loaded._window.held_out()).all()
    assert [loaded.probabilities(x) for x in contexts] == [old.probabilities(x) for x in contexts]
