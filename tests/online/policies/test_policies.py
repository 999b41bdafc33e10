"""The shared policy rules (online/policies/base.py), the context encoder and the registry."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest

import online
from online.policies import linucb as linucb_module
from online.policies.bandit_forest import BanditForestPolicy
from online.policies.features import FeatureEncoder, column_scales
from online.policies.linucb import LinUCB
from online.policies.registry import POLICY_KINDS, make_policy
from tests.helpers.distribution_rows import assert_rows_are_probabilities
from tests.online.policies.test_trees_policy import _plain

ADS = ["a1", "a2", "a3", "a4", "a5"]


def favorite_stream(n, seed=0):
    """The five-action problem: reward 1 when the action is the context's favorite."""
    rng = random.Random(seed)
    for _ in range(n):
        yield {"favorite": rng.choice(ADS), "device": rng.choice(["mobile", "desktop", "tv"])}


def plain(value):
    """Fails unless the state is numpy arrays plus JSON-able values (no pickle needed)."""
    if isinstance(value, np.ndarray):
        assert value.dtype != object
        return value.tolist()
    if isinstance(value, dict):
        assert all(isinstance(k, str) for k in value)
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    assert value is None or isinstance(value, (bool, int, float, str)), type(value)
    return value


# -- the encoder ---------------------------------------------------------------------------------


def test_encoder_grows_columns_and_ignores_unseen_values():
    enc = FeatureEncoder()
    first = enc.learn_encode({"n": 2, "s": "a", "b": False})
    assert first.tolist() == [2.0, 1.0, 0.0]
    assert enc.learn_encode({"s": "b", "deep": {"x": [1, 2]}}).tolist() == [0, 0, 0, 1, 1, 2]
    assert enc.column_names == ["n", "s=a", "b", "s=b", "deep.x.0", "deep.x.1"]
    vec, known = enc.encode({"s": "c", "zzz": 1, "n": 3})
    assert vec.tolist() == [3, 0, 0, 0, 0, 0] and not known
    vec, known = enc.encode({"s": "a", "n": None})
    assert vec.tolist() == [0, 1, 0, 0, 0, 0] and known
    assert enc.n_columns == 6  # encode never adds


def test_encoder_known_bools_are_one_and_zero():
    enc = FeatureEncoder(categories="code", missing="nan")
    enc.learn_encode({"mobile": True, "new": False, "n": 2})
    vec, known = enc.encode({"mobile": False, "new": True, "n": True})
    assert vec.tolist() == [0.0, 1.0, 1.0] and known
    assert enc.learn_encode({"mobile": True}).tolist()[0] == 1.0


def test_encoder_codes_and_missing_nan_and_round_trip():
    enc = FeatureEncoder(categories="code", missing="nan")
    for x in [{"s": "a", "n": 1.0}, {"s": "b"}, {"s": 7}]:  # 7: s is also a number
        enc.learn_encode(x)
    assert enc.column_kinds == ["code", "number", "number"]
    assert enc.categories_of(0) == ["a", "b"]
    vec = enc.encode({"s": "b"})[0]
    assert vec[0] == 1.0 and math.isnan(vec[1]) and math.isnan(vec[2])
    clone = FeatureEncoder.from_state(json.loads(json.dumps(enc.to_state())))
    x = {"s": "a", "n": 4}
    np.testing.assert_array_equal(clone.encode(x)[0], enc.encode(x)[0])
    assert clone.column_names == enc.column_names


def test_encoder_rejects_non_finite_and_odd_values_naming_the_feature():
    enc = FeatureEncoder()
    enc.learn_encode({"n": 1.0})
    for bad in (math.nan, math.inf, -math.inf):
        with pytest.raises(ValueError, match="'n'"):
            enc.encode({"n": bad})
        with pytest.raises(ValueError, match="'user.age'"):
            enc.learn_encode({"user": {"age": bad}})
    with pytest.raises(TypeError, match="'blob'"):
        enc.learn_encode({"blob": b"xx"})
    # finite, but past what a regression can sum over its events (1e308 squared is inf)
    for bad in (1e308, -1.01e38, 10**39, 10**400):
        with pytest.raises(ValueError, match="'n' is .*(within|too large)"):
            enc.encode({"n": bad})
        with pytest.raises(ValueError, match="'m'"):
            enc.learn_encode({"m": bad})
    assert enc.encode({"n": -1e38})[0].tolist() == [-1e38]


def test_values_at_the_bound_leave_every_regression_finite():
    """A LinUCB app learned 1e308 and every decision after it was a ZeroDivisionError: values
    within the encoder's bound leave each policy's statistics finite."""
    rng = np.random.default_rng(0)
    for kind in ("linucb", "trees", "auto"):
        policy = make_policy(kind, actions=["a", "b"], seed=0)
        for i in range(60):
            x = {"n": float(rng.choice([-1e38, 1e38, 1.0])), "m": float(rng.random())}
            d = policy.decide(x)
            policy.learn_one(x, d.action, float(i % 2), d.probability)
        for x in ({"n": 1e38, "m": 0.5}, {"n": 0.0, "m": 0.5}):
            assert all(math.isfinite(p) for p in policy.probabilities(x).values()), kind


@pytest.mark.parametrize("categories", ["one-hot", "code"])
# (a value past 1e154 overflows the one-step check's squared norm: it is then coded key by key,
# which names it)
@pytest.mark.filterwarnings("ignore:overflow encountered in dot:RuntimeWarning")
def test_encoder_contexts_with_the_plain_keys_code_as_key_by_key(categories):
    """Once contexts of plain numbers have come (the plain keys taken), a context with those keys
    is coded in one step: the same vector as key by key, and the same errors, whatever its
    values."""
    plain_keys = {"a": 1.0, "b": 2, "c": True}
    enc, reference = (FeatureEncoder(categories=categories, missing="nan") for _ in range(2))
    for e in (enc, reference):
        e.learn_encode({**plain_keys, "s": "x"})
    for _ in range(10):
        enc.encode(plain_keys)
    assert enc._plain[0] == ("a", "b", "c")
    reference._plain_misses = -10**9  # never takes plain keys: always key by key
    same_keys = [{"a": 0.5, "b": -3, "c": False}, {"a": np.float32(2.5), "b": np.int64(4),
                                                   "c": np.bool_(True)},
                 {"a": "x", "b": 1, "c": 2}, {"a": None, "b": 1, "c": 2},
                 {"a": 9e37, "b": -9e37, "c": 9e37},  # each within 1e38, not their norm
                 {"a": {"deep": 1}, "b": 1, "c": 2}, {"b": 1, "a": 2, "c": 3}]
    for x in same_keys:
        got, want = enc.encode(x), reference.encode(x)
        np.testing.assert_array_equal(got[0], want[0])
        assert got[1] == want[1], x
    for bad in (math.nan, math.inf, 1e308, -1.5e38, 10**400):
        with pytest.raises(ValueError, match="'b'"):
            enc.encode({"a": 1.0, "b": bad, "c": 0})
    with pytest.raises(TypeError, match="'c'"):
        enc.encode({"a": 1.0, "b": 1.0, "c": b"xx"})
    assert enc.learn_encode({"a": 1.0, "b": 2.0, "c": 1}).tolist()[:3] == [1.0, 2.0, 1.0]
    assert enc.n_columns == reference.n_columns


def test_encoder_max_columns():
    enc = FeatureEncoder(max_columns=2)
    enc.learn_encode({"a": 1, "b": 2, "c": 3})
    assert enc.column_names == ["a", "b"]
    assert enc.encode({"c": 1})[1] is False


@pytest.mark.parametrize("categories", ["one-hot", "code"])
def test_encoder_free_columns_go_to_new_features_and_survive_a_state(categories):
    enc = FeatureEncoder(categories=categories, missing="nan", max_columns=3)
    enc.learn_encode({"a": 1.0, "b": 2.0, "s": "x"})
    enc.free([0, 2, 2])
    assert enc.column_names[1] == "b" and enc.n_free == 2
    vector, known = enc.encode({"a": 1.0, "s": "x"})  # forgotten: unknown, missing
    assert not known and np.array_equal(vector, enc.encode({})[0], equal_nan=True)
    copy = FeatureEncoder.from_state(json.loads(json.dumps(enc.to_state())))
    for e in (enc, copy):
        # codes: a number takes the number column, a category the code column (its learner
        # reads them differently); one-hot: the new features in turn take the free columns
        # (to a linear learner every column is a number); a third new feature is left out
        got = e.learn_encode({"t": "y", "b": 2.0, "c": 5.0, "d": 6.0}).tolist()
        if categories == "code":
            assert got == [5.0, 2.0, 0.0] and e.column_names == ["c", "b", "t=*"]
        else:
            assert got == [1.0, 2.0, 5.0] and e.column_names == ["t=y", "b", "c"]
        assert e.n_free == 0 and e.left_out == 1
    assert copy.to_state() == enc.to_state()
    old = enc.to_state()
    old.update(version=1, columns=[c for c in old["columns"] if c[1] is not None])
    assert FeatureEncoder.from_state(old).n_free == 0  # (a version-1 state: no free columns)


# -- the shared rules, on every hosted kind ----------------------------------------------------


@pytest.fixture(params=sorted(POLICY_KINDS))
def kind(request):
    return request.param


def small(kind, **kw):
    params = {"bandit-forest": {"n_trees": 5, "warmup": 30}}.get(kind, {})
    return make_policy(kind, actions=ADS, seed=3, **params, **kw)


def test_a_policy_shows_its_class_and_parameters(kind):
    policy = small(kind)
    policy.learn_one({"favorite": "a1"}, "a1", 1.0, 0.2)
    text = repr(policy)
    assert text.startswith(type(policy).__name__) and "seed=3" in text


def test_probabilities_is_what_decide_draws_from_without_drawing(kind):
    policy = small(kind)
    twin = small(kind)
    for x in favorite_stream(300):
        d = policy.decide(x)
        twin.probabilities(x)  # must not move the generator
        assert twin.decide(x) == d
        assert policy.probabilities(x) == d.probabilities
        assert d.probability == d.probabilities[d.action]
        assert abs(sum(d.probabilities.values()) - 1.0) < 1e-9
        policy.learn_one(x, d.action, float(d.action == x["favorite"]), d.probability)
        twin.learn_one(x, d.action, float(d.action == x["favorite"]), d.probability)


def test_state_round_trip_decides_the_same(kind):
    policy = small(kind)
    for x in favorite_stream(400):
        d = policy.decide(x)
        policy.learn_one(x, d.action, float(d.action == x["favorite"]), d.probability)
    state = policy.to_state()
    plain(state)
    clone = type(policy).from_state(state)
    for x in favorite_stream(200, seed=9):
        assert clone.decide(x) == policy.decide(x)
    assert clone.n_learned == policy.n_learned == 400


def test_a_removed_actions_late_event_is_learned_without_putting_it_back(kind):
    policy = small(kind)
    policy.remove_action("a2")
    policy.learn_one({"favorite": "a2"}, "a2", 1.0, 0.2)  # a reward for a campaign that ended
    assert policy.actions == ["a1", "a3", "a4", "a5"] and policy.n_learned == 1
    policy.learn_one({"favorite": "a6"}, "a6", 1.0, 0.2)  # an action it never had joins
    assert policy.actions == ["a1", "a3", "a4", "a5", "a6"] and policy.n_learned == 2


def test_actions_added_removed_and_excluded(kind):
    policy = small(kind)
    policy.remove_action("a2")
    assert policy.actions == ["a1", "a3", "a4", "a5"]
    with pytest.raises(KeyError):
        policy.remove_action("a2")
    d = policy.decide({"favorite": "a1"}, excluded=["a1", "a3"])
    assert set(d.probabilities) == {"a4", "a5"}
    policy.add_action("a2")
    assert policy.actions == ADS
    d = policy.decide({"favorite": "a1"}, actions=["a1", "new"])
    assert set(d.probabilities) == {"a1", "new"}
    with pytest.raises(ValueError, match="no action"):
        policy.decide({}, actions=["a1"], excluded=["a1"])


def test_bad_feedback_is_a_value_error(kind):
    policy = small(kind)
    with pytest.raises(ValueError):
        policy.learn_one({"x": 1.0}, "a1", math.nan, 0.5)
    with pytest.raises(ValueError):
        policy.learn_one({"x": 1.0}, "a1", 1.0, 0.0)
    with pytest.raises(ValueError, match="'x'"):
        policy.decide({"x": math.inf})


# -- LinUCB --------------------------------------------------------------------------------------


def test_sherman_morrison_matches_the_direct_ridge_solution(monkeypatch):
    """The scores are the paper's eq. (5) over every event of the action, solved directly, with
    each number column divided by its final scale: two columns' scales grew while the policy
    learned, and each growth re-expressed the statistics exactly (the ridge of a grown column
    is lambda, not lambda c^2). ``LARGEST_CODED`` is 4 here, so that the columns stay well
    conditioned enough for a comparison to 1e-9 (past 2^20, as by default, A's entries pass
    1e12 and the two solutions agree to ~1e-7)."""
    monkeypatch.setattr(linucb_module, "LARGEST_CODED", 4.0)
    rng = np.random.default_rng(0)
    policy = LinUCB(ridge=0.5, epsilon=0.0, alpha=0.7)
    events = []
    for _ in range(300):
        values = rng.normal(size=4) * [1.0, 10.0, 1000.0, 0.1]
        x = {f"f{i}": float(v) for i, v in enumerate(values) if rng.random() < 0.9}
        if rng.random() < 0.3:
            x["cat"] = str(rng.integers(3))
        events.append((x, str(rng.integers(3)), float(rng.random()), 1.0))
    policy.learn_many(events[:150])
    for e in events[150:]:
        policy.learn_one(*e)
    enc = policy._encoder
    coded = np.array([np.concatenate(([1.0], enc.encode(x)[0])) for x, _, _, _ in events])
    scale = column_scales(np.abs(coded).max(axis=0), policy._bound)  # (4 / 2: lambda 0.5)
    assert (scale >= 8).sum() == 2 and (scale == 1.0).sum() == len(scale) - 3  # (and one 2)
    for action in ["0", "1", "2"]:
        mine = [a == action for _, a, _, _ in events]
        X = coded[mine] / scale
        y = np.array([r for _, a, r, _ in events if a == action])
        A = 0.5 * np.eye(X.shape[1]) + X.T @ X
        x0 = coded[0] / scale
        expected = x0 @ np.linalg.solve(A, X.T @ y) + 0.7 * math.sqrt(x0 @ np.linalg.solve(A, x0))
        assert policy.scores(events[0][0])[action] == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("ridge", [1.0, 1e-9])
def test_linucb_learns_columns_that_span_the_floats_range(ridge):
    """Values from 5e-324 to 1.8e19 in one column made float64 Sherman-Morrison updates lose
    A's positive definiteness (5 of these 40 streams raised ZeroDivisionError, in learning or
    deciding). Scaled per column, every stream is learned, and every decision is a
    distribution; with a tiny penalty too (lambda 1e-9 broke ``{"t": 0}, {"t": 1e30}, {"t":
    1e30}`` while the bound was 2^20 whatever lambda: it is 2^20 sqrt(lambda) now)."""
    tiny = LinUCB(ridge=1e-9, seed=0)
    for t in (0.0, 1e30, 1e30):
        tiny.learn_one({"t": t}, "a", 1.0, 1.0)
    assert tiny.n_learned == 3
    values = [2.0 ** 64 - 1, -2.0 ** 63, 5e-324, 1.0, 1e30, -1e-300, 0.0, 3.0]
    for seed in range(40):
        rng = random.Random(seed)
        one, many = LinUCB(ridge=ridge, seed=seed), LinUCB(ridge=ridge, seed=seed)
        events = []
        for _ in range(40):
            x = {"v": rng.choice(values), "w": rng.choice(values)}
            d = one.decide(x, actions=["a", "b"])
            assert all(math.isfinite(p) for p in d.probabilities.values())
            events.append((x, d.action, rng.random(), d.probability))
            one.learn_one(*events[-1])
        assert many.learn_many(events) == 40
        assert np.isfinite(one.to_state()["model"]["A_inv"]).all()
        clone = LinUCB.from_state(json.loads(json.dumps(_plain(one.to_state()))))
        for x, *_ in events[:8]:
            if ridge == 1.0:  # (at 1e-9, A's condition amplifies a rescale's last-bit rounding
                # of an action learn_many knows before learn_one does to ~1e-7)
                assert many.scores(x) == pytest.approx(one.scores(x), rel=1e-9, abs=1e-12)
            assert clone.scores(x) == one.scores(x)


@pytest.mark.parametrize("kind", ["trees", "auto"])
def test_policies_learn_numbers_that_span_the_floats_range(kind):
    """Values from 5e-324 to 1e30 in three columns: the trees' linear base raised LinAlgError
    ("Singular matrix") in its refit's solve at event 31 of seed 4 (the column's values made
    its normal matrix singular to float64), and LinUCB (an ``auto`` candidate) a
    ZeroDivisionError. Every decision stays a distribution and every event is learned."""
    values = [2.0 ** 64 - 1, -2.0 ** 63, 5e-324, 1.0, 1e30, -1e-300, 0.0, 3.0, 1.7e9, 1e6]
    for seed in range(8):
        rng = random.Random(seed)
        policy = make_policy(kind, actions=["a", "b", "c"], seed=seed)
        for _ in range(200):
            x = {"v": rng.choice(values), "w": rng.choice(values) * rng.random(),
                 "u": rng.choice(values)}
            d = policy.decide(x)
            assert all(math.isfinite(p) for p in d.probabilities.values())
            policy.learn_one(x, d.action, rng.random(), d.probability)
        assert policy.n_learned == 200


def test_linucb_learn_many_numbers_its_events_across_scale_growths():
    """A batch is learned in runs of one scale each; each run's events keep their numbers in
    the stream (the drift monitor's clock). The runs after the first were numbered from the
    batch's start again: the monitor's state differed from learn_one's."""
    events = [({"v": 1.0}, "a", 0.1, 1.0), ({"v": 2.0}, "a", 0.2, 1.0),
              ({"v": 3e7}, "a", 0.3, 1.0), ({"v": 1.0}, "a", 0.4, 1.0),
              ({"v": 1e12}, "a", 0.5, 1.0), ({"v": 1.0}, "b", 0.6, 1.0)]
    one, many = LinUCB(seed=0), LinUCB(seed=0)
    for e in events:
        one.learn_one(*e)
    many.learn_many(events)
    a, b = one.to_state()["model"], many.to_state()["model"]
    assert a["scale"].tolist() == b["scale"].tolist() == [1.0, 2.0 ** 20]
    for key, value in a["monitor"].items():
        assert np.array_equal(np.asarray(value), np.asarray(b["monitor"][key])), key
    assert np.array_equal(a["A_inv"], b["A_inv"])


def test_linucb_refuses_a_state_with_bad_scales():
    policy = LinUCB(seed=0)
    policy.learn_one({"v": 3e7}, "a", 1.0, 1.0)
    for scale in ([1.0], [1.0, 0.0], [1.0, float("nan")], [1.0, 32.0, 1.0]):
        state = policy.to_state()
        state["model"]["scale"] = np.array(scale)
        with pytest.raises(ValueError, match="scale"):
            LinUCB.from_state(state)


def test_linucb_reads_a_version_1_state_as_scales_of_1():
    """A state written before the scales (version 1) holds statistics of the unscaled columns:
    read with every scale 1, it decides as it did."""
    policy = LinUCB(seed=0)
    for x in favorite_stream(200):
        policy.learn_one({**x, "age": 0.5}, x["favorite"], 1.0, 0.2)
    state = policy.to_state()
    assert state["version"] == 3 and state["model"]["scale"].tolist() == [1.0] * policy._d
    old = {**state, "version": 1, "model": {k: v for k, v in state["model"].items()
                                            if k not in ("scale", "seen")}}
    x = {"favorite": "a2", "age": 0.5}
    assert LinUCB.from_state(old).probabilities(x) == policy.probabilities(x)


def test_learn_many_equals_learn_one():
    events = []
    for x in favorite_stream(500):
        events.append((x, random.Random(len(events)).choice(ADS), 1.0, 0.2))
    one, many = LinUCB(seed=1), LinUCB(seed=1)
    for e in events:
        one.learn_one(*e)
    assert many.learn_many(events) == 500
    np.testing.assert_allclose(many.to_state()["model"]["A_inv"], one.to_state()["model"]["A_inv"])
    assert many.probabilities({"favorite": "a2"}) == one.probabilities({"favorite": "a2"})


@pytest.mark.parametrize("deferred", [False, True])
def test_trees_learn_many_equals_learn_one_across_a_refit_and_a_new_key(deferred):
    """A refit inside a batch reads the coding as the events before it left it: before, the
    batch was coded first, and the refit's linear base got the column of a key that only the
    events after it bring (so learned it from then on, where learn_one ignores it)."""
    params = dict(n_trees=5, refit_min=16, num_leaves=4, min_data_in_leaf=2)
    rng = random.Random(0)
    events = [({"n": rng.random()}, rng.choice("ab"), rng.random(), 0.5) for _ in range(16)]
    events += [({"m": rng.random()}, rng.choice("ab"), rng.random(), 0.5) for _ in range(4)]
    one, many = (make_policy("trees", actions=["a", "b"], seed=0, **params) for _ in range(2))
    if deferred:  # (the service's way: refits between batches, the same either way)
        one.defer_refits(), many.defer_refits()
    for e in events:
        one.learn_one(*e)
    assert many.learn_many(events) == 20
    if deferred:
        for p in (one, many):
            p.finish_refit(p.start_refit()())
    assert one.n_refits == many.n_refits == 1
    for x in ({"n": .3}, {"n": .3, "m": .9}):
        assert many.probabilities(x) == one.probabilities(x)


def test_tuple_action_ids_survive_a_msgpack_round_trip_of_the_state(kind):
    """Action ids are any hashable values; msgpack (and JSON) give tuples back as lists, which
    from_state turned into an unhashable-key TypeError."""
    from service import codec

    actions = [("ad", 1), ("ad", 2)]
    policy = make_policy(kind, actions=actions, seed=3,
                         **({"n_trees": 5, "warmup": 30} if kind == "bandit-forest" else {}))
    for i in range(40):
        policy.learn_one({"n": i % 3}, actions[i % 2], float(i % 3 == i % 2), 0.5)
    restored = type(policy).from_state(codec.decode(codec.encode(policy.to_state())))
    assert restored.actions == actions
    assert restored.probabilities({"n": 1}) == policy.probabilities({"n": 1})


def test_a_reward_past_a_float_s_range_or_a_none_action_is_a_value_error(kind):
    policy = small(kind)
    with pytest.raises(ValueError, match="must be numbers"):
        policy.learn_one({"n": 1.0}, "a", 10**400, 0.5)
    with pytest.raises(ValueError, match="not None"):  # (it was decided, then refused)
        policy.decide({"n": 1.0}, actions=["a", None])


def test_learn_many_learns_the_events_before_a_bad_one():
    policy = LinUCB()
    events = [({"a": 1.0}, "x", 1.0, 1.0), ({"a": 2.0}, "y", 0.0, 1.0),
              ({"a": math.nan}, "x", 1.0, 1.0)]
    with pytest.raises(ValueError, match="'a'"):
        policy.learn_many(events)
    assert policy.n_learned == 2


def test_exploration_rule_bounds():
    policy = LinUCB(epsilon=0.1, seed=0)
    for x in favorite_stream(1000):
        d = policy.decide(x, actions=ADS)
        probs = np.array(list(d.probabilities.values()))
        assert probs.min() >= 0.1 / 5 - 1e-12
        top = probs[probs > 0.1 / 5 + 1e-12]
        assert len(set(top.round(12))) <= 1  # ties share 1 - epsilon evenly
        assert abs(probs.sum() - 1.0) < 1e-12
        policy.learn_one(x, d.action, float(d.action == x["favorite"]), d.probability)


@pytest.mark.parametrize("weighting", ["none", "ips"])
def test_learning_from_a_uniform_log_recovers_the_best_action(weighting):
    rng = random.Random(5)
    log = [(x, rng.choice(ADS)) for x in favorite_stream(3000, seed=2)]
    policy = LinUCB(weighting=weighting, epsilon=0.0, alpha=0.0)
    policy.learn_many((x, a, float(a == x["favorite"]), 0.2) for x, a in log)
    for fav in ADS:
        for device in ["mobile", "desktop", "tv"]:
            assert policy.predict_one({"favorite": fav, "device": device}, actions=ADS) == fav


def test_five_action_problem_learns_within_2000_events():
    policy = make_policy("linucb", actions=ADS, seed=0)
    rewards = []
    for x in favorite_stream(2000, seed=11):
        d = policy.decide(x)
        rewards.append(float(d.action == x["favorite"]))
        policy.learn_one(x, d.action, rewards[-1], d.probability)
    assert np.mean(rewards[1000:]) >= 0.9


@pytest.mark.parametrize("fit_intercept", [True, False])
def test_linucb_distribution_rows_are_the_probabilities_of_each_context(fit_intercept):
    """What an evaluator gets for many rows at once is, number for number, probabilities(x)."""
    policy = LinUCB(epsilon=0.05, fit_intercept=fit_intercept, seed=0)
    for a in ADS:
        policy.add_action(a)
    rng = random.Random(1)
    for x in favorite_stream(400, seed=3):
        x = {**x, "hour": rng.random() * 24}
        d = policy.decide(x)
        policy.learn_one(x, d.action, float(d.action == x["favorite"]), d.probability)
    policy.add_action("a6")  # no data yet
    xs = list(favorite_stream(100, seed=4))
    xs[3] = {"favorite": "never seen", "new key": 1.0, "hour": None}
    xs[7] = {**xs[7], "hour": 30.5}
    assert_rows_are_probabilities(policy, xs, ADS + ["a6"])


def test_bandit_forest_distribution_rows_are_the_probabilities_of_each_context():
    # settings that leave uniform play early (the defaults take thousands of events)
    policy = BanditForestPolicy(n_trees=5, warmup=20, delta=0.5, epsilon=0.8, max_depth=2,
                                seed=0)
    for a in ADS:
        policy.add_action(a)
    for x in favorite_stream(6000, seed=3):
        d = policy.decide(x)
        policy.learn_one(x, d.action, float(d.action == x["favorite"]), d.probability)
    policy.add_action("a6")  # no data yet
    xs = list(favorite_stream(100, seed=4))
    xs[3] = {"favorite": "never seen", "new key": 1.0}
    rows = assert_rows_are_probabilities(policy, xs, ADS + ["a6"])
    assert len({tuple(row) for row in rows.tolist()}) > 1  # the contexts are told apart


def test_river_pull_update_and_int_actions():
    policy = LinUCB(seed=0)
    for t in range(300):
        x = {"v": float(t % 2)}
        arm = policy.pull([0, 1], x)
        policy.update(arm, x, float(arm == t % 2))
    assert policy.pull([0, 1], {"v": 1.0}) == 1
    assert policy.pull([0, 1], {"v": 0.0}) == 0


# -- the registry --------------------------------------------------------------------------------


def test_registry_builds_every_kind_and_checks_names():
    assert online.DEFAULT_POLICY_KIND in online.POLICY_KINDS
    for name in online.POLICY_KINDS:
        policy = online.make_policy(name, actions=["x", "y"], seed=1)
        assert policy.actions == ["x", "y"]
        assert callable(policy.probabilities) and callable(policy.learn_many)
    with pytest.raises(TypeError, match="'alphaa'"):
        online.make_policy("linucb", alphaa=1.0)
    with pytest.raises(ValueError, match="alpha"):
        online.make_policy("linucb", alpha=-1.0)
    with pytest.raises(ValueError, match="known kinds"):
        online.make_policy("lin-ucb")
    assert isinstance(online.make_policy("bandit-forest"), online.BanditForest)


def test_bandit_forest_policy_decides_as_bandit_forest():
    params = {"n_trees": 5, "warmup": 30, "seed": 2}
    hosted, original = BanditForestPolicy(**params), online.BanditForest(**params)
    for x in favorite_stream(500):
        d = hosted.decide(x, actions=ADS)
        assert original.decide(x, actions=ADS) == d
        for p in (hosted, original):
            p.learn_one(x, d.action, float(d.action == x["favorite"]), d.probability)


@pytest.mark.parametrize("bad", [[0.7, 0.7, -0.4], [0.5, 0.6, 0.0], [np.nan, 0.5, 0.5],
                                 [0.5, 0.5]])
def test_a_distribution_that_is_not_one_is_a_runtime_error_not_a_draw(bad):
    """``decide`` checks the subclass's distribution as it draws (one compiled call), as
    ``probabilities`` does: a negative or NaN entry, a sum off 1, or the wrong length."""
    from online.policies.base import Policy

    class Broken(Policy):
        def _distribution(self, x, known):
            return np.array(bad)

    policy = Broken(seed=0)
    for a in ["a", "b", "c"]:
        policy.add_action(a)
    with pytest.raises(RuntimeError, match="not a distribution"):
        policy.decide({"f": 1.0})
    with pytest.raises(RuntimeError, match="not a distribution"):
        policy.probabilities({"f": 1.0})


def test_encoder_forgets_codes_and_gives_them_again_smallest_first():
    enc = FeatureEncoder(categories="code", missing="nan")
    for v in "abcd":
        enc.learn_encode({"s": v})
    assert enc.forget_codes(0, keep=[1], below=3) == 2  # a and c; d (code 3) is not below 3
    assert enc.categories_of(0) == ["b", "d"] and enc.encode({"s": "a"})[1] is False
    assert enc.learn_encode({"s": "x"}).tolist() == [0.0]  # a new value: a's code, the smallest
    assert enc.code_counts()[1].tolist() == [4.0]  # (none past d's given)
    copy = FeatureEncoder.from_state(json.loads(json.dumps(enc.to_state())))
    for e in (enc, copy):  # the free code 2 is kept in the state
        assert [e.encode({"s": v})[0].tolist() for v in "xbd"] == [[0.0], [1.0], [3.0]]
        assert e.encode({"s": "a"})[1] is False
        assert e.learn_encode({"s": "a"}).tolist() == [2.0]  # back: a new value, c's code
        assert e.learn_encode({"s": "e"}).tolist() == [4.0]  # none free: the next
    three = {**enc.to_state(), "version": 3}
    del three["free_codes"]  # (version 3 gave no code twice: its forgotten ones stay unused)
    assert FeatureEncoder.from_state(three).learn_encode({"s": "f"}).tolist() == [5.0]
    old = FeatureEncoder(categories="code", missing="nan")
    old.learn_encode({"s": "x"})
    state = old.to_state()
    state["version"] = 2
    del state["code_numbers"], state["next_codes"]
    assert FeatureEncoder.from_state(state).learn_encode({"s": "y"}).tolist() == [1.0]
    with pytest.raises(ValueError, match="code column"):
        FeatureEncoder().forget_codes(0, [])
