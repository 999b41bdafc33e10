"""MCTS-IS's leaf features against the node budget ``max_nodes`` (issue 6).

For each data set (seed 0 split, (c_F, lambda) = (0.05, 5e-3), ``--iters`` iterations): fit
MCTS-IS with each budget, then the LR on raw one-hot + leaf one-hots over the Table 1 C grid;
print the validation-AUC choice's test AUC / log loss, the node counts, and the bytes of the
full and the serving state.

    nice -n 10 python -m bench.mcts_is.max_nodes --data adult kr_vs_kp splice --budgets 50000 250000
"""

from __future__ import annotations

import argparse
import json

import scipy.sparse as sp
from tqdm import tqdm

from bench.mcts_is.data import load, split
from bench.mcts_is.speed import state_bytes
from bench.mcts_is.table1 import lr_grid, mcts_leaves, n_features, onehot


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", nargs="*", default=["adult", "kr_vs_kp", "splice"])
    ap.add_argument("--budgets", type=int, nargs="*", default=[50_000, 250_000, 1_000_000])
    ap.add_argument("--iters", type=int, default=200_000)
    args = ap.parse_args()
    for name in args.data:
        X, y = load(name)
        tr, va, te = split(len(X), 0)
        parts = (tr, va, te)
        raw = onehot(X.iloc[tr], X.iloc[va], X.iloc[te])
        for budget in tqdm(args.budgets, desc=name):
            L, cpu, model = mcts_leaves(
                X, y, tr, args.iters, 65536, 0, c_f=0.05, lambda_=5e-3, max_nodes=budget
            )
            hot = onehot(L[tr], L[va], L[te])
            grid = lr_grid([sp.hstack([r, h]).tocsr() for r, h in zip(raw, hot)], y, parts)
            best = max(grid, key=lambda g: (g[1], -g[2]))
            print(
                json.dumps(
                    {
                        "data": name,
                        "max_nodes": budget,
                        "fit_cpu": round(cpu, 2),
                        "nodes": model.n_nodes,
                        "features": n_features(L, tr),
                        "C": best[0],
                        "val_auc": round(best[1], 4),
                        "test_auc": round(best[3], 4),
                        "test_ll": round(best[4], 4),
                        "full_MB": round(state_bytes(model.to_state()) / 2**20, 2),
                        "serving_MB": round(
                            state_bytes(model.to_state(statistics=False)) / 2**20, 3
                        ),
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
