"""MCTS-IS fit time on 1M rows vs LightGBM with the same number of trees (issue 6).

For each data set: sample ``--rows`` rows with replacement, fit LightGBM (one thread, N_T trees =
number of fields, ``--leaves`` max leaves) and MCTS-IS (``learn_many`` in chunks of ``--batch``
rows -- exactly ``learn_one`` row after row -- and ``learn_one`` itself on the first
``--one-rows`` rows), with the model's default parameters (``--max-nodes`` overrides the node
budget; the budget used is printed), and print the CPU times, their ratio, the node count, the
bytes held by the node arrays, and the node bytes of the full and of the serving state
(``to_state(statistics=False)``). A warm-up fit on 200 rows first compiles the kernels (or loads
them from numba's on-disk cache), so the timed fits measure learning, not compilation.

    nice -n 10 python -m bench.mcts_is.speed --rows 1000000
"""

from __future__ import annotations

import argparse
import inspect
import time

import numpy as np
from tqdm import tqdm

from bench.mcts_is.data import NAMES, load
from online import MCTSInteractions


def fit_lightgbm(X, y, n_trees: int, leaves: int) -> tuple[float, float]:
    import lightgbm as lgb

    codes = np.stack([X[c].astype("category").cat.codes.to_numpy() for c in X.columns], axis=1)
    model = lgb.LGBMClassifier(
        n_estimators=n_trees,
        num_leaves=leaves,
        num_threads=1,
        verbose=-1,
        max_cat_to_onehot=64,
    )
    t0, c0 = time.perf_counter(), time.process_time()
    model.fit(codes, y, categorical_feature=list(range(codes.shape[1])))
    return time.perf_counter() - t0, time.process_time() - c0


def state_bytes(state) -> int:
    """Bytes of the numpy arrays of a ``to_state()`` dict (what a snapshot mostly carries)."""
    if isinstance(state, dict):
        return sum(state_bytes(v) for v in state.values())
    return state.nbytes if isinstance(state, np.ndarray) else 0


def fit_mcts(X, y, batch: int, **params) -> tuple[float, float, MCTSInteractions]:
    model = MCTSInteractions(seed=0, **params)
    t0, c0 = time.perf_counter(), time.process_time()
    for start in tqdm(range(0, len(X), batch), desc="MCTS-IS learn_many", leave=False):
        model.learn_many(X.iloc[start : start + batch], y[start : start + batch])
    return time.perf_counter() - t0, time.process_time() - c0, model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--one-rows", type=int, default=2000)
    ap.add_argument("--leaves", type=int, default=100)
    ap.add_argument("--data", nargs="*", default=list(NAMES))
    ap.add_argument(
        "--max-nodes",
        type=int,
        default=None,
        help="node budget (default: the model's own default, what users get)",
    )
    args = ap.parse_args()
    default = inspect.signature(MCTSInteractions).parameters["max_nodes"].default
    if args.max_nodes is None:
        args.max_nodes = default
    print(
        f"rows={args.rows} batch={args.batch} leaves={args.leaves} max_nodes={args.max_nodes}"
        + (" (the model's default)" if args.max_nodes == default else " (not the default)")
    )
    print(
        "times in s, wall / CPU (the machine is shared: CPU time is the comparable figure)\n"
        "data          N_T  lgbm_wall lgbm_cpu  mcts_wall mcts_cpu  cpu_ratio  learn_one_us  "
        "data_nodes feature_nodes node_MB model_MB state_MB serving_MB"
    )
    # numba compiles the kernels on a machine's first run and caches them on disk: a one-off
    # cost of the installation (~10 s here), not of a fit, so it is paid (and printed) here
    X, y = load(args.data[0])
    c0 = time.process_time()
    MCTSInteractions(seed=0).learn_many(X.iloc[:200], y[:200])
    print(
        f"warm-up (kernels compiled or loaded from numba's cache): "
        f"{time.process_time() - c0:.2f} s CPU, not counted below"
    )
    for name in args.data:
        X, y = load(name)
        idx = np.random.default_rng(0).integers(0, len(X), args.rows)
        Xs, ys = X.iloc[idx].reset_index(drop=True), y[idx]
        n_trees = X.shape[1]
        lgb_wall, lgb_cpu = fit_lightgbm(Xs, ys, n_trees, args.leaves)
        wall, cpu, model = fit_mcts(Xs, ys, args.batch, max_nodes=args.max_nodes)
        one = MCTSInteractions(seed=0, max_nodes=args.max_nodes)
        rows = Xs.iloc[: args.one_rows].to_dict("records")
        c0 = time.process_time()
        for x, t in zip(rows, ys[: args.one_rows]):
            one.learn_one(x, int(t))
        per_row = (time.process_time() - c0) / len(rows) * 1e6
        size = model.n_nodes
        state_mb, serving_mb = (
            state_bytes(model.to_state(statistics=stats)) / 2**20 for stats in (True, False)
        )
        print(
            f"{name:12s} {n_trees:4d} {lgb_wall:9.2f} {lgb_cpu:8.2f} {wall:10.2f} {cpu:8.2f} "
            f"{cpu / lgb_cpu:10.2f} {per_row:13.0f} {size['data_nodes']:11d} "
            f"{size['feature_nodes']:13d} {size['bytes'] / 2**20:7.1f} "
            f"{model._raw_memory_usage / 2**20:8.1f} {state_mb:8.1f} {serving_mb:10.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
