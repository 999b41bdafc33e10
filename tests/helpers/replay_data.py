"""Small synthetic data files for the `grove replay` tests (real layouts, made-up values)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd


def click_rate(section: np.ndarray, item: np.ndarray) -> np.ndarray:
    """Ground truth of the synthetic logs: item ``section % n`` is the good one."""
    return np.where(item == section, 0.6, 0.1)


def write_obd(path: Path, n: int = 400, n_items: int = 4, seed: int = 0,
              propensity: np.ndarray | None = None) -> pd.DataFrame:
    """Logs in the Open Bandit Dataset's CSV layout (obp's obd/random/all/all.csv): an unnamed
    index column, timestamp, item_id, position, click, propensity_score, user_feature_0..3
    (hashed strings), user-item_affinity_0..n_items-1; uniform random logging policy."""
    rng = np.random.default_rng(seed)
    section = rng.integers(n_items, size=n)
    item = rng.integers(n_items, size=n)
    click = (rng.random(n) < click_rate(section, item)).astype(int)
    frame = pd.DataFrame({
        "timestamp": pd.date_range("2019-11-24", periods=n, freq="s").astype(str),
        "item_id": item,
        "position": rng.integers(1, 4, size=n),
        "click": click,
        "propensity_score": np.full(n, 1.0 / n_items) if propensity is None else propensity,
    })
    hashes = ["81ce123cbb5bd8ce818f60fb3586bba5", "cef3390ed299c09874189c387777674a",
              "2d03db5543b14483e52d761760686b64", "03a5648a76832f83c859d46bc06cb64a"]
    frame["user_feature_0"] = [hashes[s] for s in section]
    for j in (1, 2, 3):
        frame[f"user_feature_{j}"] = [hashes[k] for k in rng.integers(4, size=n)]
    for j in range(n_items):
        frame[f"user-item_affinity_{j}"] = rng.random(n).round(3)
    frame.to_csv(path)  # obp's files keep pandas' index as a first, unnamed column
    return frame


def write_plain(path: Path, n: int = 300, seed: int = 1) -> pd.DataFrame:
    """Plain layout: context columns, action, reward, probability (uniform over 3 actions)."""
    rng = np.random.default_rng(seed)
    section = rng.integers(3, size=n)
    action = rng.integers(3, size=n)
    frame = pd.DataFrame({
        "section": [f"s{s}" for s in section],
        "hour": rng.integers(24, size=n),
        "action": [f"ad{a}" for a in action],
        "reward": (rng.random(n) < click_rate(section, action)).astype(float),
        "probability": np.full(n, 1 / 3),
    })
    frame.to_csv(path, index=False)
    return frame


def write_labeled(path: Path, n: int = 300, seed: int = 2) -> pd.DataFrame:
    """A labeled CSV (numeric, binary and categorical columns; label = class)."""
    rng = np.random.default_rng(seed)
    x = rng.random(n)
    flag = rng.integers(2, size=n)
    color = rng.choice(["red", "green", "blue"], size=n)
    label = np.where(flag == 1, "A", np.where(x > 0.5, "B", "C"))
    frame = pd.DataFrame({"x": x.round(4), "flag": flag, "color": color, "class": label})
    frame.to_csv(path, index=False)
    return frame


def write_flag_labeled(path: Path, n: int = 300, seed: int = 3) -> pd.DataFrame:
    """A labeled CSV a small forest learns fast: the label is "A" when ``flag`` is 1, else "B"."""
    rng = np.random.default_rng(seed)
    flag = rng.integers(2, size=n)
    frame = pd.DataFrame({"flag": flag, "x": rng.random(n).round(3),
                          "class": np.where(flag == 1, "A", "B")})
    frame.to_csv(path, index=False)
    return frame
