"""The tree-ensemble policy: compiled ensemble = LightGBM, SquareCB's rule, learning, state."""

from __future__ import annotations

import json
import math
import random
import threading

import lightgbm
import numpy as np
import pytest

from online.policies.refit import boost, booster_params
from online.policies.squarecb import inverse_gap_weights
from online.policies.tree_arrays import CompiledEnsemble, parse_lightgbm
from online.policies.trees import TreeEnsemblePolicy
from online.policies.window import EventWindow
from tests.helpers.distribution_rows import assert_rows_are_probabilities

ADS = ["a1", "a2", "a3", "a4", "a5"]


def favorite_stream(n, seed=0):
    """The five-action problem: reward 1 when the action is the context's favorite."""
    rng = random.Random(seed)
    for _ in range(n):
        yield {"favorite": rng.choice(ADS), "device": rng.choice(["mobile", "desktop", "tv"]),
               "hour": rng.random() * 24}


def play(policy, contexts, best=lambda x: x["favorite"]):
    rewards = []
    for x in contexts:
        d = policy.decide(x)
        rewards.append(float(d.action == best(x)))
        policy.learn_one(x, d.action, rewards[-1], d.probability)
    return np.array(rewards)


def small(**kw):
    params = {"n_trees": 20, "seed": 3, **kw}
    policy = TreeEnsemblePolicy(**params)
    for a in ADS:
        policy.add_action(a)
    return policy


# -- the compiled ensemble -----------------------------------------------------------------------


@pytest.mark.parametrize("zero_as_missing", [False, True])
def test_compiled_ensemble_predicts_exactly_as_lightgbm(zero_as_missing):
    rng = np.random.default_rng(0)
    n = 3000
    X = rng.random((n, 6))
    X[:, 3] = rng.integers(0, 40, n)  # a category with 40 codes (bitsets over 2 words)
    X[rng.random(n) < 0.1, 0] = np.nan
    X[rng.random(n) < 0.2, 3] = np.nan
    X[:, 4] = (rng.random(n) < 0.3) * rng.random(n)
    y = X[:, 1] + np.isin(X[:, 3], [2, 7, 33]) + 2 * np.nan_to_num(X[:, 0]) + (X[:, 4] > 0.1)
    params = {"objective": "regression", "verbose": -1, "num_leaves": 15, "min_data_in_leaf": 5,
              "min_data_per_group": 5, "cat_smooth": 1, "max_cat_to_onehot": 4,
              "zero_as_missing": zero_as_missing}
    boosters = [lightgbm.train(params, lightgbm.Dataset(X, y * s, categorical_feature=[3]), 30)
                for s in (1.0, -2.0)]
    ens = CompiledEnsemble.concatenate([parse_lightgbm(b.model_to_string()) for b in boosters])
    T = rng.random((1000, 6))
    T[:, 3] = rng.integers(-2, 50, 1000)  # negative and never-seen codes go right
    for col, share in ((0, 0.2), (3, 0.2), (1, 0.1)):
        T[rng.random(1000) < share, col] = np.nan
    T[rng.random(1000) < 0.2, 4] = 0.0
    expected = np.column_stack([b.predict(T) for b in boosters])
    got = np.array([ens.predict(t, np.array([0, 1])) for t in T])
    np.testing.assert_array_equal(got, expected)
    # a shorter vector reads the missing columns as NaN; -1 predicts 0; select and state
    short = np.concatenate([T[:5, :3], np.full((5, 3), np.nan)], axis=1)
    np.testing.assert_array_equal(
        [ens.predict(t[:3], np.array([1, -1])) for t in short],
        np.column_stack([boosters[1].predict(short), np.zeros(5)]))
    np.testing.assert_array_equal([ens.select([1]).predict(t, np.array([0])) for t in T],
                                  expected[:, 1:])
    again = CompiledEnsemble.from_state(json.loads(json.dumps(_plain(ens.to_state()))))
    np.testing.assert_array_equal([again.predict(t, np.array([0, 1])) for t in T], expected)


def test_compiled_ensemble_deep_trees_single_leaves_and_empty_models():
    """The packed kernel on 63-leaf trees, numerical + categorical + NaN, a model whose trees
    are single leaves, an empty model; one row at a time and all rows at once."""
    rng = np.random.default_rng(1)
    n = 4000
    X = rng.random((n, 5))
    X[:, 2] = rng.integers(0, 70, n)  # a category over 3 bitset words
    X[rng.random(n) < 0.3, 0] = np.nan
    X[rng.random(n) < 0.1, 2] = np.nan
    y = np.sin(8 * np.nan_to_num(X[:, 0], nan=-1)) + (X[:, 2] % 7 == 3) + X[:, 1] * X[:, 3]
    params = {"objective": "regression", "verbose": -1, "num_leaves": 63, "min_data_in_leaf": 3,
              "min_data_per_group": 3, "cat_smooth": 1}
    boosters = [lightgbm.train(params, lightgbm.Dataset(X, y, categorical_feature=[2]), 37),
                lightgbm.train(params, lightgbm.Dataset(X, np.full(n, 0.25)), 3),
                lightgbm.train(params, lightgbm.Dataset(X, -y, categorical_feature=[2]), 1)]
    parts = [parse_lightgbm(b.model_to_string()) for b in boosters]
    assert len(parts[1].feature) == 0 and parts[0].n_trees == 37  # a single leaf; 37 = 4 * 9 + 1
    ens = CompiledEnsemble.concatenate([parts[0], CompiledEnsemble.empty(1), *parts[1:]])
    T = rng.random((500, 5))
    T[:, 2] = rng.integers(-3, 100, 500)
    T[rng.random(500) < 0.3, 0] = np.nan
    T[rng.random(500) < 0.2, 2] = np.nan
    T[rng.random(500) < 0.1, 3] = np.nan
    expected = np.column_stack([boosters[0].predict(T), np.zeros(500), boosters[1].predict(T),
                                boosters[2].predict(T)])
    models = np.array([0, 1, 2, 3])
    np.testing.assert_array_equal([ens.predict(t, models) for t in T], expected)
    np.testing.assert_array_equal([ens.predict(t, models[::-1]) for t in T], expected[:, ::-1])
    np.testing.assert_array_equal(CompiledEnsemble.empty(2).predict(T[0], np.array([1, -1, 0])),
                                  np.zeros(3))
    # all rows at once, model by model: the same numbers (an unfitted model -1 predicts 0)
    np.testing.assert_array_equal(ens.predict_rows(T, np.array([3, -1, 0, 2, 1])),
                                  np.column_stack([expected[:, 3], np.zeros(500), expected[:, 0],
                                                   expected[:, 2], expected[:, 1]]))
    assert ens.predict_rows(T[:0], models).shape == (0, 4)


def test_a_state_with_the_trees_of_a_loaded_ensemble_takes_its_layout():
    """Each publication's snapshot is loaded by every process that serves the app, and its
    trees change only at a refit: a state whose arrays are those of an ensemble loaded and
    still alive takes its layout (derived from the arrays alone) instead of laying them out
    again; a state that differs in one leaf lays out its own, and each predicts its own."""
    rng = np.random.default_rng(2)
    X = rng.random((600, 3))
    X[:, 2] = rng.integers(0, 12, 600)
    y = X[:, 0] + (X[:, 2] == 4)
    params = {"objective": "regression", "verbose": -1, "num_leaves": 15, "min_data_in_leaf": 5}
    booster = lightgbm.train(params, lightgbm.Dataset(X, y, categorical_feature=[2]), 12)
    state = _plain(CompiledEnsemble.concatenate(
        [parse_lightgbm(booster.model_to_string())]).to_state())
    first = CompiledEnsemble.from_state(json.loads(json.dumps(state)))
    again = CompiledEnsemble.from_state(json.loads(json.dumps(state)))
    assert again._layout is first._layout and again.digest() == first.digest()
    layout = first._layout
    del first  # a process replaces each model by the next: the layout goes on with the newest
    third = CompiledEnsemble.from_state(json.loads(json.dumps(state)))
    assert third._layout is layout
    changed = json.loads(json.dumps(state))
    changed["leaf_value"][3] += 1.0
    other = CompiledEnsemble.from_state(changed)
    assert other._layout is not layout and other.digest() != again.digest()
    T = rng.random((200, 3))
    T[:, 2] = rng.integers(0, 12, 200)
    expected = booster.predict(T)
    np.testing.assert_array_equal(again.predict_rows(T, np.array([0]))[:, 0], expected)
    assert not np.array_equal(other.predict_rows(T, np.array([0]))[:, 0], expected)


def test_boost_stops_at_the_first_empty_tree_with_lightgbm_s_trees():
    """``refit.boost`` gives the trees of ``lightgbm.train``'s model (every array the policy
    reads from it) with the policy's parameters, boosted from an initial score as the policy
    boosts from its linear base: rewards the initial score already fits, too few rows to split,
    a fit that ends (an unpenalised leaf fits a two-valued reward exactly in a round, then
    nothing is left), and one that grows a tree every round. (That boost stops calling LightGBM
    there is a matter of speed, for the bench: the model is the same either way.)"""
    rng = np.random.default_rng(4)
    X = (rng.random((400, 8)) < 0.3).astype(np.float32)
    signal = X[:, 0] + 0.5 * X[:, 1] * X[:, 2] + rng.normal(0, 0.1, 400)
    base = 0.2 * X[:, 4]
    cases = {"fitted by the base": (X, base, 1.0), "too few": (X[:9], signal[:9], 1.0),
             "fitted": (X, base + X[:, 3], 0.0), "signal": (X, signal, 1.0)}
    rounds = {}
    for name, (data, y, l2) in cases.items():
        params = booster_params(60, 1.0 if name == "fitted" else 0.1, 63, 5, l2, 3)
        params.pop("num_iterations")
        expected = lightgbm.train(params, lightgbm.Dataset(data, y, init_score=base[:len(y)]),
                                  num_boost_round=60)
        booster = boost(params, lightgbm.Dataset(data, y, init_score=base[:len(y)]), 60)
        got, want = (parse_lightgbm(b.model_to_string()) for b in (booster, expected))
        for field in ("model_trees", "tree_nodes", "tree_leaves", "feature", "threshold",
                      "decision_type", "left", "right", "leaf_value"):
            np.testing.assert_array_equal(getattr(got, field), getattr(want, field),
                                          err_msg=f"{name}: {field}")
        rounds[name] = booster.current_iteration()
    assert rounds["signal"] == 60
    assert max(rounds["fitted by the base"], rounds["too few"], rounds["fitted"]) < 5, rounds


def test_actions_too_few_to_split_get_no_booster_and_the_same_prediction():
    """Fewer than 2 x min_data_in_leaf events, and no split leaves enough on both sides: boosted
    from the linear base, LightGBM's model is then one leaf of 0 (the premise, checked on
    LightGBM), so the refit fits none, and the empty model predicts the same 0. One event more
    and LightGBM runs (the policy's half)."""
    rng = np.random.default_rng(6)
    X = (rng.random((10, 8)) < 0.5).astype(np.float32)
    X[:, 0] = [0, 1] * 5  # a split on column 0 leaves 5 and 5 events: worth taking
    y, init = X[:, 0] * 0.8, rng.random(10)
    params = booster_params(20, 0.1, 63, 5, 1.0, 3)
    params.pop("num_iterations")
    binning = {"verbose": -1, "min_data_in_leaf": 5, "min_data_per_group": 5}  # as the refit's
    fits = {n: parse_lightgbm(boost(params, lightgbm.Dataset(X[:n], y[:n], init_score=init[:n],
                                                             params=binning),
                                    20).model_to_string()) for n in (9, 10)}
    assert fits[9].n_trees == 1 and len(fits[9].feature) == 0
    assert fits[9].leaf_value.tolist() == [0.0]
    assert len(fits[10].feature) > 0

    policy = small(auto_refit=False)
    contexts = list(favorite_stream(19, seed=9))
    for i, x in enumerate(contexts):  # a1: 9 events, a2: 10
        a = "a1" if i < 9 else "a2"
        policy.learn_one(x, a, float(x["favorite"] == a or x["hour"] > 12), 0.2)
    policy.finish_refit(policy.start_refit()())
    trees = np.diff(policy._ensemble.model_trees)
    assert trees[0] == 0 and trees[1] > 0, trees


@pytest.mark.parametrize("zero_as_missing", [False, True])
def test_quickscorer_and_the_walk_give_lightgbm_s_predictions(zero_as_missing):
    """Trees of at most 64 leaves are QuickScorer's (numerical and categorical nodes alike),
    trees of more leaves are walked; a request for most of the trees uses QuickScorer, one for
    a few models walks every tree: every way gives LightGBM's numbers exactly."""
    rng = np.random.default_rng(2)
    n = 4000
    X = rng.random((n, 6))
    X[rng.random(n) < 0.2, 0] = np.nan
    X[:, 1] = (rng.random(n) < 0.4) * rng.random(n)  # zeros: missing with zero_as_missing
    X[:, 2] = rng.integers(0, 2, n)  # a 0/1 variable, as one-hot codes are
    X[:, 5] = rng.integers(0, 9, n)  # a category (the last model's)
    y = np.sin(6 * np.nan_to_num(X[:, 0], nan=-0.5)) + X[:, 1] * X[:, 3] + X[:, 2] - X[:, 4] ** 2
    params = {"objective": "regression", "verbose": -1, "min_data_in_leaf": 3,
              "min_data_per_group": 3, "cat_smooth": 1, "zero_as_missing": zero_as_missing}
    numerical = lightgbm.Dataset(X[:, :5], y)
    boosters = [lightgbm.train({**params, "num_leaves": 63}, numerical, 40),
                lightgbm.train({**params, "num_leaves": 64}, numerical, 20),
                lightgbm.train({**params, "num_leaves": 100}, numerical, 10),
                lightgbm.train({**params, "num_leaves": 31},
                               lightgbm.Dataset(X, y + (X[:, 5] % 3 == 1),
                                                categorical_feature=[5]), 20)]
    ens = CompiledEnsemble.concatenate([parse_lightgbm(b.model_to_string()) for b in boosters])
    leaves = np.diff(ens.tree_leaves)
    quick = ens._packed.qs.leaf0 >= 0
    assert quick[:60].all() and leaves[40:60].max() == 64  # 63 and 64 leaves: QuickScorer's
    assert not quick[60:70].any() and leaves[60:70].min() > 64  # more: walked
    tree_of_node = np.repeat(np.arange(ens.n_trees), np.diff(ens.tree_nodes))
    categorical = np.zeros(ens.n_trees, bool)
    categorical[tree_of_node[(ens.decision_type & 1) == 1]] = True
    assert categorical[70:].any()  # with a categorical node: QuickScorer's too
    np.testing.assert_array_equal(quick, leaves <= 64)
    T = rng.random((300, 6))
    T[rng.random(300) < 0.3, 0] = np.nan
    T[rng.random(300) < 0.3, 1] = 0.0
    T[:, 2] = rng.integers(0, 2, 300)
    T[:, 5] = rng.integers(-1, 12, 300)
    T[rng.random(300) < 0.1, 4] = np.nan
    for col in (0, 3, 4):  # values equal to a threshold go left
        T[:60, col] = rng.choice(ens.threshold[ens.feature == col], 60)
    expected = np.column_stack([b.predict(T if i == 3 else T[:, :5])
                                for i, b in enumerate(boosters)])
    for models in ([0, 1, 2, 3], [3, 2, 1, 0, -1], [0, 1], [2], [3], [-1, 1]):
        columns = [expected[:, m] if m >= 0 else np.zeros(300) for m in models]
        want = np.column_stack(columns)
        np.testing.assert_array_equal([ens.predict(t, np.array(models)) for t in T], want)
        np.testing.assert_array_equal(ens.predict_rows(T, np.array(models)), want)


def test_quickscorer_reads_categorical_nodes_by_code():
    """A categorical node's false codes are listed per code: codes in and out of its bitset,
    codes past every bitset, NaN, negative and fractional values (cast toward zero, as LightGBM
    does: -0.3 reads as 0) all give LightGBM's numbers; a bitset longer than MAX_QUICK_CODES
    bits keeps its tree walked, with the same numbers."""
    rng = np.random.default_rng(4)
    n = 6000
    X = rng.random((n, 4))
    X[:, 1] = rng.integers(0, 40, n)  # a small category (bitsets of 1 or 2 words)
    X[:, 2] = rng.integers(0, 400, n)  # a large one: bitsets past MAX_QUICK_CODES bits
    X[rng.random(n) < 0.1, 1] = np.nan
    y = np.isin(X[:, 1], [1, 4, 9, 35]) + 2 * (X[:, 2] % 5 == 0) + (X[:, 2] > 300) + X[:, 0]
    params = {"objective": "regression", "verbose": -1, "num_leaves": 31, "min_data_in_leaf": 3,
              "min_data_per_group": 3, "cat_smooth": 1, "max_cat_threshold": 64}
    small = X.copy()
    small[:, 2] = 0  # the first two models never split on the large category
    boosters = [lightgbm.train(params, lightgbm.Dataset(data, y * s, categorical_feature=[1, 2]),
                               30) for data, s in ((small, 1.0), (small, -1.0), (X, 0.5))]
    ens = CompiledEnsemble.concatenate([parse_lightgbm(b.model_to_string()) for b in boosters])
    quick = ens._packed.qs.leaf0 >= 0
    assert quick.any() and not quick.all()  # long bitsets: walked
    assert len(ens._packed.qs.cat_tree) > 0
    T = rng.random((600, 4))
    T[:, 1] = rng.integers(-2, 80, 600) + np.where(rng.random(600) < 0.2, 0.7, 0.0)
    T[:, 2] = rng.integers(-1, 450, 600)
    T[rng.random(600) < 0.1, 1] = np.nan
    T[rng.random(600) < 0.1, 2] = np.nan
    expected = np.column_stack([b.predict(T) for b in boosters])
    models = np.array([0, 1, 2])
    np.testing.assert_array_equal(ens.predict_rows(T, models), expected)
    np.testing.assert_array_equal([ens.predict(t, models) for t in T], expected)
    # the walk (a request for one model of three) reads them alike
    walked = np.column_stack([[ens.predict(t, np.array([m]))[0] for t in T] for m in models])
    np.testing.assert_array_equal(walked, expected)


def test_quickscorer_past_65536_trees():
    """QuickScorer knows a tree by a 16-bit index in its block of 65,536: the trees of the
    second block are scored as those of the first."""
    rng = np.random.default_rng(3)
    X = rng.random((2000, 4))
    y = X[:, 0] * X[:, 1] + np.sin(5 * X[:, 2])
    booster = lightgbm.train({"objective": "regression", "verbose": -1, "num_leaves": 7,
                              "min_data_in_leaf": 5}, lightgbm.Dataset(X, y), 100)
    ens = CompiledEnsemble.concatenate([parse_lightgbm(booster.model_to_string())] * 700)
    assert ens.n_trees == 70_000 and (ens._packed.qs.leaf0 >= 0).all()
    T = rng.random((20, 4))
    got = ens.predict_rows(T, np.arange(700))
    np.testing.assert_array_equal(got, np.repeat(booster.predict(T)[:, None], 700, axis=1))


def test_dense_groups_give_lightgbm_s_predictions():
    """Groups of few thresholds with entries for many of their block's trees are dense (a row
    per threshold): 0/1 variables (one threshold), a 3-valued one (two), NaN (every row), in
    both blocks of 70,000 trees; a many-valued number stays sparse. LightGBM's numbers, from
    QuickScorer, the rows' kernel and the walk alike."""
    rng = np.random.default_rng(5)
    n = 3000
    X = np.column_stack([rng.integers(0, 2, (n, 3)), rng.integers(0, 3, n), rng.random(n)])
    y = X[:, 0] + 2 * X[:, 1] * X[:, 2] - (X[:, 3] == 1) + np.sin(6 * X[:, 4])
    booster = lightgbm.train({"objective": "regression", "verbose": -1, "num_leaves": 15,
                              "min_data_in_leaf": 5}, lightgbm.Dataset(X, y), 100)
    ens = CompiledEnsemble.concatenate([parse_lightgbm(booster.model_to_string())] * 700)
    qs = ens._packed.qs
    levels = np.diff(qs.level_start)
    assert ens.n_trees == 70_000 and (qs.leaf0 >= 0).all()
    n_slots = len(levels) // 2
    for block in (0, 1):
        dense = levels[block * n_slots:(block + 1) * n_slots]
        assert (dense == 1).sum() >= 3 and (dense == 2).sum() >= 1  # the 0/1 and 3-valued
    assert len(qs.tree) > 0  # the number's entries: sparse
    T = np.column_stack([rng.integers(0, 2, (200, 3)), rng.integers(-1, 4, 200),
                         rng.random(200)]).astype(float)
    T[rng.random(200) < 0.1, 0] = np.nan
    T[rng.random(200) < 0.1, 3] = np.nan
    T[:20, 3] = rng.choice(ens.threshold[ens.feature == 3], 20)  # equal to a threshold: left
    expected = booster.predict(T)
    models = np.array([0, 699, 350])
    np.testing.assert_array_equal(ens.predict_rows(T, np.arange(700))[:, models],
                                  np.repeat(expected[:, None], 3, axis=1))
    for t, want in zip(T[:40], expected[:40]):
        assert (ens.predict(t, np.arange(700)) == want).all()
        assert ens.predict(t, np.array([699]))[0] == want  # one model: walked


def test_each_candidate_set_decides_as_a_fresh_policy_would():
    """The models a decision among a candidate set needs are kept per set (a multi-slot rank
    alternates two, a request's own actions come as a new list each time): alternating sets,
    and a refit between, give the probabilities of a policy that never kept any."""
    policy = small()
    play(policy, favorite_stream(400, seed=3))
    sets = [dict(excluded=["a1"]), dict(actions=["a3", "a1", "a5"]), dict(), dict(excluded=["a2"]),
            dict(actions=["a3", "a1", "a5"], excluded=["a5"])]
    contexts = list(favorite_stream(30, seed=4))
    for round_ in range(2):
        for x in contexts:
            for given in sets:
                fresh = TreeEnsemblePolicy.from_state(policy.to_state())
                assert policy.probabilities(x, **given) == fresh.probabilities(x, **given)
        play(policy, favorite_stream(300, seed=5 + round_))  # (refits: the kept sets go stale)


def _plain(value):
    """numpy arrays -> lists; fails on anything that is not arrays + JSON values (no pickle)."""
    if isinstance(value, np.ndarray):
        assert value.dtype != object
        return value.tolist()
    if isinstance(value, dict):
        assert all(isinstance(k, str) for k in value)
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    assert value is None or isinstance(value, (bool, int, float, str)), type(value)
    return value


# -- the exploration rule ------------------------------------------------------------------------


def test_inverse_gap_weights_formula_and_bounds():
    rng = np.random.default_rng(1)
    for _ in range(200):
        K = int(rng.integers(1, 30))
        s = rng.random(K)
        unseen = rng.random(K) < 0.2
        g = float(rng.random() * 1000)
        p = np.empty(K)
        best = inverse_gap_weights(s, unseen, g, p)
        assert abs(p.sum() - 1.0) < 1e-12 and (p > 0).all()
        if unseen.all():
            np.testing.assert_allclose(p, 1.0 / K)
            continue
        assert not unseen[best] and s[best] == s[~unseen].max()
        for a in range(K):
            if a != best:
                gap = 0.0 if unseen[a] else s[best] - s[a]
                assert p[a] == 1.0 / (K + g * gap)
                assert 1.0 / (K + g * (s.max() - s.min())) <= p[a] <= 1.0 / K
        assert p[best] >= 1.0 / K - 1e-12


def test_probabilities_are_squarecb_of_the_scores_and_sum_to_one():
    policy = small(optimism=0.5)  # the optimistic scores (the predictions when optimism is 0)
    play(policy, favorite_stream(600, seed=1))
    assert policy.n_refits > 3
    for x in favorite_stream(50, seed=2):
        probs = policy.probabilities(x)
        scores = policy.scores(x, optimistic=True)
        assert list(probs) == sorted(probs, key=probs.get, reverse=True)
        assert abs(sum(probs.values()) - 1.0) < 1e-12
        K, g = len(ADS), policy.gamma(len(ADS))
        best = max(scores, key=scores.get)
        assert probs[best] == max(probs.values())
        for a in ADS:
            if a != best:
                assert probs[a] == 1.0 / (K + g * (scores[best] - scores[a]))
        d = policy.decide(x, excluded=["a1"])
        assert "a1" not in d.probabilities and abs(sum(d.probabilities.values()) - 1) < 1e-12
        assert d.probability == d.probabilities[d.action]


# -- learning ------------------------------------------------------------------------------------


def test_five_action_problem_reaches_0_9_within_2000_events():
    policy = small(n_trees=100)  # the defaults but the seed
    rewards = play(policy, favorite_stream(2000, seed=11))
    assert rewards[1000:].mean() >= 0.9


def test_learning_from_a_uniform_log_recovers_the_best_action():
    """Off-policy: events logged by another policy (uniform, p = 1/5) are learned by direct
    regression: the greedy action is each context's best."""
    rng = random.Random(5)
    policy = TreeEnsemblePolicy(n_trees=30, seed=0)
    log = [(x, rng.choice(ADS)) for x in favorite_stream(3000, seed=2)]
    # the reward depends on two features: the favorite, and an hour-of-day bonus for a5
    def reward(x, a):
        return float(a == x["favorite"]) * 0.6 + (0.5 if a == "a5" and x["hour"] < 6 else 0.0)

    assert policy.learn_many((x, a, reward(x, a), 0.2) for x, a in log) == 3000
    policy.finish_refit(policy.start_refit()())  # fit on everything logged
    hits = 0
    for x in favorite_stream(300, seed=9):
        truth = max(ADS, key=lambda a: reward(x, a))
        hits += policy.predict_one(x) == truth
    assert hits >= 0.95 * 300


@pytest.mark.parametrize("optimism", [0.0, 0.5])
def test_distribution_rows_are_the_probabilities_of_each_context(optimism):
    """What an evaluator gets for many rows at once is, number for number, probabilities(x)."""
    policy = small(optimism=optimism, refit_min=50)
    play(policy, favorite_stream(600, seed=4))
    policy.add_action("a6")  # no data yet: unseen
    xs = [{**x, "hour": None} if i % 5 == 0 else x
          for i, x in enumerate(favorite_stream(200, seed=5))]
    xs[3] = {"favorite": "never seen", "new key": 1.0}
    assert_rows_are_probabilities(policy, xs, ADS + ["a6"])


def test_learning_reads_the_trees_sums_that_distribution_rows_computed():
    """An evaluator scores a batch, then the policy learns it: the held-out prediction of each
    event's trees comes from those rows (not scored again), the same number; a row not scored,
    or scored by trees since replaced, is computed; decisions are those of a policy that
    always computes."""
    policy = small(refit_min=50)
    play(policy, favorite_stream(600, seed=4))
    policy.remove_action("a2")  # a column of no candidate
    xs = list(favorite_stream(60, seed=5))
    policy.distribution_rows(xs)
    ensemble = policy._ensemble
    rows = [policy._encoder.encode(x)[0] for x in xs]
    want = [[ensemble.predict(xv, np.array([k]))[0] for k in range(len(ADS))] for xv in rows]

    def scored_again(*args):
        raise AssertionError("scored again")

    ensemble.predict = scored_again  # an instance attribute hides the method
    assert [[policy._tree_sum(xv, k) for k in (0, 2, 3, 4)] for xv in rows] == \
        [[w[k] for k in (0, 2, 3, 4)] for w in want]
    for xv, k in ((rows[0], 1), (rows[0] + 0.5, 0)):  # not a candidate; not a scored row
        with pytest.raises(AssertionError, match="scored again"):
            policy._tree_sum(xv, k)
    del ensemble.predict
    policy._ensemble = CompiledEnsemble.concatenate([ensemble])  # new trees: computed again
    assert policy._tree_sum(rows[0], 0) == want[0][0]

    def learn_in_batches(reuse: bool):
        p = small(refit_min=50)
        rewards = []
        for lo in range(0, 1200, 40):
            batch = []
            for x in favorite_stream(40, seed=lo):
                d = p.decide(x)
                batch.append((x, d.action, float(d.action == x["favorite"]), d.probability))
            p.distribution_rows([x for x, *_ in batch])
            if not reuse:
                p._scored = None
            p.learn_many(batch)
            rewards += [r for _, _, r, _ in batch]
        return rewards

    assert learn_in_batches(True) == learn_in_batches(False)


def test_learning_reads_the_trees_sums_that_offered_rows_computed():
    """As distribution_rows' sums: each row's offered actions are read, not scored again; an
    action the row did not offer is computed."""
    policy = small(refit_min=50)
    play(policy, favorite_stream(600, seed=4))
    xs = list(favorite_stream(30, seed=5))
    offers = [tuple(ADS[i % 5:][:2]) for i in range(len(xs))]
    policy.offered_rows(xs, offers)
    ensemble = policy._ensemble
    rows = [policy._encoder.encode(x)[0] for x in xs]
    want = [[ensemble.predict(xv, np.array([ADS.index(a)]))[0] for a in offer]
            for xv, offer in zip(rows, offers)]

    def scored_again(*args):
        raise AssertionError("scored again")

    ensemble.predict = scored_again
    assert [[policy._tree_sum(xv, ADS.index(a)) for a in offer]
            for xv, offer in zip(rows, offers)] == want
    with pytest.raises(AssertionError, match="scored again"):  # a4 was not offered with row 0
        policy._tree_sum(rows[0], 3)


def test_unseen_actions_are_tried_at_once_and_removed_ones_never():
    policy = small()
    play(policy, favorite_stream(400, seed=1))
    policy.add_action("new")
    x = next(favorite_stream(1, seed=3))
    probs = policy.probabilities(x)
    assert probs["new"] == pytest.approx(1.0 / 6)  # no data: no gap
    assert np.isnan(policy.scores(x)["new"])
    policy.remove_action("a3")
    for _ in range(50):
        assert policy.decide(x).action != "a3"
    assert policy.decide(x, actions=["a3", "a1"]).probabilities["a3"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="no action"):
        policy.decide(x, actions=["a1"], excluded=["a1"])


def test_what_a_decision_keeps_of_the_models_is_renewed_with_them():
    """Per candidate, a decision keeps the model index, whether it is unseen and the trees'
    weight until the models or the candidates change: a refit, a new or removed action."""
    policy = small(auto_refit=False)
    x = {"favorite": "a4", "device": "tv", "hour": 20.0}
    assert set(policy.probabilities(x).values()) == {0.2}  # no models yet: all unseen
    play(policy, favorite_stream(300, seed=1))
    assert set(policy.probabilities(x).values()) == {0.2}  # learned, not refitted
    policy.finish_refit(policy.start_refit()())
    probs = policy.probabilities(x)
    assert max(probs, key=probs.get) == "a4" and probs["a4"] > 0.5
    assert probs == TreeEnsemblePolicy.from_state(policy.to_state()).probabilities(x)
    policy.add_action("a6")
    assert policy.probabilities(x)["a6"] == pytest.approx(1 / 6)
    policy.remove_action("a4")
    assert "a4" not in policy.probabilities(x) and policy.decide(x).action != "a4"


def test_int_action_ids_and_river_pull_update():
    policy = TreeEnsemblePolicy(n_trees=10, seed=0)
    for t in range(600):
        x = {"v": float(t % 2)}
        arm = policy.pull([0, 1], x)
        policy.update(arm, x, float(arm == t % 2))
    assert policy.predict_one({"v": 1.0}, actions=[0, 1]) == 1
    assert policy.predict_one({"v": 0.0}, actions=[0, 1]) == 0


def test_bad_input_is_a_clear_value_error_and_unseen_keys_are_ignored():
    policy = small()
    play(policy, favorite_stream(200, seed=1))
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="hour"):
            policy.decide({"favorite": "a1", "hour": bad})
        with pytest.raises(ValueError, match="hour"):
            policy.learn_one({"favorite": "a1", "hour": bad}, "a1", 1.0, 0.5)
    with pytest.raises(ValueError, match="probability"):
        policy.learn_one({"favorite": "a1"}, "a1", 1.0, 0.0)
    x = {"favorite": "a2", "device": "mobile", "hour": 3.0}
    assert policy.probabilities({**x, "never": 1.0, "device": "watch"}) == policy.probabilities(
        {"favorite": "a2", "hour": 3.0})


# -- refits, window, state -----------------------------------------------------------------------


def test_refit_runs_in_a_thread_while_the_policy_learns():
    policy = small(auto_refit=False)
    play(policy, favorite_stream(300, seed=1))
    assert policy.n_refits == 0 and policy.refit_due()
    job = policy.start_refit()
    box = {}
    worker = threading.Thread(target=lambda: box.setdefault("result", job()))
    worker.start()
    play(policy, favorite_stream(100, seed=2))  # meanwhile
    worker.join()
    policy.finish_refit(box["result"])
    assert policy.n_refits == 1 and policy.n_trees_fitted > 0
    assert box["result"].n_events == 300 and policy.n_learned == 400
    assert policy.refit_due()  # the 100 events learned meanwhile are in the window, not fitted


def _trees(policy):  # per action index
    return np.diff(policy._ensemble.model_trees)


def _refit(policy):
    policy.finish_refit(policy.start_refit()())


def test_removed_actions_get_no_trees_until_they_return():
    keep, churn = small(auto_refit=False), small(auto_refit=False)
    rng = random.Random(5)
    events = [(x, rng.choice(ADS)) for x in favorite_stream(500, seed=6)]
    for i, (x, a) in enumerate(events):
        if i >= 300 and a == "a5":  # after the removal: the others' events only
            continue
        for policy in (keep, churn):
            policy.learn_one(x, a, float(a == x["favorite"]), 0.2)
        if i == 299:
            _refit(keep), _refit(churn)
            churn.remove_action("a5")
    _refit(keep), _refit(churn)
    assert _trees(keep)[4] > 0 and _trees(churn)[4] == 0  # a5 still has events in the window
    assert (_trees(churn)[:4] == _trees(keep)[:4]).all() and not churn.refit_due()
    for x in favorite_stream(20, seed=7):  # the others' models are the ones fitted with a5's
        assert churn.probabilities(x, ADS[:4]) == keep.probabilities(x, ADS[:4])
    for x in favorite_stream(80, seed=8):  # late rewards: a5 has no trees to hold out, nor test
        churn.learn_one(x, "a5", 1.0, 0.2)
    assert np.isnan(churn._window.held_out()[-80:]).all() and churn.n_changes == 0
    assert "a5" not in churn.actions and not churn.refit_due()

    churn.add_action("a5")  # back: its trees are due now, and the state says so
    assert churn.refit_due() and TreeEnsemblePolicy.from_state(churn.to_state()).refit_due()
    _refit(churn)
    assert _trees(churn)[4] > 0 and not churn.refit_due()


def test_actions_no_request_offers_any_more_get_no_trees_until_offered_again():
    """Requests that name their actions (a Personalizer app's articles of the day): an action
    whose offers have stopped is fitted as a removed one is, its linear base only, and gets
    its trees back at the refit after it is offered again (not at once). Decisions drawn
    among the inventory (no offers named) leave every action's trees."""
    named, inventory = small(auto_refit=False), small(auto_refit=False)
    rng = random.Random(5)
    for i, x in enumerate(favorite_stream(600, seed=6)):
        offered = ADS if i < 300 else ADS[:4]  # a5 is offered by the first 300 requests only
        a = rng.choice(offered)
        event = (x, a, float(a == x["favorite"]), 1 / len(offered))
        named.learn_many([(*event, offered)])
        inventory.learn_many([(*event, None)])
        if i == 299:
            _refit(named), _refit(inventory)
    _refit(named), _refit(inventory)
    assert _trees(inventory)[4] > 0 and _trees(named)[4] == 0  # a5's events are in the window
    assert (_trees(named)[:4] == _trees(inventory)[:4]).all()
    for x in favorite_stream(20, seed=7):  # the others' models are the same
        assert named.probabilities(x, ADS[:4]) == inventory.probabilities(x, ADS[:4])
    assert "a5" in named.actions
    copy = TreeEnsemblePolicy.from_state(named.to_state())
    assert not named.refit_due() and not copy.refit_due()
    _refit(copy)  # the offers are in the state
    assert _trees(copy)[4] == 0

    # an action offered only in the batch that first brought it: those offers count too
    rng = random.Random(9)
    once = [(x, "n1" if i % 2 else rng.choice(ADS[:4]), 1.0, 0.2, [*ADS[:4], "n1"])
            for i, x in enumerate(favorite_stream(60, seed=9))]
    named.learn_many(once)
    named.learn_many([(x, rng.choice(ADS[:4]), 0.0, 0.25, ADS[:4])
                      for x in favorite_stream(400, seed=10)])
    _refit(named)
    assert _trees(named)[named._index["n1"]] == 0 and named._plays[named._index["n1"]] == 30

    for x in favorite_stream(40, seed=8):  # offered again: learned by its linear base
        for policy in (named, copy):
            policy.learn_many([(x, "a5", 1.0, 0.2, ADS)])
    assert np.isnan(named._window.held_out()[-40:]).all()
    assert not named.refit_due()  # its trees wait for the next refit
    _refit(named)
    assert _trees(named)[4] > 0


def test_window_keeps_the_last_events_only():
    w = EventWindow(size=3)
    for i in range(7):
        w.append(np.full(i % 3 + 1, float(i)), i, float(i), 1.0)
    X, a, r, p = w.arrays(n_columns=3)
    assert a.tolist() == [4, 5, 6] and len(w) == 3 and w.n_events == 7
    assert X[1].tolist() == [5.0, 5.0, 5.0] and X[2, 0] == 6.0 and np.isnan(X[2, 1:]).all()
    again = EventWindow.from_state(w.to_state())
    again.append(np.array([7.0]), 7, 7.0, 1.0)
    w.append(np.array([7.0]), 7, 7.0, 1.0)
    for u, v in zip(w.arrays(), again.arrays()):
        np.testing.assert_array_equal(u, v)

    policy = small(window=100)
    play(policy, favorite_stream(450, seed=4))
    assert len(policy._window) == 100


def test_state_round_trip_gives_identical_decisions_and_learning():
    policy = small()
    play(policy, favorite_stream(500, seed=1))
    state = policy.to_state()
    copy = TreeEnsemblePolicy.from_state(json.loads(json.dumps(_plain(state))))
    contexts = list(favorite_stream(400, seed=8))
    # same draws, same probabilities, and the same refits afterwards
    assert [(d.action, d.probability) for d in map(copy.decide, contexts[:50])] == [
        (d.action, d.probability) for d in map(policy.decide, contexts[:50])]
    r1, r2 = play(policy, contexts), play(copy, contexts)
    np.testing.assert_array_equal(r1, r2)
    assert copy.n_refits == policy.n_refits
    assert copy.probabilities(contexts[0]) == policy.probabilities(contexts[0])

    serving = TreeEnsemblePolicy.from_state(policy.to_state(statistics=False))
    assert serving.probabilities(contexts[1]) == policy.probabilities(contexts[1])
    assert "window" not in policy.to_state(statistics=False)["model"]


def test_states_are_versioned_arrays():
    policy = small()
    play(policy, favorite_stream(300, seed=1))
    state = policy.to_state()
    assert state["format"] == "grove.trees" and state["version"] == TreeEnsemblePolicy.VERSION
    ensemble = state["model"]["ensemble"]
    assert ensemble["format"] == "grove.compiled-ensemble" and ensemble["version"] == 1
    with pytest.raises(ValueError, match="version"):
        TreeEnsemblePolicy.from_state({**state, "version": 99})
    with pytest.raises(ValueError, match="compiled-ensemble"):
        CompiledEnsemble.from_state({**ensemble, "version": 2})


def test_actions_new_since_the_last_refit_are_learned_from_their_first_event():
    """An action that came after the last refit has no trees until the next one, but its linear
    base learns from its first event: requests that offer only new actions (a Personalizer app's
    articles of the day) find the one that pays long before a refit. Without it they are all
    unseen, played uniformly (0.2 here) until then. A serving copy (no A^-1) decides the same."""
    new = ["n1", "n2", "n3", "n4", "n5"]
    policy = small(auto_refit=False)
    play(policy, favorite_stream(300, seed=1))
    policy.finish_refit(policy.start_refit()())
    for a in new:
        policy.add_action(a)
    assert all(math.isnan(v) for v in list(policy.scores({}, new).values()))
    rewards = []
    for x in favorite_stream(300, seed=2):
        d = policy.decide(x, actions=new)
        rewards.append(float(d.action == "n3"))
        policy.learn_one(x, d.action, rewards[-1], d.probability)
    assert policy.n_refits == 1 and np.mean(rewards[-200:]) > 0.8, np.mean(rewards[-200:])
    contexts = list(favorite_stream(30, seed=3))
    serving = TreeEnsemblePolicy.from_state(json.loads(json.dumps(_plain(
        policy.to_state(statistics=False)))))
    assert [serving.probabilities(x, new) for x in contexts] == \
        [policy.probabilities(x, new) for x in contexts]


def test_learning_a_decided_event_reads_its_trees_sum_from_the_decision():
    """A decide then learning its event (river's pull then update) reads the played action's
    trees' sum from the decision's scores instead of walking its trees again: what is learned
    (the window's held-out predictions, the linear base, the trees' weights) is the same as a
    policy that learns the same events without deciding them."""
    decided, learner = small(refit_min=64), small(refit_min=64)
    events = []
    for x in favorite_stream(600, seed=4):
        d = decided.decide({**x, "device": "tablet"})  # another context: not read
        d = decided.decide(x)
        events.append((x, d.action, float(d.action == x["favorite"]), d.probability))
        decided.learn_one(*events[-1])
        learner.learn_one(*events[-1])
    assert decided.n_refits == learner.n_refits >= 3
    a, b = decided.to_state()["model"], learner.to_state()["model"]
    assert json.dumps(_plain(a["window"])) == json.dumps(_plain(b["window"]))
    assert np.array_equal(decided._linear.weights, learner._linear.weights)
    contexts = list(favorite_stream(50, seed=5))
    assert [decided.scores(x) for x in contexts] == [learner.scores(x) for x in contexts]
