"""R-MOTiFS (online/selection/r_motifs.py) and its fast k-NN reward (knn_reward.py)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import LeaveOneOut, cross_val_score
from sklearn.neighbors import KNeighborsClassifier

from online import RMOTiFS
from online.selection.knn_reward import KNNReward
from online.selection.r_motifs import _Tree, uct

INFORMATIVE = [3, 17, 29]


def three_of_forty(seed=1, n=300):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 40))
    y = (X[:, INFORMATIVE].sum(axis=1) > 0).astype(int)
    return X, y


# -- selection quality ----------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_finds_the_three_informative_features_of_forty(seed):
    X, y = three_of_forty()
    sel = RMOTiFS(n_simulations=150, random_state=seed).fit(X, y)
    chosen = set(sel.selected_features_.tolist())
    assert set(INFORMATIVE) <= chosen
    assert len(chosen) <= 5
    assert sel.accuracy_ > sel.all_features_accuracy_ + 0.1
    assert sel.fsr_ == pytest.approx(sel.accuracy_ / len(chosen))  # eq. (4)


def test_recursion_shrinks_the_input_and_stops_when_accuracy_stops_improving():
    X, y = three_of_forty()
    sel = RMOTiFS(n_simulations=150, random_state=0).fit(X, y)
    h = sel.history_
    assert h[0]["n_input_features"] == 40
    assert all(e["accepted"] for e in h[:-1]) and not h[-1]["accepted"]
    for prev, nxt in itertools.pairwise(h):
        assert nxt["n_input_features"] == len(prev["subset"])  # next tree's input = best subset
        assert set(nxt["subset"]) <= set(prev["subset"])
    # Section 3.1: go on unless accuracy drops; a tie is taken only with fewer features
    for prev, nxt in itertools.pairwise(h[:-1]):
        assert nxt["accuracy"] > prev["accuracy"] or (
            nxt["accuracy"] == prev["accuracy"] and len(nxt["subset"]) < len(prev["subset"]))
    last, before = h[-1], h[-2]
    assert last["accuracy"] < before["accuracy"] or len(last["subset"]) == len(before["subset"])
    assert sel.accuracy_ == before["accuracy"]
    np.testing.assert_array_equal(sel.selected_features_, before["subset"])


def test_on_tie_stop_is_algorithm_1_strictly_greater():
    X, y = three_of_forty()
    for seed in range(3):
        h = RMOTiFS(n_simulations=150, on_tie="stop", random_state=seed).fit(X, y).history_
        accs = [e["accuracy"] for e in h]
        assert all(b > a for a, b in itertools.pairwise(accs[:-1]))
        assert accs[-1] <= accs[-2]


def test_without_recursion_is_one_tree_motifs():
    X, y = three_of_forty()
    motifs = RMOTiFS(n_simulations=150, recursive=False, random_state=0).fit(X, y)
    rmotifs = RMOTiFS(n_simulations=150, random_state=0).fit(X, y)
    assert len(motifs.history_) == 1
    # the first tree is the same search, so R-MOTiFS starts from MOTiFS's answer
    np.testing.assert_array_equal(motifs.history_[0]["subset"], rmotifs.history_[0]["subset"])
    assert len(rmotifs.selected_features_) < len(motifs.selected_features_)


def test_same_random_state_same_selection_and_history():
    X, y = three_of_forty(seed=4, n=150)
    a = RMOTiFS(n_simulations=60, random_state=7).fit(X, y)
    b = RMOTiFS(n_simulations=60, random_state=7).fit(X, y)
    np.testing.assert_array_equal(a.selected_features_, b.selected_features_)
    assert [(e["accuracy"], e["subset"].tolist()) for e in a.history_] == \
           [(e["accuracy"], e["subset"].tolist()) for e in b.history_]
    c = RMOTiFS(n_simulations=60, random_state=8).fit(X, y)
    assert [e["subset"].tolist() for e in c.history_] != [e["subset"].tolist() for e in a.history_]


# -- fast k-NN reward ---------------------------------------------------------------------------
def _sklearn_loo(X, y, mask, k=5):
    return cross_val_score(KNeighborsClassifier(k), X[:, mask], y, cv=LeaveOneOut()).mean()


@pytest.mark.parametrize("n_classes", [2, 3])
def test_fast_knn_reward_equals_sklearn_leave_one_out(n_classes):
    rng = np.random.default_rng(n_classes)
    X = rng.normal(size=(40, 7))
    y = np.digitize(X[:, 0] + X[:, 1] + rng.normal(scale=0.7, size=40),
                    np.quantile(X[:, 0], np.linspace(0, 1, n_classes + 1)[1:-1]))
    rewards = [KNNReward(X, y, n_neighbors=5, method=m) for m in ("auto", "direct", "gram")]
    for mask in ([1, 1, 0, 0, 0, 0, 0], [0, 1, 1, 0, 1, 1, 0], [1, 1, 1, 1, 1, 1, 1]):
        mask = np.array(mask, dtype=bool)  # 2, 4 and 7 columns: "auto" takes both paths
        expected = _sklearn_loo(X, y, mask)
        for reward in rewards:
            assert reward(mask) == pytest.approx(expected, abs=1e-12)


def test_knn_reward_on_query_rows_is_leave_one_out_restricted_to_them():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 5))
    y = (X[:, 0] - X[:, 2] > 0).astype(int)
    queries = np.array([0, 4, 9, 20, 33, 49])
    mask = np.array([True, False, True, True, False])
    hits = []
    for i in queries:
        rest = np.delete(np.arange(50), i)
        knn = KNeighborsClassifier(5).fit(X[rest][:, mask], y[rest])
        hits.append(knn.predict(X[i:i + 1, mask])[0] == y[i])
    for method in ("direct", "gram"):
        assert KNNReward(X, y, queries=queries, method=method)(mask) == pytest.approx(np.mean(hits))


@pytest.mark.parametrize("validation", ["kfold:4", "kfold:3x2", "holdout:0.25"])
def test_kfold_and_holdout_rewards_equal_sklearn_on_the_same_partition(validation):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(90, 6))
    y = (X[:, 0] + 0.5 * X[:, 3] + rng.normal(scale=0.5, size=90) > 0).astype(int)
    mask = np.array([True, False, False, True, True, False])
    reward = KNNReward(X, y, validation=validation, random_state=0)
    scores = []
    for groups, queries in reward._splits:
        hits = 0
        for g in np.unique(groups[queries]):  # each validated group against the other rows
            val = queries[groups[queries] == g]
            train = np.flatnonzero(groups != g)
            knn = KNeighborsClassifier(5).fit(X[train][:, mask], y[train])
            hits += int((knn.predict(X[val][:, mask]) == y[val]).sum())
        scores.append(hits / len(queries))
    assert reward(mask) == pytest.approx(np.mean(scores), abs=1e-12)
    kind, _, arg = validation.partition(":")
    if kind == "kfold":  # stratified folds of equal size (+- 1), one partition per repetition
        k, _, r = arg.partition("x")
        assert len(reward._splits) == int(r or 1)
        for groups, _ in reward._splits:
            assert set(groups) == set(range(int(k)))
            assert np.ptp(np.bincount(groups)) <= 1 + len(np.unique(y))
    else:  # a quarter of each class is validated against the rest
        (groups, queries), = reward._splits
        assert len(queries) == pytest.approx(0.25 * 90, abs=2)


def test_knn_reward_distance_ties_go_to_the_lower_row():
    X = np.array([[0.0], [1.0], [1.0], [1.0], [1.0], [5.0]])
    y = np.array([0, 1, 1, 0, 0, 0])
    # row 0's neighbours at k = 2: rows 1..4 tie at distance 1; the lower rows 1 and 2 vote 1
    for method in ("direct", "gram"):
        reward = KNNReward(X, y, n_neighbors=2, queries=[0], method=method)
        assert reward(np.array([True])) == 0.0


def test_knn_reward_shared_distance_ties_split_the_last_places():
    X = np.array([[0.0], [1.0], [1.0], [1.0], [1.0], [5.0]])
    y = np.array([0, 1, 1, 0, 0, 0])
    # row 0 at k = 2: rows 1..4 tie for both places and vote 1, 1, 0, 0 with 1/2 each: a vote
    # tie (1 against 1) goes to the smallest class, 0: a hit; with 3 rows of class 1 it is a miss
    y_more = np.array([0, 1, 1, 1, 0, 0])
    for method in ("direct", "gram"):
        assert KNNReward(X, y, n_neighbors=2, queries=[0], method=method,
                         distance_ties="share")(np.array([True])) == 1.0
        assert KNNReward(X, y_more, n_neighbors=2, queries=[0], method=method,
                         distance_ties="share")(np.array([True])) == 0.0


def _shared_ties_loo(X, y, mask, k):
    """Leave-one-out k-NN where the rows tied at the k-th distance share the last places."""
    d = ((X[:, None, mask] - X[None, :, mask]) ** 2).sum(axis=2)
    classes = np.unique(y)
    hits = 0
    for i in range(len(X)):
        others = np.delete(np.arange(len(X)), i)
        dist = d[i, others]
        kth = np.sort(dist)[k - 1]
        near, tied = others[dist < kth], others[dist == kth]
        votes = [len(tied) * (y[near] == c).sum() + (k - len(near)) * (y[tied] == c).sum()
                 for c in classes]  # times len(tied): exact integers
        hits += classes[np.argmax(votes)] == y[i]
    return hits / len(X)


def test_shared_distance_ties_do_not_depend_on_row_order_on_integer_data():
    rng = np.random.default_rng(4)
    X = rng.integers(0, 3, size=(70, 6)).astype(float)  # many exact distance ties
    y = (X[:, 0] + X[:, 1] + rng.integers(0, 2, size=70) > 2).astype(int)
    perm = rng.permutation(70)
    for mask in ([1, 1, 0, 0, 0, 0], [1, 0, 1, 1, 1, 1]):
        mask = np.array(mask, dtype=bool)
        expected = _shared_ties_loo(X, y, mask, 5)
        for method in ("direct", "gram"):
            assert KNNReward(X, y, method=method,
                             distance_ties="share")(mask) == pytest.approx(expected)
            assert KNNReward(X[perm], y[perm], method=method,
                             distance_ties="share")(mask) == pytest.approx(expected)


def test_resubstitution_reward_is_the_training_accuracy():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(60, 5))
    y = (X[:, 0] + rng.normal(scale=0.8, size=60) > 0).astype(int)
    mask = np.array([True, True, False, True, False])
    expected = KNeighborsClassifier(5).fit(X[:, mask], y).score(X[:, mask], y)
    for method in ("direct", "gram"):
        assert KNNReward(X, y, validation="resub", method=method)(mask) == pytest.approx(expected)
    assert expected > KNNReward(X, y)(mask)  # every row votes for itself: above leave-one-out


def test_knn_reward_caches_repeated_subsets_and_scores_the_empty_subset_zero():
    X, y = three_of_forty(n=60)
    reward = KNNReward(X, y)
    mask = np.zeros(40, dtype=bool)
    mask[INFORMATIVE] = True
    first = reward(mask)
    assert reward(mask.copy()) == first
    assert (reward.n_evaluations, reward.n_cache_hits) == (1, 1)
    assert reward(np.zeros(40, dtype=bool)) == 0.0


def test_knn_reward_rejects_bad_input():
    X = np.zeros((5, 2))
    with pytest.raises(ValueError):
        KNNReward(X, np.arange(5), n_neighbors=5)
    with pytest.raises(ValueError):
        KNNReward(X, np.arange(4))
    with pytest.raises(ValueError):
        KNNReward(X, np.arange(5), n_neighbors=2, method="kdtree")
    for bad in ("kfold:1", "kfold:6", "holdout:1.5", "bootstrap", "resub:2"):
        with pytest.raises(ValueError):
            KNNReward(X, np.arange(5), n_neighbors=2, validation=bad)
    with pytest.raises(ValueError):
        KNNReward(X, np.arange(5), n_neighbors=2, distance_ties="random")


# -- Algorithm 1 pieces on hand numbers ----------------------------------------------------
def test_uct_eq2_on_hand_numbers():
    # 0.9 + 0.1 * sqrt(2 * ln 10 / 4) = 0.9 + 0.1 * 1.0729830...
    assert uct(0.9, 10, 4, 0.1) == pytest.approx(1.0072983013)
    assert uct(0.5, 1, 1, 0.1) == 0.5  # ln 1 = 0: no exploration bonus
    assert uct(0.7, 100, 25, 1.0) == pytest.approx(0.7 + math.sqrt(2 * math.log(100) / 25))


def test_best_child_uses_the_maximum_reward_and_the_exploration_bonus():
    tree = _Tree(3)
    exclude, include = tree.add_child(0, 0), tree.add_child(0, 1)
    tree.visits[:] = [55, 50, 5]
    tree.reward[:] = [0.85, 0.85, 0.80]
    sel = RMOTiFS(c=0.1)
    rng = np.random.default_rng(0)
    # include: 0.80 + 0.1*sqrt(2 ln 55 / 5) = 0.9266
    #   > exclude: 0.85 + 0.1*sqrt(2 ln 55 / 50) = 0.8900
    assert sel._best_child(tree, 0, rng) == include
    sel.c = 0.01  # 0.8127 < 0.8540: exploitation wins
    assert sel._best_child(tree, 0, rng) == exclude


def test_backup_counts_visits_and_keeps_the_maximum_reward_up_to_the_root():
    tree = _Tree(2)
    a = tree.add_child(0, 1)
    b = tree.add_child(a, 0)
    RMOTiFS._backup(tree, b, 0.7)
    RMOTiFS._backup(tree, b, 0.6)
    RMOTiFS._backup(tree, a, 0.9)
    assert tree.visits == [3, 3, 2]
    assert tree.reward == [0.9, 0.9, 0.7]
    assert tree.level == [0, 1, 2]


def test_tree_policy_expands_one_untried_child_then_descends_by_best_child():
    tree = _Tree(2)
    sel = RMOTiFS()
    rng = np.random.default_rng(0)
    node, decisions = sel._tree_policy(tree, rng)  # root has two untried actions: EXPAND
    assert tree.parent[node] == 0 and len(decisions) == 1 and len(tree.parent) == 2
    RMOTiFS._backup(tree, node, 0.5)
    node2, decisions2 = sel._tree_policy(tree, rng)  # the other action of the root
    assert tree.parent[node2] == 0 and decisions2 != decisions
    RMOTiFS._backup(tree, node2, 0.4)
    node3, decisions3 = sel._tree_policy(tree, rng)  # root full: BESTCHILD, then EXPAND below
    assert tree.level[node3] == 2 and tree.parent[tree.parent[node3]] == 0
    assert decisions3[0] == decisions[0]  # the child with max reward 0.5 (bonuses are equal)


# -- progress, cancellation, API -----------------------------------------------------------
def test_progress_is_monotone_and_ends_at_one():
    X, y = three_of_forty(n=120)
    seen = []
    RMOTiFS(n_simulations=40, progress=lambda f, m: seen.append((f, m)), random_state=0).fit(X, y)
    fractions = [f for f, _ in seen]
    assert fractions[-1] == 1.0 and fractions[0] == 0.0
    assert all(0.0 <= a <= b <= 1.0 for a, b in itertools.pairwise(fractions))
    assert all(isinstance(m, str) and m for _, m in seen)


def test_raising_from_progress_cancels_fit():
    class Cancelled(Exception):
        pass

    calls = []

    def progress(fraction, message):
        calls.append(fraction)
        if len(calls) == 3:
            raise Cancelled

    X, y = three_of_forty(n=120)
    sel = RMOTiFS(n_simulations=200, progress=progress, random_state=0)
    with pytest.raises(Cancelled):
        sel.fit(X, y)
    assert len(calls) == 3
    with pytest.raises(NotFittedError):
        sel.transform(X)


def test_sklearn_api_transform_clone_and_feature_names():
    X, y = three_of_forty(n=150)
    frame = pd.DataFrame(X, columns=[f"c{i}" for i in range(40)])
    sel = RMOTiFS(n_simulations=80, random_state=0).fit(frame, y)
    np.testing.assert_array_equal(sel.transform(frame), X[:, sel.selected_features_])
    np.testing.assert_array_equal(sel.get_support(indices=True), sel.selected_features_)
    assert list(sel.get_feature_names_out()) == [f"c{i}" for i in sel.selected_features_]
    assert clone(sel).get_params() == sel.get_params()
    with pytest.raises(ValueError):
        sel.transform(frame.iloc[:, :10])


def test_state_round_trip():
    X, y = three_of_forty(n=150)
    frame = pd.DataFrame(X).add_prefix("c")
    sel = RMOTiFS(n_simulations=80, random_state=0).fit(frame, y)
    state = sel.to_state()
    assert state["format"] == "grove.r_motifs" and state["version"] == 1

    def leaves(d):
        for v in d.values():
            yield from leaves(v) if isinstance(v, dict) else [v]

    assert all(
        isinstance(v, (np.ndarray, int, float, str, bool, type(None))) for v in leaves(state)
    )
    back = RMOTiFS.from_state(state)
    np.testing.assert_array_equal(back.transform(frame), sel.transform(frame))
    assert back.accuracy_ == sel.accuracy_ and back.fsr_ == sel.fsr_
    assert list(back.get_feature_names_out()) == list(sel.get_feature_names_out())
    assert [(e["accuracy"], e["subset"].tolist(), e["accepted"]) for e in back.history_] == \
           [(e["accuracy"], e["subset"].tolist(), e["accepted"]) for e in sel.history_]
    with pytest.raises(ValueError):
        RMOTiFS.from_state({**state, "version": 99})


def test_max_validation_samples_bounds_the_reward_rows():
    X, y = three_of_forty(n=300)
    sel = RMOTiFS(n_simulations=100, max_validation_samples=100, random_state=0).fit(X, y)
    assert set(INFORMATIVE) <= set(sel.selected_features_.tolist())
    assert sel.all_features_accuracy_ * 100 == pytest.approx(
        round(sel.all_features_accuracy_ * 100)
    )


@pytest.mark.parametrize("params", [{"n_simulations": 0}, {"c": 0.0}, {"scaling": "robust"},
                                    {"max_recursions": 0}, {"progress": "yes"}, {"on_tie": "maybe"},
                                    {"distance_ties": "random"}])
def test_bad_parameters_raise(params):
    X, y = three_of_forty(n=40)
    with pytest.raises(ValueError):
        RMOTiFS(**params).fit(X, y)
