"""The linear base of the tree-ensemble policy: ridge fits, trees on its residuals, old states."""

from __future__ import annotations

import json

import numpy as np
import pytest

from online.policies.ridge import FULL_COVARIANCE_FLOATS, MAX_CODES, RidgeBase
from online.policies.ridge_loo import PENALTIES, CentredRidge
from online.policies.trees import TreeEnsemblePolicy
from tests.online.policies.test_trees_policy import ADS, _plain, favorite_stream, play, small


def linear_rows(n, seed=0):
    """Encoded rows (number, number with NaN, category code) and a known linear reward."""
    rng = np.random.default_rng(seed)
    X = np.column_stack([rng.random(n), rng.random(n) * 100, rng.integers(0, 4, n)])
    X[rng.random(n) < 0.2, 1] = np.nan  # missing: 0 for the linear part
    effect = np.array([0.0, 0.3, -0.2, 0.1])
    r = 0.1 + 0.5 * X[:, 0] + 0.002 * np.nan_to_num(X[:, 1]) + effect[X[:, 2].astype(int)]
    return X, r


def test_the_linear_base_alone_recovers_a_known_linear_reward():
    X, r = linear_rows(3000)
    actions = np.zeros(len(X), np.int32)
    actions[1500:] = 1
    r[1500:] = 1.0 - r[1500:]  # action 1: the opposite slopes
    base = RidgeBase.fit(X, actions, r, 3, ["number", "number", "code"], l2=1e-3)
    T, expected = linear_rows(50, seed=1)
    got = np.array([base.predict(t, np.array([0, 1, 2, -1])) for t in T])
    np.testing.assert_allclose(got[:, 0], expected, atol=1e-4)
    np.testing.assert_allclose(got[:, 1], 1.0 - expected, atol=1e-4)
    np.testing.assert_array_equal(got[:, 2:], 0.0)  # never played, and unknown: 0
    # the compiled dot product is the coded rows' dot product
    np.testing.assert_allclose(got[:, 0], base.design(T) @ base.weights[0], atol=1e-12)


def test_ridge_penalty_shrinks_towards_the_mean_and_ignores_unseen_codes():
    X, r = linear_rows(200)
    kinds = ["number", "number", "code"]
    loose = RidgeBase.fit(X, np.zeros(200, np.int32), r, 1, kinds, l2=1e-3)
    tight = RidgeBase.fit(X, np.zeros(200, np.int32), r, 1, kinds, l2=1e9)
    t = np.array([1.0, 100.0, 1.0])  # 1.1, the mean ~0.48
    assert abs(tight.predict(t, np.array([0]))[0] - r.mean()) < 1e-3
    assert abs(loose.predict(t, np.array([0]))[0] - r.mean()) > 0.2
    # a code past those fitted, a NaN code, or a vector shorter than the fit reads as absent
    for v in ([1.0, 50.0, 9.0], [1.0, 50.0, np.nan], [1.0, 50.0]):
        with_code = loose.predict(np.array(v), np.array([0]))[0]
        no_code = loose.design(np.array([[1.0, 50.0, np.nan]])) @ loose.weights[0]
        assert with_code == pytest.approx(no_code[0])
    many = np.column_stack([np.arange(500.0) % 300])
    assert RidgeBase.fit(many, np.zeros(500, np.int32), np.zeros(500), 1, ["code"],
                         1.0).weights.shape == (1, 1 + MAX_CODES)


def test_trees_fit_the_residuals_of_the_linear_base():
    policy = small(n_trees=30)
    rng = np.random.default_rng(2)  # a uniform log: every action seen with every favorite
    policy.learn_many((x, ADS[i], float(ADS[i] == x["favorite"]), 0.2)
                      for x, i in zip(favorite_stream(1500, seed=2), rng.integers(0, 5, 1500)))
    x, _ = policy._encoder.encode({"favorite": "a2", "device": "tv", "hour": 3.0})
    actions = policy.actions
    models = np.arange(len(actions))
    linear = policy._linear.predict(x, models)
    trees = policy._ensemble.predict(x, models)
    # the favorite is a category: the linear base gets most of it; the trees fit what is left
    # (were they fitted to the rewards instead of the residuals, the sum would count it twice)
    assert np.argmax(linear) == actions.index("a2") and linear.max() > 0.5
    truth = np.array([float(a == "a2") for a in actions])
    np.testing.assert_allclose(linear + trees, truth, atol=0.2)
    np.testing.assert_allclose(list(policy.scores({"favorite": "a2", "device": "tv",
                                                   "hour": 3.0}).values()), linear + trees)


def test_without_the_linear_base_weights_stay_zero():
    policy = small(linear_l2=None)
    play(policy, favorite_stream(300, seed=2))
    assert policy.n_refits > 0 and not policy._linear.weights.any()
    with pytest.raises(ValueError, match="linear_l2"):
        TreeEnsemblePolicy(linear_l2=0.0)


def test_a_version_1_state_loads_and_decides_as_before():
    """A deployed app's stored state (trees only, no linear part) keeps loading: its linear
    weights are zero, so it decides exactly as the trees-only policy that wrote it."""
    old = small(linear_l2=None)
    play(old, favorite_stream(600, seed=5))
    state = json.loads(json.dumps(_plain(old.to_state())))
    state["version"] = 1
    del state["model"]["linear"]
    del state["params"]["linear_l2"]
    loaded = TreeEnsemblePolicy.from_state(state)
    assert not loaded._linear.weights.any() and loaded._linear.n_models == len(old.actions)
    contexts = list(favorite_stream(100, seed=6))
    assert [loaded.probabilities(x) for x in contexts] == [old.probabilities(x) for x in contexts]
    assert [(d.action, d.probability) for d in map(loaded.decide, contexts)] == [
        (d.action, d.probability) for d in map(old.decide, contexts)]
    # it learns on, now with the linear base (the constructor's default) at its next refit
    assert loaded.linear_l2 == PENALTIES
    play(loaded, favorite_stream(400, seed=7))
    assert loaded._linear.weights.any()


def test_round_trip_keeps_the_linear_base_exactly():
    policy = small()
    play(policy, favorite_stream(500, seed=1))
    assert policy._linear.weights.any()
    state = json.loads(json.dumps(_plain(policy.to_state(statistics=False))))
    copy = TreeEnsemblePolicy.from_state(state)
    np.testing.assert_array_equal(copy._linear.weights, policy._linear.weights)
    contexts = list(favorite_stream(50, seed=9))
    assert [copy.probabilities(x) for x in contexts] == [policy.probabilities(x) for x in contexts]


# -- the widths (the policy's optimism) ----------------------------------------------------------


def _direct_widths(base, X, actions, T, l2):
    """sqrt(z' (Z'Z + l2 I)^-1 z) per model, from the coded rows (numpy, no kernel)."""
    Z = base.design(X)
    out = []
    for t in T:
        z = base.design(t[None])[0]
        row = []
        for k in range(base.n_models):
            A = Z[actions == k].T @ Z[actions == k] + l2 * np.eye(Z.shape[1])
            row.append(np.sqrt(z @ np.linalg.solve(A, z)))
        out.append(row)
    return np.array(out)


def test_widths_are_linucbs_width_of_the_coded_row_and_shrink_with_data():
    X, r = linear_rows(2000)
    X[:, 0] = np.where(np.random.default_rng(3).random(2000) < 0.3, 0.0, X[:, 0])  # sparse
    actions = (np.arange(2000) % 3 == 0).astype(np.int32)  # model 1: 667 rows, model 0: 1333
    kinds = ["number", "number", "code"]
    base = RidgeBase.fit(X, actions, r, 3, kinds, l2=2.0)
    T, _ = linear_rows(40, seed=4)
    T[::4, 0] = 0.0
    got = np.array([base.widths(t, np.array([0, 1, 2, -1])) for t in T])
    direct = _direct_widths(base, X, actions, T, 2.0)
    np.testing.assert_allclose(got[:, :3], direct, rtol=1e-5)  # A^-1 is kept in float32
    assert (got[:, 3] == 0).all()
    assert (got[:, 0] < got[:, 1]).all() and (got[:, 1] < got[:, 2]).all()  # 1333 < 667 < 0 rows
    # model 2 never played: the prior's width sqrt(|z|^2 / l2)
    Z = base.design(T)
    np.testing.assert_allclose(got[:, 2], np.sqrt((Z ** 2).sum(axis=1) / 2.0), rtol=1e-6)


def test_many_columns_keep_only_the_covariance_diagonal(monkeypatch):
    import online.policies.ridge as ridge

    X, r = linear_rows(500)
    actions = np.zeros(500, np.int32)
    full = RidgeBase.fit(X, actions, r, 1, ["number", "number", "code"], l2=1.0)
    monkeypatch.setattr(ridge, "FULL_COVARIANCE_FLOATS", 10)  # 1 x 7 x 7 columns > 10
    diagonal = RidgeBase.fit(X, actions, r, 1, ["number", "number", "code"], l2=1.0)
    assert full.covariance.shape == (1, 7, 7) and diagonal.covariance.shape == (1, 7)
    np.testing.assert_allclose(diagonal.covariance[0], np.diag(full.covariance[0]))
    for t in linear_rows(20, seed=5)[0]:
        z = full.design(t[None])[0]
        expected = np.sqrt((z ** 2) @ np.diag(full.covariance[0]).astype(np.float64))
        assert diagonal.widths(t, np.array([0]))[0] == pytest.approx(expected, rel=1e-12)
        state = json.loads(json.dumps(_plain(diagonal.to_state())))
        assert RidgeBase.from_state(state).widths(t, np.array([0]))[0] == \
            diagonal.widths(t, np.array([0]))[0]


def assert_bonus_is_the_width_times(weight, policy, contexts):
    """The scores IGW weighs are the predictions plus ``weight`` times each action's width."""
    for x in contexts:
        plain, upper = policy.scores(x), policy.scores(x, optimistic=True)
        xv, _ = policy._encoder.encode(x)
        widths = policy._linear.widths(xv, np.arange(len(policy.actions)))
        assert (widths > 0).all()
        np.testing.assert_allclose([upper[a] - plain[a] for a in policy.actions],
                                   weight * widths, rtol=1e-9)


def test_optimism_adds_the_width_to_the_scores_it_weighs():
    policy = small(optimism=0.5, optimism_explained=0.0)
    play(policy, favorite_stream(400, seed=3))
    assert_bonus_is_the_width_times(0.5, policy, favorite_stream(20, seed=4))
    without = small(optimism=0.0, optimism_explained=0.0)
    play(without, favorite_stream(400, seed=3))
    x = next(favorite_stream(1, seed=4))
    assert without.scores(x, optimistic=True) == without.scores(x)
    with pytest.raises(ValueError, match="optimism"):
        TreeEnsemblePolicy(optimism=-1.0)


def test_a_state_without_widths_loads_and_decides_as_before():
    """A linear base written before the widths (ridge version 1) decides as it did: no bonus
    until the next refit, whatever ``optimism`` says."""
    old = small(optimism=0.0, optimism_explained=0.0)
    play(old, favorite_stream(500, seed=8))
    state = json.loads(json.dumps(_plain(old.to_state())))
    state["model"]["linear"]["version"] = 1
    del state["model"]["linear"]["covariance"]
    state["params"]["optimism"] = 0.5
    loaded = TreeEnsemblePolicy.from_state(state)
    assert loaded.optimism > 0 and loaded._linear.covariance.shape[1] == 0
    contexts = list(favorite_stream(100, seed=6))
    assert [loaded.probabilities(x) for x in contexts] == [old.probabilities(x) for x in contexts]
    play(loaded, favorite_stream(400, seed=7))
    assert loaded._linear.covariance.shape[1] > 0


def test_updates_between_refits_give_the_refit_on_every_row():
    """Recursive least squares from the fit's A^-1: after each added row the weights are the
    ridge fitted on all the rows so far (codes one-hot, NaN as absent, the bias unpenalised);
    a model that had no events at the fit, or an index out of range, is left alone."""
    kinds = ["number", "number", "code"]
    X, r = linear_rows(600, seed=3)
    actions = np.tile(np.array([0, 1], np.int32), 300)
    base = RidgeBase.fit(X[:200], actions[:200], r[:200], 3, kinds, l2=2.0)
    for i in range(200, 600):
        base.update(X[i], int(actions[i]), r[i])
        base.update(X[i], 7, r[i])
    refit = RidgeBase.fit(X, actions, r, 3, kinds, l2=2.0)
    np.testing.assert_allclose(base.weights[:2], refit.weights[:2], atol=1e-10)
    np.testing.assert_allclose(base.inverse[:2], refit.inverse[:2], atol=1e-10)
    base.update(X[0], 2, 1.0)  # action 2 never played before the fit: waits for the refit
    assert (base.weights[2] == 0).all() and (base.inverse[2] == 0).all()


def test_widths_shrink_with_each_update_as_a_refit_on_every_row_would_give(monkeypatch):
    """LinUCB's A_a takes every played row (Li et al. 2010), not only the refit's: after
    updates the widths are those of the fit on all the rows; with only the diagonal kept, the
    same update of the diagonal matrix (its diagonal)."""
    import online.policies.ridge as ridge

    kinds = ["number", "number", "code"]
    X, r = linear_rows(600, seed=3)
    actions = np.tile(np.array([0, 1], np.int32), 300)
    base = RidgeBase.fit(X[:200], actions[:200], r[:200], 3, kinds, l2=2.0)
    T = linear_rows(30, seed=9)[0]
    before = np.array([base.widths(t, np.arange(3)) for t in T])
    for i in range(200, 600):
        base.update(X[i], int(actions[i]), r[i])
    refit = RidgeBase.fit(X, actions, r, 3, kinds, l2=2.0)
    after = np.array([base.widths(t, np.arange(3)) for t in T])
    np.testing.assert_allclose(after, [refit.widths(t, np.arange(3)) for t in T], rtol=1e-4)
    assert (after[:, :2] < before[:, :2]).all() and (after[:, 2] == before[:, 2]).all()

    full = RidgeBase.fit(X[:200], actions[:200], r[:200], 3, kinds, l2=2.0)
    monkeypatch.setattr(ridge, "FULL_COVARIANCE_FLOATS", 10)
    diagonal = RidgeBase.fit(X[:200], actions[:200], r[:200], 3, kinds, l2=2.0)
    assert diagonal.covariance.ndim == 2
    diagonal.inverse = full.inverse  # (the ridge's own updates kept, the widths' diagonal)
    c = diagonal.covariance[0].astype(np.float64)
    z = diagonal.design(X[200][None])[0]
    diagonal.update(X[200], 0, r[200])
    expected = np.diag(np.linalg.inv(np.diag(1.0 / c) + np.outer(z, z)))
    np.testing.assert_allclose(diagonal.covariance[0], expected, rtol=1e-5)


def test_without_room_for_the_inverses_the_base_waits_for_refits(monkeypatch):
    import online.policies.ridge as ridge

    X, r = linear_rows(300)
    monkeypatch.setattr(ridge, "FULL_COVARIANCE_FLOATS", 10)
    base = RidgeBase.fit(X, np.zeros(300, np.int32), r, 1, ["number", "number", "code"], 1.0)
    before = base.weights.copy()
    base.update(X[0], 0, 5.0)
    assert base.inverse.shape == (1, 0, 0)
    np.testing.assert_array_equal(base.weights, before)


def test_the_policy_s_linear_base_learns_each_event_on_what_the_trees_leave():
    """Between refits each learned event moves its action's linear base: the target is the
    reward less the action's weighed trees, and a refit running meanwhile (in the service, off
    the event loop) gets the events learned while it ran, as if it had been inline."""
    rng = np.random.default_rng(11)
    log = [(x, ADS[i], float(ADS[i] == x["favorite"]), 0.2)  # a uniform policy's log
           for x, i in zip(favorite_stream(500, seed=11), rng.integers(0, len(ADS), 500))]
    inline, deferred = small(auto_refit=False), small(auto_refit=False)
    for policy in (inline, deferred):
        policy.learn_many(log[:400])
    inline.finish_refit(inline.start_refit()())
    job = deferred.start_refit()
    before = inline._linear.weights.copy()
    inline.learn_many(log[400:])
    deferred.learn_many(log[400:])
    deferred.finish_refit(job())
    np.testing.assert_allclose(deferred._linear.weights, inline._linear.weights, atol=1e-12)
    assert not np.allclose(inline._linear.weights, before)
    # an API process's copy decides as the trainer's without what only learning reads
    serving = inline.to_state(statistics=False)["model"]["linear"]
    assert serving["inverse"].size == 0 and inline._linear.inverse.size > 0
    contexts = list(favorite_stream(50, seed=12))
    copy = TreeEnsemblePolicy.from_state(inline.to_state(statistics=False))
    assert [copy.probabilities(x) for x in contexts] == [inline.probabilities(x) for x in contexts]
    # the targets: the bases' refit on the 100 events' reward less the weighed trees
    X, a, r, _ = inline._window.arrays(inline._encoder.n_columns)
    trees = np.array([inline._ensemble.predict(x.astype(np.float64), np.array([k]))[0]
                      for x, k in zip(X[400:], a[400:])])
    target = np.concatenate([r[:400], r[400:] - inline._blend[a[400:]] * trees])
    expected = RidgeBase.fit(X, a, target, len(inline.actions), inline._encoder.column_kinds,
                             inline._linear.l2)  # the penalty the refit chose
    np.testing.assert_allclose(inline._linear.weights, expected.weights, atol=1e-9)


def test_a_state_before_the_updates_loads_and_waits_for_the_next_refit():
    old = small()
    play(old, favorite_stream(500, seed=8))
    state = json.loads(json.dumps(_plain(old.to_state())))
    assert state["model"]["linear"]["version"] == 7
    state["model"]["linear"]["version"] = 2
    for name in ("inverse", "l2", "events", "scales", "code_values", "slots", "n_read"):
        del state["model"]["linear"][name]  # (what a version-2 state did not have)
    loaded = TreeEnsemblePolicy.from_state(state)
    contexts = list(favorite_stream(100, seed=6))
    assert [loaded.probabilities(x) for x in contexts] == [old.probabilities(x) for x in contexts]
    before = loaded._linear.weights.copy()
    loaded.auto_refit = False
    play(loaded, favorite_stream(50, seed=7))  # until the next refit the base is as it was
    np.testing.assert_array_equal(loaded._linear.weights, before)
    bad = json.loads(json.dumps(_plain(old.to_state())))
    bad["model"]["linear"]["inverse"] = [[[1.0]]]
    with pytest.raises(ValueError, match="inverse"):
        TreeEnsemblePolicy.from_state(bad)


def test_a_new_model_past_the_fit_s_bound_on_a_inverse_waits_for_the_next_fit():
    """A fit keeps each model's A^-1 while n_models x D^2 stays under FULL_COVARIANCE_FLOATS; a
    model started between fits (learn_first) stays under it too: past it, it waits."""
    D = 601  # room for two models' A^-1
    assert FULL_COVARIANCE_FLOATS // (D * D) == 2
    z = np.zeros(0, np.int64)
    base = RidgeBase(np.arange(D - 1), z, z, np.zeros((1, D)), None,
                     np.zeros((1, D, D)), l2=1.0)
    x = np.ones(D - 1)
    assert base.learn_first(x, 1, 1.0) and base.n_models == 2  # grown to the bound, not past
    assert not base.learn_first(x, 2, 1.0) and base.n_models == 2
    assert not base.learn_first(x, 1, 0.0)  # it has its event already
    assert base.events.tolist() == [0, 1] and base.has_events(np.array([1, 0])).tolist() == [
        True, False]


def test_a_number_column_past_2_20_is_scaled_at_the_fit_and_waits_between_fits():
    """Values from 1e-300 to 1e30 in one column made the fit's normal matrix singular to
    float64 (a LinAlgError in the refit). The fit divides such a column by a power of 2 that
    brings its largest value down to 2^20, and predicts as the ridge on the scaled coding; a
    column within 2^20 is used as given. Between fits a row past the scale waits."""
    rng = np.random.default_rng(0)
    values = np.array([1e30, 2.0 ** 64, 1.0, 1e-300, 0.0, -1e19, 3.0])
    X = np.column_stack([rng.choice(values, 400), rng.normal(size=400) * 1000.0])
    r = rng.random(400)
    base = RidgeBase.fit(X, np.zeros(400, np.int32), r, 1, ["number", "number"], l2=1.0)
    assert base.scales[0] == 2.0 ** 80 and base.scales[1] == 1.0
    Z = base.design(X)
    assert np.abs(Z).max() <= 2.0 ** 20 and np.array_equal(Z[:, 2], X[:, 1])
    centred = Z[:, 1:] - Z[:, 1:].mean(axis=0)
    w = np.linalg.solve(centred.T @ centred + np.eye(2), centred.T @ (r - r.mean()))
    expected = r.mean() + (Z[:5, 1:] - Z[:, 1:].mean(axis=0)) @ w
    got = [base.predict(x, np.array([0]))[0] for x in X[:5]]
    np.testing.assert_allclose(got, expected, rtol=1e-9)
    weights = base.weights.copy()
    base.update(np.array([2.0 ** 102, 1.0]), 0, 1.0)  # past 2^80 x 2^21: left to the next fit
    assert np.array_equal(base.weights, weights) and base.events[0] == 400
    base.update(np.array([2.0 ** 99, 1.0]), 0, 1.0)
    assert not np.array_equal(base.weights, weights) and base.events[0] == 401
    assert np.isfinite(base.weights).all() and np.isfinite(base.inverse).all()


def test_a_new_action_s_first_row_past_the_fit_s_scales_waits_for_the_next_fit():
    """A model's first row between fits (``learn_first``) is coded with the fit's scales: one
    with 1e30 where the fit saw values in [0, 1] made the one-row normal matrix singular
    (LinAlgError out of learn_one), or, at 1e38, an A^-1 that was not positive definite."""
    rng = np.random.default_rng(0)
    X = rng.random((200, 2))
    base = RidgeBase.fit(X, np.zeros(200, np.int32), rng.random(200), 1, ["number"] * 2, l2=1.0)
    for v in (1e30, 1e38, 2.0 ** 22):
        assert not base.learn_first(np.array([v, 0.5]), 1, 1.0)
    assert base.learn_first(np.array([2.0 ** 20 + 0.01, 0.5]), 1, 1.0)  # (within twice 2^20)
    assert base.n_models == 2 and np.isfinite(base.inverse).all()


def test_ridge_base_refuses_a_state_with_bad_scales():
    base = RidgeBase.fit(np.ones((10, 1)), np.zeros(10, np.int32), np.ones(10), 1, ["number"], 1.0)
    for scales in ([], [0.5], [float("inf")], [1.0, 1.0]):
        state = base.to_state()
        state["scales"] = np.array(scales)
        with pytest.raises(ValueError, match="scales"):
            RidgeBase.from_state(state)


def test_the_fit_s_inverses_come_from_the_centred_gram_matrix():
    """``A^-1`` (bias penalised or not) by blocks from the centred fit: equal to inverting
    ``A`` where that is well conditioned, and finite where a large, nearly constant column
    made ``A`` singular to float64 (a price of 1e6 in every row, a penalty of 0.1: LinAlgError
    in a default trees app's refits)."""
    rng = np.random.default_rng(1)
    Z = rng.normal(size=(300, 4)) + [0.0, 3.0, -1.0, 0.5]
    fit, _ = CentredRidge.fit(Z, rng.random(300), ())
    for l2, penalised in ((0.1, False), (10.0, False), (0.1, True), (10.0, True)):
        np.testing.assert_allclose(fit.inverse(l2, penalised),
                                   np.linalg.inv(fit.normal_matrix(l2, penalised)),
                                   rtol=1e-9, atol=1e-12)
    z = rng.random(1300) * 0.05
    X = np.column_stack([z, np.full(1300, 1e6)])
    r = (rng.random(1300) < 0.1 + 16 * z).astype(float)
    with pytest.raises(np.linalg.LinAlgError):  # the premise
        np.linalg.inv(CentredRidge.fit(np.column_stack([np.ones(1300), X])[:, 1:], r, ())[0]
                      .normal_matrix(0.1, bias_penalised=False))
    base = RidgeBase.fit(X, np.zeros(1300, np.int32), r, 1, ["number", "number"], l2=0.1)
    assert np.isfinite(base.inverse).all() and np.isfinite(base.covariance).all()
    weights = base.weights.copy()
    base.update(np.array([0.04, 1e6]), 0, 1.0)
    assert np.isfinite(base.weights).all() and not np.array_equal(base.weights, weights)
