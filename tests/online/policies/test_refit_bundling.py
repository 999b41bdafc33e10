"""LightGBM's bundling of exclusive sparse columns is a speed setting only: the refit turns it on
from ``BUNDLE_MIN_COLUMNS`` columns, and a window of one-hot columns (what bundling merges) gets
the same trees with it as without."""

from __future__ import annotations

import dataclasses
import random

import numpy as np

from online.policies import refit
from online.policies.trees import TreeEnsemblePolicy
from tests.online.policies.test_refit_keeps_trees import same_model

ACTIONS = ["a1", "a2", "a3"]


def one_hot_policy(n: int = 900) -> TreeEnsemblePolicy:
    """Three groups of one-hot columns (each row sets one column per group: exclusive within a
    group), the reward a function of two groups and the action."""
    rng = random.Random(5)
    policy = TreeEnsemblePolicy(n_trees=15, seed=1, auto_refit=False)
    for a in ACTIONS:
        policy.add_action(a)
    for _ in range(n):
        values = [rng.randrange(8), rng.randrange(6), rng.randrange(5)]
        x = {f"g{g}_{j}": float(v == j) for g, (v, m) in enumerate(zip(values, (8, 6, 5)))
             for j in range(m)}
        a = rng.choice(ACTIONS)
        good = (values[0] + ACTIONS.index(a)) % 4 == 0 or values[1] == 2
        policy.learn_one(x, a, float(good), 1 / 3)
    return policy


def test_the_trees_are_the_same_with_bundling_as_without(monkeypatch):
    job = dataclasses.replace(one_hot_policy().start_refit(), previous=None)
    assert job.X.shape[1] < refit.BUNDLE_MIN_COLUMNS  # the default: not bundled
    plain = job()
    monkeypatch.setattr(refit, "BUNDLE_MIN_COLUMNS", 1)
    bundled = job()
    assert plain.boosted == bundled.boosted == len(ACTIONS)
    assert all(plain.ensemble.model(k).n_trees > 1 for k in range(len(ACTIONS)))
    for k in range(len(ACTIONS)):
        assert same_model(plain.ensemble, bundled.ensemble, k), k
    np.testing.assert_array_equal(plain.linear.weights, bundled.linear.weights)
