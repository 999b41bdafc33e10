"""MEPSI (Algorithm 1 with ESM of Definition 3.3) and the baseline pruning methods."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier

from online import MEPSI
from online.pruning import (
    METHODS,
    boosting_based,
    kappa_pruning,
    random_k,
    reduce_error,
)
from online.pruning.mepsi import esm
from online.pruning.ted import ted, ted_matrix
from online.pruning.trees import (
    Tree,
    forest_oob_predictions,
    forest_predictions,
    from_sklearn_forest,
)
from online.pruning.voting import encode, vote_accuracy, vote_error, votes


def T(feature, children):
    return Tree.from_children(feature, children)


def _random_tree(rng, n, n_features=4):
    parent = [-1] + [int(rng.integers(0, v)) for v in range(1, n)]
    kids = [[] for _ in range(n)]
    for v in range(1, n):
        kids[parent[v]].append(v)
    return T(rng.integers(0, n_features, n), kids)


def test_esm_of_a_tree_with_itself_is_its_node_count():
    rng = np.random.default_rng(0)
    for n in (1, 3, 6, 10):
        h = _random_tree(rng, n)
        assert esm(h, [h]) == h.n_nodes
        others = [_random_tree(rng, int(rng.integers(1, 8))) for _ in range(4)]
        assert esm(h, others + [h]) == h.n_nodes  # min over G picks h itself
        assert esm(h, others) == h.n_nodes - min(ted(g, h) for g in others)
    with pytest.raises(ValueError):
        esm(h, [])


def _ensemble(seed=0, n_good=4, n_bad=12, m=120):
    """Duplicated accurate trees (same structure, same predictions) and noisy varied ones."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, m)
    good_pred = np.where(rng.random(m) < 0.9, y, (y + 1) % 3)
    good = T([0, 1, 2, 3, 1], [[1, 2], [3], [4], [], []])
    trees, preds, is_good = [], [], []
    for _ in range(n_good):
        trees.append(good)
        preds.append(good_pred)
        is_good.append(True)
    for _ in range(n_bad):
        trees.append(_random_tree(rng, int(rng.integers(2, 7)), n_features=8))
        preds.append(np.where(rng.random(m) < 0.4, y, rng.integers(0, 3, m)))
        is_good.append(False)
    perm = rng.permutation(len(trees))
    return [trees[i] for i in perm], np.array(preds)[perm], y, np.array(is_good)[perm]


def test_selects_the_duplicated_good_trees_and_decreases_the_objective():
    trees, P, y, is_good = _ensemble()
    m = MEPSI(k=4, C=0.75, random_state=0).fit(trees, P, y)
    assert sorted(m.selected_.tolist()) == sorted(np.flatnonzero(is_good).tolist())
    assert len(m.objective_history_) == 3 == len(m.step_objectives_) == len(m.errors_)
    # every addition keeps the error and adds ESM = NC > 0: the surrogate objective decreases
    assert np.all(np.diff(m.objective_history_) < 0)
    assert m.errors_[-1] == pytest.approx(vote_error(*_codes(P, y), m.selected_))
    assert m.lambda_ == pytest.approx(0.75 / abs(m.esm_avg_))


def _codes(P, y):
    codes, classes = encode(P, y)
    y_codes = y if codes.ndim == 3 else np.searchsorted(classes, y)
    return codes, y_codes, len(classes)


def _algorithm_1(trees, P, y, k, lam):
    """Algorithm 1 written line by line with the scalar helpers (slow, for small T)."""
    codes, y_codes, K = _codes(P, y)
    nc = [t.n_nodes for t in trees]
    Tn = len(trees)
    S, min_obj, history = None, np.inf, []
    for i in range(Tn - 1):  # lines 3-12
        for j in range(i + 1, Tn):
            error = vote_error(codes, y_codes, K, [i, j])
            comp = nc[i] + nc[j] - ted(trees[i], trees[j])
            if error - lam * comp < min_obj:
                S, min_obj = [i, j], error - lam * comp
    history.append(min_obj)
    while len(S) < k:  # lines 13-25
        A, min_obj = None, np.inf
        for h in range(Tn):
            if h in S:
                continue
            error = vote_error(codes, y_codes, K, S + [h])
            esm_h = nc[h] - min(ted(trees[g], trees[h]) for g in S)
            if error - lam * esm_h < min_obj:
                A, min_obj = h, error - lam * esm_h
        S.append(A)
        history.append(min_obj)
    return S, history


@pytest.mark.parametrize("scores", [None, "dense", "leaves", "oob"])
def test_matches_a_literal_algorithm_1(scores):
    rng = np.random.default_rng(3)
    Tn, m, K = 12, 60, 3
    trees = [_random_tree(rng, int(rng.integers(1, 7))) for _ in range(Tn)]
    y = rng.integers(0, K, m)
    if scores == "dense":  # a different score vector on every sample
        P = rng.dirichlet(np.ones(K), size=(Tn, m))
        P[: Tn // 2, np.arange(m), y] += 0.3
    elif (
        scores == "leaves"
    ):  # a few score vectors per tree, one per leaf, as trees give
        leaves = rng.dirichlet(np.ones(K), size=(Tn, 4))
        P = leaves[np.arange(Tn)[:, None], rng.integers(0, 4, (Tn, m))]
    elif scores == "oob":  # out-of-bag: a tree does not vote on about 60 % of the samples
        leaves = rng.dirichlet(np.ones(K), size=(Tn, 3))
        P = leaves[np.arange(Tn)[:, None], rng.integers(0, 3, (Tn, m))]
        P[rng.random((Tn, m)) < 0.6] = 0.0
    else:
        P = np.where(rng.random((Tn, m)) < 0.6, y, rng.integers(0, K, (Tn, m)))
    for C, esm_avg in [
        (0.75, "subset"),
        (0.05, "term"),
        (0.0, "subset"),
        (5.0, "term"),
    ]:
        model = MEPSI(k=6, C=C, esm_avg=esm_avg, random_state=1).fit(trees, P, y)
        S, history = _algorithm_1(trees, P, y, 6, model.lambda_)
        assert model.selected_.tolist() == S
        assert np.allclose(model.step_objectives_, history)
        # the bounded (lazy) search computes fewer TEDs and reaches the same choices
        lazy = MEPSI(
            k=6, C=C, esm_avg=esm_avg, ted_strategy="lazy", random_state=1
        ).fit(trees, P, y)
        assert lazy.selected_.tolist() == S and lazy.lambda_ == model.lambda_
        assert np.allclose(lazy.step_objectives_, history)
        known = ~np.isnan(lazy.distances_)
        assert np.array_equal(lazy.distances_[known], model.distances_[known])


def test_lazy_strategy_skips_pairs_that_cannot_win():
    rng = np.random.default_rng(5)
    Tn, m = 40, 80
    trees = [
        _random_tree(rng, int(rng.integers(3, 12)), n_features=6) for _ in range(Tn)
    ]
    y = rng.integers(0, 2, m)
    P = np.where(rng.random((Tn, m)) < np.linspace(0.5, 0.95, Tn)[:, None], y, 1 - y)
    full = MEPSI(k=5, C=0.01, n_esm_samples=3, ted_strategy="full", random_state=0).fit(
        trees, P, y
    )
    lazy = MEPSI(k=5, C=0.01, n_esm_samples=3, ted_strategy="lazy", random_state=0).fit(
        trees, P, y
    )
    assert lazy.selected_.tolist() == full.selected_.tolist()
    assert lazy.ted_evaluations_ < full.ted_evaluations_ == Tn * (Tn - 1) // 2
    # a partial matrix from one fit seeds the next (another C): only missing TEDs are computed
    again = MEPSI(k=5, C=0.2, n_esm_samples=3, ted_strategy="lazy", random_state=0)
    again.fit(trees, P, y, distances=lazy.distances_)
    ref = MEPSI(k=5, C=0.2, n_esm_samples=3, random_state=0).fit(
        trees, P, y, distances=full.distances_
    )
    assert again.selected_.tolist() == ref.selected_.tolist()
    assert again.ted_evaluations_ < lazy.ted_evaluations_ + Tn * (Tn - 1) // 2


def test_esm_avg_and_lambda():
    trees, P, y, _ = _ensemble(seed=1)
    D = ted_matrix(trees)
    a = MEPSI(k=5, C=0.5, esm_avg="subset", random_state=2).fit(trees, P, y, distances=D)
    b = MEPSI(k=5, C=0.5, esm_avg="subset", random_state=2).fit(trees, P, y)
    assert a.selected_.tolist() == b.selected_.tolist() and a.esm_avg_ == b.esm_avg_
    term = MEPSI(k=5, C=0.5, esm_avg="term", random_state=2).fit(
        trees, P, y, distances=D
    )
    # the subset reading sums k terms: larger scale, smaller lambda
    assert a.esm_avg_ > term.esm_avg_ > 0 and a.lambda_ < term.lambda_
    zero = MEPSI(k=5, C=0.0, random_state=2).fit(trees, P, y, distances=D)
    assert zero.lambda_ == 0.0


def test_input_validation_and_state():
    trees, P, y, _ = _ensemble()
    with pytest.raises(ValueError):
        MEPSI(k=len(trees) + 1).fit(trees, P, y)
    with pytest.raises(ValueError):
        MEPSI(k=3).fit(trees, P[:, :-1], y)
    with pytest.raises(ValueError):
        MEPSI(k=3).fit(trees, P[:-1], y)
    with pytest.raises(ValueError):
        MEPSI(k=3, esm_avg="nope").fit(trees, P, y)
    with pytest.raises(TypeError):
        MEPSI(k=3).fit([object()] * len(trees), P, y)
    P0 = P.copy()
    m = MEPSI(k=3, random_state=0).fit(trees, P, y)
    assert np.array_equal(P, P0)  # inputs are not mutated
    r = MEPSI.from_state(m.to_state())
    assert r.selected_.tolist() == m.selected_.tolist()
    assert r.objective_history_ == m.objective_history_ and r.lambda_ == m.lambda_
    assert r.k == m.k and r.C == m.C


def test_prunes_a_scikit_learn_forest():
    X, y = load_digits(return_X_y=True)
    Xtr, ytr, Xte, yte = X[:1000], y[:1000], X[1000:], y[1000:]
    rf = RandomForestClassifier(
        n_estimators=40, criterion="entropy", ccp_alpha=0.2, random_state=0
    ).fit(Xtr, ytr)
    trees = from_sklearn_forest(rf)
    for scores in (False, True):
        P = forest_predictions(rf, Xtr, scores=scores)
        target = np.searchsorted(rf.classes_, ytr) if scores else ytr
        m = MEPSI(k=10, C=0.8, random_state=0).fit(trees, P, target)
        assert len(set(m.selected_.tolist())) == 10
    P_te = forest_predictions(rf, Xte, scores=True)
    assert vote_accuracy(P_te, yte, np.arange(40)) == pytest.approx(
        rf.score(Xte, yte), abs=0.01
    )


def test_out_of_bag_votes_and_the_error_over_voting_samples():
    X, y = load_digits(return_X_y=True)
    X, y = X[:400], y[:400]
    rf = RandomForestClassifier(
        n_estimators=30, oob_score=True, random_state=0, max_depth=6
    ).fit(X, y)
    P = forest_oob_predictions(rf, X)
    # the same out-of-bag draws as scikit-learn's own estimate
    avg = P.sum(axis=0)
    assert np.allclose(avg / avg.sum(axis=1, keepdims=True), rf.oob_decision_function_)
    in_bag = P.sum(axis=2) == 0
    assert 0.25 < in_bag.mean() < 0.75
    # a sub-ensemble's error counts only the samples one of its trees votes on
    codes, y_codes, K = _codes(P, y)
    wrong = P[0].argmax(axis=1) != y
    assert vote_error(codes, y_codes, K, [0]) == pytest.approx(wrong[~in_bag[0]].mean())
    assert vote_error(np.zeros((1, 3, 2)), np.array([0, 1, 0]), 2, [0]) == 1.0
    # every method runs on out-of-bag votes, and MEPSI's error is the out-of-bag one
    for name, method in METHODS.items():
        s = method(P, y, 5, random_state=0)
        assert len(set(s.tolist())) == 5, name
    m = MEPSI(k=5, C=0.01, random_state=0).fit(from_sklearn_forest(rf), P, y)
    assert m.errors_[-1] == pytest.approx(vote_error(codes, y_codes, K, m.selected_))
    assert m.errors_[-1] < np.mean([vote_error(codes, y_codes, K, [t]) for t in range(30)])


def test_baselines():
    rng = np.random.default_rng(0)
    m = 200
    y = rng.integers(0, 2, m)
    acc = np.linspace(0.55, 0.9, 10)
    P = np.array([np.where(rng.random(m) < a, y, 1 - y) for a in acc])
    errors = (P != y).mean(axis=1)
    # reduce-error and boosting-based both start from the most accurate tree
    assert reduce_error(P, y, 5)[0] == int(np.argmin(errors))
    assert boosting_based(P, y, 5)[0] == int(np.argmin(errors))
    for name, method in METHODS.items():
        s = method(P, y, 6, random_state=0)
        assert len(s) == 6 and len(set(s.tolist())) == 6, name
    # reduce-error: each addition is the best next vote
    codes, y_codes, K = _codes(P, y)
    s = reduce_error(P, y, 4).tolist()
    for t in range(1, 4):
        rest = [h for h in range(10) if h not in s[:t]]
        best = min(vote_error(codes, y_codes, K, s[:t] + [h]) for h in rest)
        assert vote_error(codes, y_codes, K, s[: t + 1]) == best
    # Kappa: the least-agreeing pair comes first
    twin = np.vstack([P, P[0], 1 - P[0]])
    assert sorted(kappa_pruning(twin, y, 2).tolist()) == [0, 11] or sorted(
        kappa_pruning(twin, y, 2).tolist()
    ) == [10, 11]
    assert sorted(random_k(P, y, 10, random_state=1).tolist()) == list(range(10))
    assert votes(codes, K, [0, 1]).sum() == 2 * m


def test_bounded_minimum_computes_only_the_teds_a_minimum_needs():
    from online.pruning.mepsi import _Distances

    rng = np.random.default_rng(8)
    trees = [_random_tree(rng, int(rng.integers(2, 14)), n_features=5) for _ in range(30)]
    D = ted_matrix(trees)
    costs = {"insert": 1.0, "remove": 1.0, "update": 1.0}
    dist = _Distances(trees, costs, "lazy")
    groups = [rng.choice(29, size=int(rng.integers(1, 12)), replace=False) for _ in range(40)]
    hs = np.full(40, 29)
    assert np.array_equal(dist.exact_min(groups, hs), [D[G, 29].min() for G in groups])
    assert dist.evaluations < len(set(np.concatenate(groups).tolist()))
    # afterwards the bounds' minimum is the exact minimum as well
    assert all(dist.lower[G, 29].min() == D[G, 29].min() for G in groups)


def test_threads_and_the_bounded_search_keep_the_selection(monkeypatch):
    """Unpruned trees, out-of-bag error: the lazy search (bounded pair step, bounded minima in
    ESM_avg and the greedy step) on 1 or 2 threads selects what the full matrix selects."""
    from online.pruning import ted_compiled

    monkeypatch.setattr(ted_compiled, "PARALLEL_MIN_CELLS", 0)  # threads even on small trees
    X, y = load_digits(return_X_y=True)
    rf = RandomForestClassifier(n_estimators=24, max_depth=5, random_state=0)
    rf.fit(X[:300], y[:300])
    trees, P = from_sklearn_forest(rf), forest_oob_predictions(rf, X[:300])
    for esm_avg in ("term", "subset"):
        fits = [
            MEPSI(
                k=6, C=0.75, esm_avg=esm_avg, n_esm_samples=20, ted_strategy=strategy,
                n_jobs=n_jobs, random_state=0,
            ).fit(trees, P, y[:300])
            for strategy, n_jobs in (("full", 1), ("lazy", 1), ("lazy", 2))
        ]
        full, lazy, threads = fits
        for m in (lazy, threads):
            assert m.selected_.tolist() == full.selected_.tolist()
            assert m.step_objectives_ == full.step_objectives_
            assert m.esm_avg_ == full.esm_avg_
        assert lazy.ted_evaluations_ == threads.ted_evaluations_ < full.ted_evaluations_


@pytest.mark.parametrize("costs", [(0.1, 0.2, 0.3), (0.3, 0.7, 0.1), (2.0, 3.0, 0.5)])
def test_bounded_minimum_is_exact_with_fractional_costs(costs):
    """With fractional costs a computed SED bound can exceed the computed TED by a few ulps;
    the bounded minimum must still equal the full scan's to the last bit (found by review:
    26 of 4,000 minima differed before the bounds were lowered for fractional costs)."""
    from online.pruning.mepsi import _Distances

    ins, rem, upd = costs
    costs = {"insert": ins, "remove": rem, "update": upd}
    rng = np.random.default_rng(3)
    trees = [_random_tree(rng, int(rng.integers(2, 14)), n_features=3) for _ in range(40)]
    D = ted_matrix(trees, **costs)
    groups = [rng.choice(39, size=int(rng.integers(1, 15)), replace=False) for _ in range(400)]
    hs = rng.integers(0, 40, 400)
    groups = [G[G != h] if len(G[G != h]) else np.array([(h + 1) % 40]) for G, h in zip(groups, hs)]
    dist = _Distances(trees, costs, "lazy")
    got = dist.exact_min(groups, hs)
    assert np.array_equal(got, [D[G, h].min() for G, h in zip(groups, hs)])
    assert np.all(dist.lower <= D)  # every bound stays below the TED as computed


def test_operation_costs_must_be_finite_and_not_negative():
    rng = np.random.default_rng(0)
    trees = [_random_tree(rng, 5) for _ in range(4)]
    P = np.array([[0, 1, 1], [0, 1, 0], [1, 1, 1], [0, 0, 1]])
    for bad in ({"remove_cost": -1.0}, {"insert_cost": float("nan")}, {"update_cost": np.inf}):
        with pytest.raises(ValueError, match="cost must be a finite number >= 0"):
            MEPSI(k=2, **bad).fit(trees, P, [0, 1, 1])
    with pytest.raises(ValueError, match="remove cost"):
        ted(trees[0], trees[1], remove=-1e9)
    with pytest.raises(ValueError, match="insert cost"):
        ted_matrix(trees, insert=-1)


def test_fast_vote_helpers_equal_their_numpy_definitions():
    """The pair errors' distinct score rows (a verified row hash) and the compiled candidate
    errors give what np.unique(axis=0) and the (T, m, K) numpy vote give."""
    from online.pruning.mepsi import _candidate_errors, _unique_rows
    from online.pruning.voting import covered, covered_error

    rng = np.random.default_rng(9)
    leaves = rng.dirichlet(np.ones(4), size=5)
    leaves[0] = [0.0, 0.5, 0.5, 0.0]  # ties: the lowest class wins (Eq. (1) as numpy's argmax)
    rows = leaves[rng.integers(0, 5, 300)]
    rows[rng.random(300) < 0.4] = 0.0  # out-of-bag rows
    u, inv = _unique_rows(rows)
    ref_u = np.unique(rows, axis=0)
    assert len(u) == len(ref_u) and np.array_equal(np.unique(u, axis=0), ref_u)
    assert np.array_equal(u[inv], rows)
    T, m, K = 9, 200, 4
    scores = leaves[rng.integers(0, 5, (T, m))]
    scores[rng.random((T, m)) < 0.6] = 0.0
    y = rng.integers(0, K, m)
    for total in (scores[:3].sum(axis=0), np.zeros((m, K)), scores[:1].sum(axis=0) - 0.5):
        new = total[None] + scores
        expected = covered_error(new.argmax(axis=2) != y[None, :], covered(new))
        assert np.array_equal(_candidate_errors(scores, y, total), expected)
