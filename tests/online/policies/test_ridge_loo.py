"""The linear base's penalty, chosen at each refit by leave-one-out error in closed form."""

import json

import numpy as np
import pytest

from online.policies.ridge import RidgeBase
from online.policies.ridge_loo import PENALTIES, CentredRidge, choose_penalty
from online.policies.trees import TreeEnsemblePolicy
from tests.online.policies.test_trees_policy import _plain, favorite_stream, play, small


def brute_force_loo(Z, r, l2):
    """Refit without each row in turn; the squared error on each row left out."""
    errors = []
    for i in range(len(r)):
        keep = np.arange(len(r)) != i
        C = Z[keep] - Z[keep].mean(0)
        w = np.linalg.solve(C.T @ C + l2 * np.eye(Z.shape[1]), C.T @ (r[keep] - r[keep].mean()))
        bias = r[keep].mean() - Z[keep].mean(0) @ w
        errors.append((r[i] - bias - Z[i] @ w) ** 2)
    return errors


def test_the_closed_form_is_the_refit_without_each_row():
    rng = np.random.default_rng(3)
    # 0/1 columns (a rare one too), a number on a large scale, fewer rows than columns
    for n, d in ((40, 6), (9, 12)):
        Z = np.column_stack([rng.random((n, d - 2)) < 0.4, rng.random(n) < 0.05,
                             rng.normal(100.0, 30.0, n)]).astype(float)
        r = (rng.random(n) < 0.3).astype(float)
        fit, errors = CentredRidge.fit(Z, r, PENALTIES)
        expected = np.column_stack([brute_force_loo(Z, r, l2) for l2 in PENALTIES])
        np.testing.assert_allclose(errors, expected, rtol=1e-8)
        C = Z - Z.mean(0)
        for l2 in (0.1, 10.0):  # the weights are the ridge's
            w = np.linalg.solve(C.T @ C + l2 * np.eye(d), C.T @ (r - r.mean()))
            np.testing.assert_allclose(fit.weights(l2), [r.mean() - Z.mean(0) @ w, *w],
                                       atol=1e-10)


def test_fewer_rows_than_columns_decompose_the_small_side_with_the_same_inverse():
    rng = np.random.default_rng(5)
    for n, d in ((7, 30), (2, 5), (1, 4)):
        Z = np.column_stack([rng.random((n, d - 1)) < 0.3, rng.normal(50.0, 10.0, n)])
        r = rng.random(n)
        fit, _ = CentredRidge.fit(Z, r, ())
        assert fit.vectors.shape == (d, max(n - 1, 0))  # the centred rows' rank, not d
        C = Z - Z.mean(0)
        np.testing.assert_allclose(fit.gram, C.T @ C, atol=1e-8)  # derived, not formed
        for l2 in (0.1, 10.0):
            for penalised in (False, True):
                np.testing.assert_allclose(fit.inverse(l2, penalised),
                                           np.linalg.inv(fit.normal_matrix(l2, penalised)),
                                           rtol=1e-7, atol=1e-9)


def test_one_row_has_no_leave_one_out_error():
    fit, errors = CentredRidge.fit(np.array([[1.0, 0.0]]), np.array([1.0]), PENALTIES)
    assert errors.shape == (0, len(PENALTIES)) and fit.weights(1.0).tolist() == [1.0, 0.0, 0.0]


def test_the_default_stays_until_the_errors_show_another_better():
    """On noise a larger penalty than 10 predicts better; a few dozen rows rarely show it by two
    standard errors (the rule compares 8 penalties with the default: now and then one passes
    by chance), 2,000 rows always do."""
    kinds, kept, large = ["number"] * 10, 0, 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        X = (rng.random((2000, 10)) < 0.5).astype(np.float32)
        noise = (rng.random(2000) < 0.25).astype(float)
        actions = np.zeros(2000, np.int32)
        kept += RidgeBase.fit(X[:30], actions[:30], noise[:30], 1, kinds, PENALTIES).l2 == 10.0
        large += RidgeBase.fit(X, actions, noise, 1, kinds, PENALTIES).l2 > 10.0
    assert kept >= 8 and large == 10
    # the first penalty of a grid is its default
    grid = (1000.0, *[g for g in PENALTIES if g != 1000.0])
    assert RidgeBase.fit(X[:30], actions[:30], noise[:30], 1, kinds, grid).l2 == 1000.0
    rows = CentredRidge.fit(X[:30].astype(float), noise[:30], PENALTIES)[1]
    assert choose_penalty(rows[:, ::-1]) == 0  # (the same errors, 1000 first)


def noise_rows(n, d, n_actions, seed):
    """0/1 contexts, actions drawn uniformly, rewards that no context predicts."""
    rng = np.random.default_rng(seed)
    X = (rng.random((n, d)) < 0.5).astype(np.float32)
    actions = rng.integers(n_actions, size=n).astype(np.int32)
    return rng, X, actions, (rng.random(n) < 0.25).astype(float), ["number"] * d


def test_noise_gets_a_large_penalty_and_signal_a_small_one():
    n = 3000
    rng, X, actions, noise, kinds = noise_rows(n, 20, 3, seed=0)
    signal = np.where(X[:, actions] > 0, 0.9, 0.1)[np.arange(n), np.arange(n)]
    signal = (rng.random(n) < signal).astype(float)
    assert RidgeBase.fit(X, actions, noise, 3, kinds, PENALTIES).l2 == max(PENALTIES)
    assert RidgeBase.fit(X, actions, signal, 3, kinds, PENALTIES).l2 <= 10.0
    assert RidgeBase.fit(X, actions, signal, 3, kinds, 7.0).l2 == 7.0  # a number is kept


def test_the_policy_takes_a_grid_or_a_number_and_keeps_it_in_its_state():
    with pytest.raises(ValueError, match="linear_l2"):
        TreeEnsemblePolicy(linear_l2=[])
    with pytest.raises(ValueError, match="linear_l2"):
        TreeEnsemblePolicy(linear_l2=[1.0, -1.0])
    with pytest.raises(ValueError, match="linear_l2"):
        TreeEnsemblePolicy(linear_l2="loo")
    assert TreeEnsemblePolicy(linear_l2=np.float32(5.0)).linear_l2 == 5.0
    policy = small(linear_l2=[3.0, 30.0])
    play(policy, favorite_stream(300, seed=2))
    assert policy.n_refits > 0 and policy._linear.l2 in (3.0, 30.0)
    state = json.loads(json.dumps(_plain(policy.to_state())))
    loaded = TreeEnsemblePolicy.from_state(state)
    assert loaded.linear_l2 == (3.0, 30.0) and loaded._linear.l2 == policy._linear.l2
    contexts = list(favorite_stream(50, seed=6))
    assert [loaded.probabilities(x) for x in contexts] == [
        policy.probabilities(x) for x in contexts]
    assert TreeEnsemblePolicy().linear_l2 == PENALTIES


def test_only_actions_whose_trees_weigh_little_choose():
    """The base's own error is the prediction's only where the trees add little to it."""
    _, X, actions, noise, kinds = noise_rows(6000, 10, 2, seed=5)
    fit = RidgeBase.fit_predict
    assert fit(X, actions, noise, 2, kinds, PENALTIES, chooses=np.array([True, True]))[0].l2 > 10
    assert fit(X, actions, noise, 2, kinds, PENALTIES, chooses=np.array([True, False]))[0].l2 > 10
    assert fit(X, actions, noise, 2, kinds, PENALTIES, chooses=np.zeros(2, bool))[0].l2 == 10.0
    # trees not weighed (weight 1 everywhere): the base is their starting point, 10 stays
    policy = small(weigh_trees=False)
    rng = np.random.default_rng(6)
    for x in favorite_stream(1500, seed=3):
        d = policy.decide(x)
        policy.learn_one(x, d.action, float(rng.random() < 0.3), d.probability)
    assert policy.n_refits > 5 and policy._linear.l2 == 10.0
