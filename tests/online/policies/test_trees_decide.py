"""One decision's distribution in one compiled call (``online.policies.trees_decide``) against
the separate steps it fuses: the same numbers, bit for bit."""

import numpy as np

from online.policies.squarecb import inverse_gap_weights
from tests.online.policies.test_trees_policy import favorite_stream, play, small


def separate(policy, x, actions=None, excluded=()):
    """The distribution from the steps one at a time: the optimistic scores (the trees' sums,
    zeroed for a new value, weighed onto the linear base and its bonus), then IGW."""
    xv, _ = policy._encoder.encode(x)
    candidates, known = policy._candidates(actions, excluded)
    scores, unseen = policy._scores(xv, known, optimistic=True)
    probs = np.empty(len(known))
    inverse_gap_weights(scores, unseen, policy.gamma(len(known)), probs)
    return dict(zip(candidates, probs.tolist()))


def assert_fused_is_separate(policy, contexts):
    for x in contexts:
        for actions, excluded in ((None, ()), (None, ["a2"]), (["a5", "a1", "a3"], ())):
            fused = policy.probabilities(x, actions, excluded)
            expected = separate(policy, x, actions, excluded)
            assert fused == expected  # (dicts: the same actions and floats, exactly)


def test_the_fused_decision_gives_the_separate_steps_distribution_with_the_bonus():
    policy = small()
    play(policy, favorite_stream(1500, seed=3))
    assert policy._bonus() > 0 and policy.n_refits > 0
    assert_fused_is_separate(policy, favorite_stream(30, seed=5))
    # the trees' weights (1 for each action on this stream) read per candidate
    policy._blend = np.array([0.3, 0.9, 0.5, 1.0, 0.0])
    policy._forget_candidates()
    assert_fused_is_separate(policy, favorite_stream(30, seed=5))


def test_the_fused_decision_without_the_bonus_reads_the_linear_scores():
    policy = small(optimism=0.0, optimism_explained=0.0)
    play(policy, favorite_stream(1500, seed=3))
    assert policy._bonus() == 0
    assert_fused_is_separate(policy, favorite_stream(30, seed=5))


def test_a_value_newer_than_the_trees_takes_no_trees_in_the_fused_decision():
    policy = small()
    play(policy, favorite_stream(1500, seed=3))
    contexts = [{**x, "device": "watch"} for x in favorite_stream(10, seed=6)]
    refits = policy.n_refits
    policy.learn_one(contexts[0], "a1", 0.0, 0.2)  # (the value coded now, after the trees)
    assert policy.n_refits == refits
    xv, _ = policy._encoder.encode(contexts[0])
    assert policy._new_values(xv[None])[0]  # (the path is taken)
    assert_fused_is_separate(policy, contexts)
    policy.decide(contexts[0])
    assert (policy._last_sums[3] == 0).all()  # what learning the event reads back
