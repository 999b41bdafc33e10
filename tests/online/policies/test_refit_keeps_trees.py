"""A refit keeps the trees of the actions whose window events have not changed since they were
fitted (``RefitJob._kept``), and boosts the others as before."""

from __future__ import annotations

import dataclasses
import json
import random

import numpy as np

from online.policies.trees import TreeEnsemblePolicy
from tests.online.policies.test_trees_policy import ADS, _plain, favorite_stream, small


def learn(policy, n, actions, seed):
    rng = random.Random(seed)
    for x in favorite_stream(n, seed=seed):
        a = rng.choice(actions)
        policy.learn_one(x, a, float(a == x["favorite"] or x["hour"] > 18), 0.2)


def refit(policy):
    result = policy.start_refit()()
    policy.finish_refit(result)
    return result


def same_model(e1, e2, k) -> bool:
    m1, m2 = e1.model(k), e2.model(k)
    return all(np.array_equal(getattr(m1, f.name), getattr(m2, f.name))
               for f in dataclasses.fields(m1))


def test_actions_without_new_events_keep_their_trees_the_others_are_boosted_as_before():
    policy = small(auto_refit=False)
    learn(policy, 600, ADS, seed=1)
    assert refit(policy).boosted == 5
    first, state = policy._ensemble, json.loads(json.dumps(_plain(policy.to_state())))

    learn(policy, 200, ADS[:2], seed=2)  # a1 and a2 only
    job = policy.start_refit()
    fresh = dataclasses.replace(job, previous=None)()  # every action boosted again
    result = job()
    policy.finish_refit(result)
    assert result.boosted == 2 and fresh.boosted == 5
    for k in range(5):
        assert same_model(result.ensemble, first, k) == (k >= 2), k
        if k < 2:  # the changed actions' trees are the booster's, as without keeping any
            assert same_model(result.ensemble, fresh.ensemble, k), k

    # the kept trees are a fit on the same events with the bins of their time: what a new
    # booster gives, up to where the window's bins moved
    other = TreeEnsemblePolicy.from_state(state)
    learn(other, 200, ADS[:2], seed=2)
    other.finish_refit(fresh)
    gaps = [np.subtract(*[list(p.scores(x).values()) for p in (policy, other)])
            for x in favorite_stream(200, seed=3)]
    assert np.abs(gaps).mean() < 0.02, np.abs(gaps).mean()

    # the state carries which events the trees were fitted on: a copy keeps the same ones
    copy = TreeEnsemblePolicy.from_state(state)
    learn(copy, 200, ADS[:2], seed=2)
    again = refit(copy)
    assert again.boosted == 2
    assert all(same_model(again.ensemble, result.ensemble, k) for k in range(5))


def test_an_action_whose_oldest_event_left_the_window_is_boosted_again():
    policy = small(auto_refit=False, window=300)
    learn(policy, 300, ADS, seed=4)
    refit(policy)
    oldest = policy._window.arrays()[1][0]  # the event the next one pushes out
    policy.learn_one(next(favorite_stream(1, seed=5)), "a1", 1.0, 0.2)
    result = refit(policy)
    changed = {0, int(oldest)}
    assert result.boosted == len(changed)
    assert result.spans[:, 2].sum() == 300


def test_a_new_penalty_boosts_every_action():
    policy = small(auto_refit=False)
    learn(policy, 600, ADS, seed=6)
    refit(policy)
    learn(policy, 100, ADS[:1], seed=7)
    job = policy.start_refit()
    assert job().boosted == 1
    other = dataclasses.replace(job.previous, l2=job.previous.l2 * 2)
    assert dataclasses.replace(job, previous=other)().boosted == 5
