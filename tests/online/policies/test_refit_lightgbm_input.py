"""What the refit hands LightGBM: bundling of exclusive sparse columns is a speed setting only
(on from ``BUNDLE_MIN_COLUMNS`` columns), and a key sent only when it is set is fitted with 0 for
its absence (``presence_as_zero``), the same model either way."""

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


def presence_policy(n: int = 1500) -> TreeEnsemblePolicy:
    """Keys sent only when set (``{"tag3": 1}``), one number always sent, one sometimes; the
    reward real-valued (no two splits gain the same: the ties ``presence_as_zero`` may break the
    other way do not arise)."""
    rng = random.Random(7)
    policy = TreeEnsemblePolicy(n_trees=15, seed=1, auto_refit=False)
    for a in ACTIONS:
        policy.add_action(a)
    for _ in range(n):
        tags = [t for t in range(12) if rng.random() < 0.25]
        x = {f"tag{t}": 1 for t in tags}
        x["age"] = rng.uniform(18, 80)
        if rng.random() < 0.5:
            x["score"] = rng.uniform(-1, 1)  # missing in some rows, many values: kept NaN
        a = rng.choice(ACTIONS)
        reward = 0.3 * (3 in tags) + 0.2 * ACTIONS.index(a) * (5 in tags) + \
            0.01 * x["age"] + rng.gauss(0, 0.1)
        policy.learn_one(x, a, reward, 1 / 3)
    return policy


def test_keys_sent_only_when_set_are_fitted_as_zero_when_missing_the_same_predictions(
        monkeypatch):
    job = dataclasses.replace(presence_policy().start_refit(), previous=None)
    X = job.X.copy()
    rewritten = refit.presence_as_zero(X.copy(), job.kinds)
    tags = [j for j in range(X.shape[1]) if np.isnan(X[:, j]).any()
            and np.unique(X[~np.isnan(X[:, j]), j]).tolist() == [1.0]]
    assert len(tags) == 12
    assert not np.isnan(rewritten[:, tags]).any()
    others = [j for j in range(X.shape[1]) if j not in tags]  # age, score: as they were
    np.testing.assert_array_equal(rewritten[:, others], X[:, others])

    fitted = job()
    monkeypatch.setattr(refit, "presence_as_zero", lambda X, kinds: X)
    plain = dataclasses.replace(job, X=X.copy())()
    models = np.arange(len(ACTIONS))
    gaps = [np.abs(fitted.ensemble.predict(x, models) - plain.ensemble.predict(x, models)).max()
            for x in X[:300].astype(np.float64)]
    assert max(gaps) < 1e-9, max(gaps)
    assert fitted.ensemble.n_trees > 3 * len(ACTIONS)
