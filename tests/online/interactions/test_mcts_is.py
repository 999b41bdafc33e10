"""MCTS-IS (online/interactions): the issue-6 tests."""

from __future__ import annotations

import itertools
import json
import random

import numpy as np
import pandas as pd
import pytest
from river import checks, compose, linear_model

from online import MCTSInteractions
from online.interactions.extraction import extract


def xor_stream(n, seed, noise_fields=("c", "d")):
    rng = random.Random(seed)
    for _ in range(n):
        x = {"a": rng.choice("01"), "b": rng.choice("01")}
        for name in noise_fields:
            x[name] = rng.choice("012")
        yield x, int(x["a"] != x["b"])


def leaves_of(model, root):
    return next(t["leaves"] for t in model.trees() if t["root"] == root)


# -- XOR: the extracted DTs are exactly the interaction ------------------------------------------


def test_xor_interaction_recovered_exactly():
    model = MCTSInteractions(lambda_=0.2, seed=0)
    for x, y in xor_stream(2000, seed=1):
        model.learn_one(x, y)
    expected = {f"a={i} & b={j}" for i in "01" for j in "01"}
    assert set(leaves_of(model, "a")) == expected
    assert set(leaves_of(model, "b")) == {f"b={j} & a={i}" for i in "01" for j in "01"}
    # the noise fields' trees do not go past their (forced) root split
    for root in ("c", "d"):
        assert all(" & " not in leaf for leaf in leaves_of(model, root))
    top = model.interactions(top=4)
    assert {frozenset(t["terms"]) for t in top} == {frozenset({"a", "b"})}
    assert all(
        t["mean"] == (1.0 if t["terms"]["a"] != t["terms"]["b"] else 0.0) for t in top
    )
    for x, y in xor_stream(50, seed=2):
        assert model.predict_one(x) == bool(y)
    x = {"a": "1", "b": "0", "c": "0", "d": "0"}
    explained = model.explain_one(x)
    assert explained["probability"] == model.predict_proba_one(x)[True]
    by_root = {t["root"]: t for t in explained["trees"]}
    assert by_root["a"]["leaf"] == "a=1 & b=0" and by_root["a"]["mean"] > 0.95
    assert sum(t["weight"] for t in explained["trees"]) == pytest.approx(1.0)
    assert by_root["c"]["weight"] < 0.01


# -- pruning by the estimated screening criterion, and the way back (lines 22-26) ----------------


def _feature_node(model, path):
    """Feature node reached from tree ``path[0][0]``'s root by (field, value) steps."""
    fdt, vocab = model._fdt, model._vocab
    tree = int(np.flatnonzero(fdt.root_fields == vocab.field_index[path[0][0]])[0])
    node = int(fdt.roots[tree])
    for field, value in path:
        i = vocab.field_index[field]
        fs, fc = int(fdt.d.fstart[node]), int(fdt.d.fcount[node])
        f = next(k for k in range(fs, fs + fc) if fdt.f.field[k] == i)
        node = int(fdt.f.cstart[f]) + vocab.codes[i][value]
    return node


def _child_feature(model, node, field):
    fdt = model._fdt
    fs, fc = int(fdt.d.fstart[node]), int(fdt.d.fcount[node])
    i = model._vocab.field_index[field]
    return next(k for k in range(fs, fs + fc) if fdt.f.field[k] == i)


def test_pruned_node_not_selected_then_comes_back():
    # c_F = 0: s = mu_hat * P_hat(S) = E_hat[y 1_S]. While y = 0 whenever a = 1, every child of
    # the feature node b below a=1 has s = 0 < lambda: b is excluded from l(a=1).
    model = MCTSInteractions(c_f=0.0, lambda_=0.05, grace_period=1, seed=0)
    rng = random.Random(0)

    def sample(y_when_a1):
        x = {"a": rng.choice("01"), "b": rng.choice("01")}
        return x, (y_when_a1 if x["a"] == "1" else int(x["b"] == "1"))

    for _ in range(400):
        model.learn_one(*sample(0))
    node_a1 = _feature_node(model, [("a", "1")])
    f_b = _child_feature(model, node_a1, "b")
    fdt = model._fdt
    assert fdt.f.nabove[f_b] == 0  # excluded: all children have s <= lambda
    kids = range(int(fdt.f.cstart[f_b]), int(fdt.f.cstart[f_b] + fdt.f.ccount[f_b]))
    assert all(fdt.d.s[k] <= model.lambda_ for k in kids)
    selected_before = fdt.f.V[f_b]
    visits_before = sum(fdt.d.V[k] for k in kids)
    for _ in range(200):
        model.learn_one(*sample(0))
    fdt = model._fdt
    assert fdt.f.V[f_b] == selected_before  # never selected while excluded
    # ... but lines 22-26 kept updating its child data nodes
    kids = range(int(fdt.f.cstart[f_b]), int(fdt.f.cstart[f_b] + fdt.f.ccount[f_b]))
    assert sum(fdt.d.V[k] for k in kids) > visits_before + 50
    # the extracted DT does not split a=1 on b
    assert "a=1" in leaves_of(model, "a")

    # now y = 1 when a = 1: the updates lift s above lambda and b comes back into l(a=1)
    for _ in range(400):
        model.learn_one(*sample(1))
    fdt = model._fdt
    assert fdt.f.nabove[f_b] > 0
    assert fdt.f.V[f_b] > selected_before + 10


# -- eq. (7) against brute force over all DTs of a small FDT ------------------------------------


def _brute_force(fdt, root, min_visits):
    """Every DT of T_hat^P below ``root`` as (loss, {data node: chosen feature node})."""
    d, f = fdt.d, fdt.f

    def p_hat(node):
        return d.V[node] / f.sumV[d.parent[node]]

    def candidates(node):
        if d.fstart[node] < 0:
            return []
        fs = range(int(d.fstart[node]), int(d.fstart[node] + d.fcount[node]))
        return [k for k in fs if f.nabove[k] > 0 and f.V[k] >= min_visits]

    def children(k):
        return list(range(int(f.cstart[k]), int(f.cstart[k] + f.ccount[k])))

    def trees(node, support):
        """All DTs below ``node``: lists of (terminal units' loss sum, choices)."""
        cands = candidates(node)
        if not cands:
            mu = d.B[node] / d.V[node]
            return [(support * mu * (1 - mu), {})]
        out = []
        for k in cands:
            kids = children(k)
            if not any(
                candidates(c) for c in kids
            ):  # leaf parent: sigma_hat (Theorem 5)
                out.append((support * f.sigma[k], {node: k}))
                continue
            for combo in itertools.product(
                *[trees(c, support * p_hat(c)) for c in kids]
            ):
                choice = {node: k}
                for _, ch in combo:
                    choice.update(ch)
                out.append((sum(loss for loss, _ in combo), choice))
        return out

    return trees(root, 1.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_eq7_extraction_equals_brute_force(seed):
    rng = random.Random(seed)
    model = MCTSInteractions(
        grace_period=3, lambda_=0.02, c_f=0.05, max_depth=3, seed=seed
    )
    for _ in range(600):
        x = {"a": rng.choice("012"), "b": rng.choice("01"), "c": rng.choice("01")}
        p = 0.8 if (x["a"] == "1") != (x["c"] == "1") else 0.2
        model.learn_one(x, int(rng.random() < p))
    fdt = model._fdt
    best_f, loss_d, _ = extract(fdt, min_visits=model.grace_period)
    n_dts = 0
    for root in fdt.roots.tolist():
        options = _brute_force(fdt, root, model.grace_period)
        n_dts += len(options)
        losses = np.array([loss for loss, _ in options])
        assert loss_d[root] == pytest.approx(losses.min(), rel=1e-12, abs=1e-15)
        # the extracted DT is one of the minimisers
        extracted = {}
        stack = [root]
        while stack:
            node = stack.pop()
            k = int(best_f[node])
            if k >= 0:
                extracted[node] = k
                stack.extend(
                    range(int(fdt.f.cstart[k]), int(fdt.f.cstart[k] + fdt.f.ccount[k]))
                )
        choice_loss = {frozenset(ch.items()): loss for loss, ch in options}
        assert choice_loss[frozenset(extracted.items())] == pytest.approx(losses.min())
    assert n_dts > len(fdt.roots)  # the FDT really offered a choice


# -- river conventions ----------------------------------------------------------------------------


def test_river_check_estimator():
    # the first of _unit_test_params (grouping, depth limit); the others take too long for CI
    checks.check_estimator(
        MCTSInteractions(**next(MCTSInteractions._unit_test_params()))
    )


def test_river_check_estimator_defaults():
    checks.check_estimator(MCTSInteractions())


def test_pipeline_with_logistic_regression():
    model = MCTSInteractions(lambda_=0.2, seed=0) | linear_model.LogisticRegression()
    assert isinstance(model, compose.Pipeline)
    for x, y in xor_stream(1500, seed=3):
        model.learn_one(x, y)
    hits = [model.predict_one(x) == bool(y) for x, y in xor_stream(200, seed=4)]
    assert np.mean(hits) > 0.95


# -- state ----------------------------------------------------------------------------------------


def _leaves(obj):
    if isinstance(obj, dict):
        for v in obj.values():
            yield from _leaves(v)
    else:
        yield obj


def test_state_round_trip_is_exact():
    model = MCTSInteractions(grace_period=5, groups=None, seed=7)
    stream = list(xor_stream(1500, seed=5))
    for x, y in stream[:1000]:
        model.learn_one(x, y)
    state = model.to_state()
    assert state["format"] == "grove.mcts_is" and state["version"] == 1
    for leaf in _leaves(state):
        assert isinstance(leaf, np.ndarray) or json.loads(json.dumps(leaf)) == leaf
    clone = MCTSInteractions.from_state(state)
    for x, _ in stream[1000:1100]:
        assert clone.predict_proba_one(x) == model.predict_proba_one(x)
        assert clone.transform_one(x) == model.transform_one(x)
    assert clone.interactions() == model.interactions()
    # learning continues identically (random generator included)
    for x, y in stream[1000:]:
        model.learn_one(x, y)
        clone.learn_one(x, y)
    a, b = model.to_state(), clone.to_state()
    for key in ("data_nodes", "feature_nodes"):
        for col, arr in a["fdt"][key].items():
            np.testing.assert_array_equal(arr, b["fdt"][key][col])
    assert a["rng"] == b["rng"]


def test_state_round_trip_with_groups_and_mixed_values():
    model = MCTSInteractions(groups=2, max_categories=4, seed=1)
    rng = random.Random(0)
    for _ in range(300):
        x = {
            "s": rng.choice(["u", "v"]),
            1: rng.choice([0, 1, 2, 3, 4, 5]),
            "f": rng.random(),
        }
        model.learn_one(x, rng.random() < 0.3)
    clone = MCTSInteractions.from_state(model.to_state())
    x = {"s": "u", 1: 3, "f": 0.5}
    assert clone.predict_proba_one(x) == model.predict_proba_one(x)
    assert clone._vocab.fields == model._vocab.fields
    assert clone._vocab.values == model._vocab.values


def test_serving_state_predicts_the_same_and_is_smaller():
    rng = random.Random(0)
    model = MCTSInteractions(grace_period=5, lambda_=0.02, seed=3)
    rows = []
    for _ in range(3000):
        x = {k: rng.choice("0123") for k in "abcdef"}
        y = int((x["a"] in "01") != (x["b"] == "2") or (x["c"] == "3" and rng.random() < 0.5))
        rows.append(x)
        model.learn_one(x, y)
    full, served = model.to_state(), model.to_state(statistics=False)
    assert served["statistics"] is False and full["statistics"] is True
    for leaf in _leaves(served):
        assert isinstance(leaf, np.ndarray) or json.loads(json.dumps(leaf)) == leaf

    def nbytes(state):
        return sum(a.nbytes for a in _leaves(state["fdt"]) if isinstance(a, np.ndarray))

    assert nbytes(served) < 0.5 * nbytes(full)
    clone = MCTSInteractions.from_state(served)
    for x in rows[:200] + [{"a": "9", "b": "0"}, {}]:
        assert clone.explain_one(x) == model.explain_one(x)
        assert clone.transform_one(x) == model.transform_one(x)
    assert clone.interactions() == model.interactions()
    assert clone.interactions(leaves_only=True) == model.interactions(leaves_only=True)
    assert clone.trees() == model.trees()
    again = MCTSInteractions.from_state(clone.to_state())  # stays a serving copy
    assert again.to_state()["statistics"] is False and again.trees() == model.trees()
    with pytest.raises(RuntimeError, match="cannot|not learn"):
        clone.learn_one(rows[0], 1)
    assert (
        clone.to_state()["vocabulary"]["values"].tolist()
        == served["vocabulary"]["values"].tolist()
    )


# -- unseen categories, missing fields ------------------------------------------------------------


def test_unseen_categories_and_fields_at_predict_time():
    model = MCTSInteractions(lambda_=0.2, seed=0)
    for x, y in xor_stream(2000, seed=6):
        model.learn_one(x, y)
    before = model.to_state()
    for x in (
        {"a": "7", "b": "1", "c": "0", "d": "0"},  # unseen value of a split field
        {"a": "0", "b": "new", "c": "9", "d": "9"},
        {"zzz": "1"},  # unseen field only
        {},
    ):
        proba = model.predict_proba_one(x)
        assert set(proba) == {False, True}
        assert 0.0 <= proba[True] <= 1.0 and proba[True] + proba[
            False
        ] == pytest.approx(1.0)
        features = model.transform_one(x)
        assert all(v == 1.0 for v in features.values())
    # a leaf containing the unseen value is never emitted
    assert not any("a=7" in k for k in model.transform_one({"a": "7", "b": "1"}))
    assert "a=0 & b=1" in model.transform_one({"a": "0", "b": "1", "c": "0"})
    # predicting learned nothing
    after = model.to_state()
    np.testing.assert_array_equal(
        before["fdt"]["data_nodes"]["V"], after["fdt"]["data_nodes"]["V"]
    )
    assert (
        before["vocabulary"]["values"].tolist()
        == after["vocabulary"]["values"].tolist()
    )


# -- learn_many ----------------------------------------------------------------------------------


def test_learn_many_of_single_rows_is_learn_one():
    stream = list(xor_stream(400, seed=8))
    one, many = (
        MCTSInteractions(grace_period=3, seed=4),
        MCTSInteractions(grace_period=3, seed=4),
    )
    for x, y in stream:
        one.learn_one(x, y)
        many.learn_many(pd.DataFrame([x]), pd.Series([y]))
    a, b = one.to_state(), many.to_state()
    for key in ("data_nodes", "feature_nodes"):
        for col, arr in a["fdt"][key].items():
            np.testing.assert_array_equal(arr, b["fdt"][key][col])


def test_learn_many_is_learn_one_row_by_row():
    # late categories, a missing value (NaN -> None) and max_categories: K_i grows mid-batch
    rng = random.Random(11)
    rows = []
    for t in range(600):
        x = {
            "a": rng.choice("01"), "b": rng.choice("01"), "c": rng.choice("012345"[: 2 + t // 100])
        }
        x["d"] = None if rng.random() < 0.05 else rng.choice("xyz")
        rows.append((x, int((x["a"] != x["b"]) ^ (x["c"] == "4"))))
    one, many = (MCTSInteractions(grace_period=2, max_categories=5, seed=4) for _ in range(2))
    for x, y in rows:
        one.learn_one(x, y)
    X = pd.DataFrame([x for x, _ in rows])
    y = np.array([t for _, t in rows])
    for start in range(0, len(X), 250):
        many.learn_many(X.iloc[start : start + 250], y[start : start + 250])
    a, b = one.to_state(), many.to_state()
    for key in ("data_nodes", "feature_nodes"):
        for col, arr in a["fdt"][key].items():
            np.testing.assert_array_equal(arr, b["fdt"][key][col])
    assert a["rng"] == b["rng"]


def test_learn_many_batches_find_the_interaction_and_bound_memory():
    rows = list(xor_stream(6000, seed=9))
    X = pd.DataFrame([x for x, _ in rows])
    y = np.array([t for _, t in rows])
    model = MCTSInteractions(lambda_=0.2, max_nodes=5000, seed=0)
    for start in range(0, len(X), 256):
        model.learn_many(X.iloc[start : start + 256], y[start : start + 256])
    assert set(leaves_of(model, "a")) == {f"a={i} & b={j}" for i in "01" for j in "01"}
    assert model._fdt.d.n <= 5000
    p = model.predict_proba_many(X.iloc[:100])[True].to_numpy()
    assert ((p > 0.5) == y[:100].astype(bool)).all()
    T = model.transform_many(X.iloc[:20])
    for k in range(20):
        expected = model.transform_one(X.iloc[k].to_dict())
        assert {c for c in T.columns if T.iloc[k][c] == 1.0} == set(expected)


def test_rejects_non_binary_targets():
    with pytest.raises(ValueError):
        MCTSInteractions().learn_one({"a": "1"}, 2)
