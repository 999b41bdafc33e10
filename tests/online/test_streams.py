"""bench/common/streams.py: the supervised-to-bandit recoding and noise of the Bandit Forest paper,
sec. 5."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from bench.common import streams


def _frame(n=1000, seed=0):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "x": rng.normal(size=n),  # continuous, no ties
            "color": rng.choice(["red", "green", "blue"], size=n),
            "flag": rng.integers(0, 2, size=n),  # numeric 0/1: one binary variable
            "label": rng.choice(["a", "b", "c", "d"], size=n),
        }
    )


def test_continuous_variable_becomes_five_equal_frequency_bins():
    data = streams.recode(_frame(), "label")
    bins = [j for j, name in enumerate(data.feature_names) if name.startswith("x:bin")]
    assert [data.feature_names[j] for j in bins] == [f"x:bin{j}" for j in range(5)]
    block = data.X[:, bins]
    assert (block.sum(axis=1) == 1).all()  # exactly one bin per row
    assert block.sum(axis=0).tolist() == [200] * 5  # equal frequencies
    # bins are ordered by value: every value in bin j is below every value in bin j+1
    x = _frame()["x"].to_numpy()
    codes = block.argmax(axis=1)
    for j in range(4):
        assert x[codes == j].max() < x[codes == j + 1].min()


def test_ties_leave_no_constant_bins():
    frame = pd.DataFrame({"gain": [0] * 90 + list(range(1, 11)), "label": ["a", "b"] * 50})
    data = streams.recode(frame, "label")
    assert data.feature_names == ["gain:bin0", "gain:bin4"]  # zero vs positive
    assert data.X.sum(axis=0).tolist() == [90, 10]


def test_categorical_is_one_hot_and_binary_numeric_stays_one_variable():
    frame = _frame()
    data = streams.recode(frame, "label")
    colors = [j for j, name in enumerate(data.feature_names) if name.startswith("color=")]
    assert [data.feature_names[j] for j in colors] == ["color=blue", "color=green", "color=red"]
    assert (data.X[:, colors].sum(axis=1) == 1).all()
    expected = frame["color"].map({"blue": 0, "green": 1, "red": 2}).to_numpy()
    assert (data.X[:, colors].argmax(axis=1) == expected).all()
    flag = data.feature_names.index("flag")
    assert (data.X[:, flag] == frame["flag"].to_numpy()).all()
    assert len(data.feature_names) == 5 + 3 + 1  # the target is not a variable
    assert data.actions == ["a", "b", "c", "d"]
    assert [data.actions[i] for i in data.y[:20]] == frame["label"].tolist()[:20]


def test_shuffled_loop_without_noise():
    data = streams.recode(_frame(n=300), "label")
    stream = streams.BanditStream(data, noise=0.0, seed=3, chunk_size=128)
    X, y = map(np.concatenate, zip(*stream.chunks(700)))
    assert X.shape == (700, data.X.shape[1])
    # first loop is a permutation of the rows, and the next loop replays the same order
    rows = {(tuple(r), int(label)) for r, label in zip(data.X.tolist(), data.y)}
    assert {(tuple(r), int(label)) for r, label in zip(X[:300].tolist(), y[:300])} == rows
    assert (X[300:600] == X[:300]).all() and (y[300:600] == y[:300]).all()
    assert not (y[:300] == data.y).all()  # shuffled


def test_each_binary_variable_flips_with_probability_005():
    data = streams.recode(_frame(n=2000), "label")
    clean = streams.BanditStream(data, noise=0.0, seed=5, chunk_size=1000)
    noisy = streams.BanditStream(data, noise=0.05, seed=5, chunk_size=1000)
    X0, y0 = map(np.concatenate, zip(*clean.chunks(20_000)))
    X1, y1 = map(np.concatenate, zip(*noisy.chunks(20_000)))
    assert (y0 == y1).all()  # noise touches contexts only
    flips = X0 != X1
    assert flips.mean() == pytest.approx(0.05, abs=0.002)  # 180k Bernoulli(0.05) draws
    per_variable = flips.mean(axis=0)
    assert per_variable.min() > 0.04 and per_variable.max() < 0.06
    assert set(np.unique(X1)) <= {0, 1}


def test_same_seed_same_stream_and_prefix():
    data = streams.synthetic(n_rows=500, n_features=20, seed=1)
    a = list(streams.BanditStream(data, seed=7, chunk_size=64).steps(150))
    b = list(streams.BanditStream(data, seed=7, chunk_size=64).steps(100))
    assert [(x, label) for x, _, label in a[:100]] == [(x, label) for x, _, label in b]
    x, row, label = a[0]
    assert list(x) == data.feature_names and list(x.values()) == row.tolist()
    c = list(streams.BanditStream(data, seed=8, chunk_size=64).steps(100))
    assert [x for x, _, _ in c] != [x for x, _, _ in b]


def test_reward_is_one_when_action_equals_label():
    assert streams.reward(3, 3) == 1.0
    assert streams.reward(2, 3) == 0.0


@pytest.mark.parametrize(
    "name, n_actions, n_rows", [("adult", 14, 45222), ("letter", 26, 20000), ("shuttle", 7, 58000)]
)
def test_paper_data_sets(name, n_actions, n_rows):
    file = streams.DATA_DIR / streams.DATASETS[name][0]
    if not file.exists():
        pytest.skip(f"{file} not available")
    data = streams.load(name)
    assert len(data.actions) == n_actions and data.X.shape[0] == n_rows
    assert data.X.dtype == np.uint8 and set(np.unique(data.X)) == {0, 1}
    assert not any("?" in n for n in data.feature_names)
    if name == "adult":
        assert "Prof-specialty" in data.actions and "?" not in data.actions
        assert not any(n.startswith(("occupation", "split")) for n in data.feature_names)
        assert "income=>50K" in data.feature_names
