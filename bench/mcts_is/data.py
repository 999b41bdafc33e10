"""Categorical versions of the Table 1 data sets for the MCTS-IS benches (bench helper)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.common.paths import DATA as SHARED_DATA

# the shared data sets: ../shared/data or $GROVE_BENCH_DATA (bench/common/paths.py)
DATA = str(SHARED_DATA)
NAMES = ("adult", "kr_vs_kp", "splice", "tic_tac_toe")


def load(name: str, bins: int = 10) -> tuple[pd.DataFrame, np.ndarray]:
    """Features as strings, y in {0, 1}. Adult's numeric columns keep their values as categories
    (ages, hours, capital gains ...) except ``fnlwgt``, cut into ``bins`` quantile bins.

    adult: income >50K; kr_vs_kp: class == won; splice: a junction (EI or IE) vs N, p1..p60;
    tic_tac_toe: class == positive.
    """
    df = pd.read_csv(f"{DATA}/{name}.csv.gz")
    if name == "adult":
        y = (df.pop("income") == ">50K").to_numpy(int)
        df = df.drop(columns=["split"])
        df["fnlwgt"] = pd.qcut(df["fnlwgt"], bins, duplicates="drop").astype(str)
    elif name == "kr_vs_kp":
        y = (df.pop("class") == "won").to_numpy(int)
    elif name == "splice":
        y = (df.pop("class") != "N").to_numpy(int)
        df = df.drop(columns=["instance_name"])
    elif name == "tic_tac_toe":
        y = (df.pop("class") == "positive").to_numpy(int)
    else:
        raise ValueError(name)
    X = df.astype(str).fillna("?")
    return X.reset_index(drop=True), y


def split(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """8:1:1 train / validation / test indices."""
    perm = np.random.default_rng(seed).permutation(n)
    a, b = int(0.8 * n), int(0.9 * n)
    return perm[:a], perm[a:b], perm[b:]
