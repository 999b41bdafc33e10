"""The online recoding of sec. 5: equal-frequency bins, disjunctive categories, binary numbers."""

import numpy as np
import pytest

from online import ContextEncoder


def test_numeric_feature_gets_five_equal_frequency_bins():
    enc = ContextEncoder(warmup=1000)
    rng = np.random.default_rng(0)
    values = rng.exponential(size=1000)
    for v in values:
        enc.learn_one({"x": float(v)})
    assert len(enc.variable_names) == 5
    counts = np.sum([enc.encode({"x": float(v)}) for v in values], axis=0)
    assert counts.sum() == 1000  # exactly one bin set per value
    assert np.all(np.abs(counts - 200) <= 1)  # equal frequencies on the values it learned from


def test_zero_one_numbers_are_one_binary_variable_and_bools_too():
    enc = ContextEncoder(warmup=3)
    for x in [{"clicked": 0, "vip": True}, {"clicked": 1, "vip": False}, {"clicked": 1}]:
        enc.learn_one(x)
    assert enc.variable_names == ["vip", "clicked"]
    assert enc.encode({"clicked": 1, "vip": False}).tolist() == [0, 1]
    assert enc.encode({"clicked": 0.0, "vip": True}).tolist() == [1, 0]


def test_categories_are_disjunctive_and_unseen_ones_set_nothing():
    enc = ContextEncoder()
    for site in ["a", "b", "a", "c"]:
        enc.learn_one({"site": site})
    assert enc.variable_names == ["site=a", "site=b", "site=c"]
    assert enc.encode({"site": "b"}).tolist() == [0, 1, 0]
    assert enc.encode({"site": "zzz"}).tolist() == [0, 0, 0]
    assert enc.encode({}).tolist() == [0, 0, 0]
    assert enc.n_variables == 3  # encode never extends the coding


def test_pending_numeric_features_have_no_variable_until_frozen():
    enc = ContextEncoder(warmup=10)
    for v in range(5):
        enc.learn_one({"n": float(v)})
    assert enc.n_variables == 0 and enc.encode({"n": 3.0}).tolist() == []
    enc.freeze()
    assert enc.n_variables > 1 and enc.encode({"n": 3.0}).sum() == 1


def test_learn_encode_equals_learn_then_encode():
    a, b = ContextEncoder(warmup=5), ContextEncoder(warmup=5)
    rng = np.random.default_rng(1)
    for _ in range(50):
        x = {"n": float(rng.normal()), "c": str(rng.integers(4)), "b": bool(rng.random() < .5)}
        b.learn_one(x)
        assert a.learn_encode(x).tolist() == b.encode(x).tolist()


def test_a_value_of_the_other_kind_is_missing_and_bad_values_are_errors():
    enc = ContextEncoder(warmup=2)
    enc.learn_one({"site": "a", "n": 1.5})
    enc.learn_one({"site": 2.0, "n": "text"})  # each the other kind: nothing learned
    enc.learn_one({"site": "a", "n": 2.5})  # (the second number: the bins freeze)
    assert enc.variable_names == ["site=a", "n<1.7", "1.7<=n<1.9", "1.9<=n<2.1", "2.1<=n<2.3",
                                  "n>=2.3"]  # from "a", 1.5 and 2.5 only
    other, known = enc.encode_known({"site": True, "n": "text"})
    assert other.tolist() == [0] * 6 and known  # learning it would change nothing
    assert enc.encode({"site": "a", "n": 3.0}).tolist() == [1, 0, 0, 0, 0, 1]
    with pytest.raises(ValueError, match="finite"):
        enc.encode({"n": float("nan")})
    with pytest.raises(TypeError, match="list"):
        enc.learn_one({"n": [1, 2]})


def test_state_round_trip():
    enc = ContextEncoder(warmup=4)
    for x in [{"n": 1.0, "c": "x"}, {"n": 2.0}, {"n": 3.0, "c": "y"}, {"n": 4.0}, {"m": 0.5}]:
        enc.learn_one(x)
    clone = ContextEncoder.from_state(enc.to_state())
    assert clone.variable_names == enc.variable_names
    for x in [{"n": 2.5, "c": "y"}, {"m": 0.1}, {"n": 100.0}]:
        assert clone.encode(x).tolist() == enc.encode(x).tolist()
        clone.learn_one(x)
        enc.learn_one(x)
    assert clone.to_state()["features"]["m"]["seen"].tolist() == [0.5, 0.1]


def test_sparse_bool_contexts_set_exactly_the_keys_they_hold():
    # {name: True} for the features an impression has (the fast path), next to other kinds
    enc = ContextEncoder(n_bins=2, warmup=2)
    for x in [{"b0": True, "b2": True, "site": "a", "n": 0.5}, {"b1": True, "n": 1.5},
              {"b3": False, "site": "b"}]:
        enc.learn_one(x)
    assert enc.variable_names == ["b0", "b2", "site=a", "b1", "n<1", "n>=1", "b3", "site=b"]
    cases = [({"b2": True, "b1": True}, [0, 1, 0, 1, 0, 0, 0, 0]),
             ({"b3": True, "site": "b", "b0": True}, [1, 0, 0, 0, 0, 0, 1, 1]),
             ({"b1": True, "b9": True}, [0, 0, 0, 1, 0, 0, 0, 0]),
             ({"b0": True, "b2": False, "n": 2.0}, [1, 0, 0, 0, 0, 1, 0, 0]),
             ({"n": True, "b1": 1}, [0, 0, 0, 1, 0, 1, 0, 0]),  # True as a number: bin of 1
             ({}, [0] * 8)]
    for x, expected in cases:
        assert enc.encode(x).tolist() == expected, x
    assert not enc.encode_known({"b1": True, "b9": True})[1]  # learn_one would add b9
    assert enc.encode_known({"b1": True, "b0": True})[1]
