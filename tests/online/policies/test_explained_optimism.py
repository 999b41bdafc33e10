"""The optimism bonus weighed by the share of the rewards the models explain (``explained``)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from online.policies.refit import EXPLAINED_MIN_EVENTS, explained_share
from online.policies.trees import TreeEnsemblePolicy
from tests.online.policies.test_ridge_base import assert_bonus_is_the_width_times
from tests.online.policies.test_trees_policy import ADS, favorite_stream, play, small


def _loop_share(actions, rewards, held_out, blend, newest):
    """explained_share written as a loop over the events, as its docstring defines it."""
    prior, sums, counts, means = rewards.mean(), {}, {}, []
    for k, r in zip(actions.tolist(), rewards.tolist()):
        means.append((sums.get(k, 0.0) + prior) / (counts.get(k, 0) + 1))
        sums[k], counts[k] = sums.get(k, 0.0) + r, counts.get(k, 0) + 1
    models = baseline = 0.0
    n_known = 0
    for i in range(max(0, len(actions) - newest), len(actions)):
        linear, trees = held_out[i]
        if np.isnan(linear) or np.isnan(trees):
            continue
        k = actions[i]
        b = blend[k] if k < len(blend) else 1.0
        models += (rewards[i] - linear - b * trees) ** 2
        baseline += (rewards[i] - means[i]) ** 2
        n_known += 1
    if n_known < EXPLAINED_MIN_EVENTS or baseline <= 0:
        return 0.0
    return min(1.0, max(0.0, 1.0 - models / baseline))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_share_is_the_models_error_against_each_actions_running_mean(seed):
    rng = np.random.default_rng(seed)
    n = 600
    actions = rng.integers(0, 4, n).astype(np.int32)
    x = rng.random(n)
    rewards = (x > 0.5).astype(float) * (actions % 2) + 0.1 * rng.random(n)
    held_out = np.column_stack([0.5 * (actions % 2) + 0.1 * rng.standard_normal(n),
                                (x - 0.5) * (actions % 2)]).astype(np.float32)
    held_out[rng.random(n) < 0.1] = np.nan  # events no model predicted
    blend = np.array([0.2, 0.9, 0.5])  # (action 3: no weight yet, 1)
    for newest in (150, 400, 10_000):
        got = explained_share(actions, rewards, held_out, blend, newest)
        assert got == pytest.approx(_loop_share(actions, rewards, held_out, blend, newest),
                                    abs=1e-12)
        assert 0.0 < got < 1.0
    assert explained_share(actions, rewards, held_out, blend, 100) == 0.0  # too few predicted


def _noise_stream(n, seed):
    """Rewards the context says nothing of: each action pays with its own rate."""
    rng = random.Random(seed)
    rates = dict(zip(ADS, [0.05, 0.1, 0.15, 0.2, 0.3]))
    for _ in range(n):
        x = {"device": rng.choice(["mobile", "desktop", "tv"]), "hour": rng.random() * 24}
        yield x, {a: float(rng.random() < rates[a]) for a in ADS}


def test_the_bonus_is_the_width_weighed_by_the_share_the_models_explain():
    """Where the context says which action pays, the models explain much of the rewards and
    the scores IGW weighs take the width times that share; where it says nothing, the share
    is 0 and so is the bonus."""
    policy = small(refit_min=50)
    play(policy, favorite_stream(1500, seed=3))
    assert policy.n_refits > 3 and policy.explained > 0.3
    assert_bonus_is_the_width_times(policy.explained, policy, favorite_stream(20, seed=4))
    with_fixed = small(refit_min=50, optimism=0.25, optimism_explained=2.0)
    play(with_fixed, favorite_stream(1500, seed=3))
    assert_bonus_is_the_width_times(0.25 + 2.0 * with_fixed.explained, with_fixed,
                                    favorite_stream(5, seed=4))

    noise = small(refit_min=50)
    for x, rewards in _noise_stream(3000, seed=5):
        d = noise.decide(x)
        noise.learn_one(x, d.action, rewards[d.action], d.probability)
    assert noise.n_refits > 3 and noise.explained == 0.0
    for x, _ in _noise_stream(20, seed=6):
        assert noise.scores(x, optimistic=True) == noise.scores(x)

    # the widths' A^-1 takes each learned row while the bonus is read, and is left to the next
    # refit while it is 0 (nothing reads it until that refit makes it anew)
    for learner, rows in ((policy, [(x, {a: float(a == x["favorite"]) for a in ADS})
                                    for x in favorite_stream(20, seed=8)]),
                          (noise, list(_noise_stream(20, seed=8)))):
        learner.auto_refit = False  # (no refit among these rows: what happens between two)
        before, refits = learner._linear.covariance.copy(), learner.n_refits
        for x, rewards in rows:
            d = learner.decide(x)
            learner.learn_one(x, d.action, rewards[d.action], d.probability)
        assert learner.n_refits == refits
        changed = (learner._linear.covariance != before).any()
        assert changed == (learner is policy), learner.explained

    with pytest.raises(ValueError, match="optimism_explained"):
        TreeEnsemblePolicy(optimism_explained=-0.5)


def test_the_share_is_in_the_state_and_a_state_without_it_decides_as_before():
    policy = small(refit_min=50)
    play(policy, favorite_stream(1500, seed=3))
    state = policy.to_state()
    assert state["model"]["explained"] == policy.explained > 0
    contexts = list(favorite_stream(50, seed=7))
    loaded = TreeEnsemblePolicy.from_state(state)
    assert loaded.explained == policy.explained
    assert [loaded.probabilities(x) for x in contexts] == \
        [policy.probabilities(x) for x in contexts]
    # written before the share: no bonus until the next refit estimates it
    old = small(refit_min=50, optimism_explained=0.0)
    play(old, favorite_stream(1500, seed=3))
    state = old.to_state()
    del state["model"]["explained"], state["params"]["optimism_explained"]
    loaded = TreeEnsemblePolicy.from_state(state)
    assert loaded.optimism_explained == 1.0 and loaded.explained == 0.0
    assert [loaded.probabilities(x) for x in contexts] == \
        [old.probabilities(x) for x in contexts]
    state["model"]["explained"] = 1.5
    with pytest.raises(ValueError, match="explained"):
        TreeEnsemblePolicy.from_state(state)
