"""What the trees' linear base codes: a category column's values seen last at each fit, and the
number columns and values new since the fit from their first event (``RidgeBase.extend``)."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from online.policies.ridge import FULL_COVARIANCE_FLOATS, MAX_CODES, RidgeBase
from online.policies.trees import TreeEnsemblePolicy
from tests.online.policies.test_trees_policy import _plain

KINDS = ["number", "code", "number"]


def rows(n, codes, seed=0):
    """Encoded rows (number, category code, number set in a fifth of the rows) whose reward is
    linear in them, with a per-code effect."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.random(n), rng.integers(0, codes, n).astype(float),
                         np.where(rng.random(n) < 0.2, rng.random(n) * 10, np.nan)])
    effect = np.sin(np.arange(codes) * 1.7)
    r = 0.2 + 0.5 * X[:, 0] + effect[X[:, 1].astype(int)] + 0.05 * np.nan_to_num(X[:, 2])
    return X, r + rng.normal(0, 0.1, n)


def test_a_fit_codes_the_values_of_a_column_seen_last():
    # codes 0..199 one after the other, then 150..199 again: the last 64 seen are 136..199
    column = np.concatenate([np.arange(200.0), np.arange(150.0, 200.0)])[:, None]
    base = RidgeBase.fit(column, np.zeros(250, np.int32), np.zeros(250), 1, ["code"], 1.0)
    assert base.code_values.tolist() == list(range(200 - MAX_CODES, 200))
    # a code seen last is learned; one seen only early is not coded: the bias alone, the mean
    # of the rows without a coded code
    r = (column[:, 0] == 190).astype(float) + (column[:, 0] == 5) * 0.5
    base = RidgeBase.fit(column, np.zeros(250, np.int32), r, 1, ["code"], 1e-6)
    at = [base.predict(np.array([v]), np.array([0]))[0] for v in (190.0, 5.0, 150.0)]
    assert at[0] == pytest.approx(1.0, abs=1e-3)
    assert at[1] == pytest.approx(0.5 / 136, abs=1e-3) and at[2] == pytest.approx(0, abs=1e-3)


def test_extend_then_update_is_the_fit_on_every_row():
    """Rows whose codes and third column appear only after the fit: extended and updated one
    at a time, the base is the fit on every row (the coding then holds every code)."""
    X, r = rows(600, codes=12)
    early = X[:300].copy()
    early[:, 2] = np.nan  # the third column appears after the fit
    early[early[:, 1] >= 8, 1] = 0.0  # and codes 8..11 too
    actions = np.array([0, 1] * 300, np.int32)
    base = RidgeBase.fit(early, actions[:300], r[:300], 2, KINDS, l2=0.5)
    assert base.n_codes.tolist() == [8]
    for x, k, target in zip(X[300:], actions[300:].tolist(), r[300:].tolist()):
        base.extend(x, KINDS)
        base.update(x, k, target)
    assert base.n_codes.tolist() == [12] and base.weights.shape == (2, 1 + 2 + 12)
    assert base.covariance.shape == (2, 15, 15)  # (the widths: the fit's, and 1 / l2 added)
    every = RidgeBase.fit(np.vstack([early, X[300:]]), actions, r, 2, KINDS, l2=0.5)
    test, _ = rows(50, codes=12, seed=1)
    for t in test:
        np.testing.assert_allclose(base.predict(t, np.array([0, 1])),
                                   every.predict(t, np.array([0, 1])), atol=1e-9)
    state = json.loads(json.dumps(_plain(base.to_state())))
    copy = RidgeBase.from_state(state)
    for t in test:
        assert copy.predict(t, np.array([0, 1])).tolist() == \
            base.predict(t, np.array([0, 1])).tolist()
    copy.extend(np.array([0.5, 12.0, 1.0]), KINDS)  # and it carries on from there
    for name, at in (("slots", 0), ("code_values", 3)):
        bad = json.loads(json.dumps(state))
        bad[name][at] = bad[name][at + 1]  # a slot twice; codes not ascending
        with pytest.raises(ValueError, match="slots"):
            RidgeBase.from_state(bad)


def test_extend_stays_within_the_bound_on_the_inverses_kept():
    X, r = rows(200, codes=4)
    base = RidgeBase.fit(X, np.zeros(200, np.int32), r, 1, KINDS, l2=1.0)
    D = base.weights.shape[1]
    wide = np.full(int(np.sqrt(FULL_COVARIANCE_FLOATS)) - D + 1, 1.0)
    x = np.concatenate([X[0], wide])
    assert not base.extend(x, KINDS + ["number"] * len(wide))  # one column too many
    assert base.weights.shape[1] == D
    assert base.extend(x[:-1], KINDS + ["number"] * (len(wide) - 1))
    assert base.weights.shape[1] ** 2 == FULL_COVARIANCE_FLOATS
    no_updates = RidgeBase.fit(X, np.zeros(200, np.int32), r, 1, KINDS, l2=1.0)
    no_updates.inverse = np.zeros((1, 0, 0))  # (a serving copy: decides, never learns)
    assert not no_updates.extend(np.array([0.5, 9.0, 1.0]), KINDS)


def campaign_stream(n, campaigns, seed):
    rng = random.Random(seed)
    for _ in range(n):
        c = rng.choice(campaigns)
        yield {"campaign": f"c{c}", "hour": rng.random()}, f"a{c % 3}"


def test_a_campaign_that_starts_after_the_refit_is_learned_before_the_next():
    policy = TreeEnsemblePolicy(n_trees=10, seed=0, auto_refit=False)
    for a in ["a0", "a1", "a2"]:
        policy.add_action(a)
    rng = random.Random(5)

    def play(stream):
        for x, best in stream:
            d = policy.decide(x)
            reward = float(d.action == best or rng.random() < 0.05)
            policy.learn_one(x, d.action, reward, d.probability)

    play(campaign_stream(600, [0, 1, 2], seed=0))
    policy.finish_refit(policy.start_refit()())
    play(campaign_stream(300, [3, 4, 5], seed=1))  # campaigns new since the refit
    assert policy.n_refits == 1
    for c in (3, 4, 5):
        scores = policy.scores({"campaign": f"c{c}", "hour": 0.5})
        assert max(scores, key=scores.get) == f"a{c % 3}"


def test_a_value_newer_than_the_trees_gets_no_correction_from_them():
    policy = TreeEnsemblePolicy(n_trees=10, seed=0, auto_refit=False)
    for a in ["a0", "a1", "a2"]:
        policy.add_action(a)
    rng = random.Random(6)
    for x, best in campaign_stream(900, [0, 1, 2, 3, 4, 5], seed=2):
        d = policy.decide(x)
        policy.learn_one(x, d.action, float(d.action == best or rng.random() < 0.05),
                         d.probability)
    policy.finish_refit(policy.start_refit()())
    for x, best in campaign_stream(60, [9], seed=3):  # a campaign new since the refit
        policy.learn_one(x, best, 1.0, 1 / 3)
    new, old = {"campaign": "c9", "hour": 0.5}, {"campaign": "c1", "hour": 0.5}
    models = np.array([0, 1, 2])
    for x, trees_count in ((new, False), (old, True)):
        xv = policy._encoder.encode(x)[0]
        linear = policy._linear.predict(xv, models)
        trees = policy._ensemble.predict(xv, models) * policy._blend[models]
        assert np.abs(trees).max() > 1e-3  # the trees have something to say about both
        scores = np.array(list(policy.scores(x).values()))
        np.testing.assert_allclose(scores, linear + trees if trees_count else linear, atol=1e-12)
    contexts = [new, old]
    candidates, rows = policy.distribution_rows(contexts)
    assert [dict(zip(candidates, row.tolist())) for row in rows] == \
        [policy.probabilities(x) for x in contexts]
    offers = [("a0", "a2"), ("a1", "a2")]
    assert [dict(zip(o, p.tolist())) for o, p in zip(offers, policy.offered_rows(contexts,
                                                                               offers))] == \
        [policy.probabilities(x, list(o)) for x, o in zip(contexts, offers)]
    copy = TreeEnsemblePolicy.from_state(json.loads(json.dumps(_plain(policy.to_state()))))
    assert copy.probabilities(new) == policy.probabilities(new)
