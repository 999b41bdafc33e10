"""DIAGNOSTIC ONLY: how much do leaky readings of the R-MOTiFS protocol raise Table 3's figures?

The paper (Section 4.2) says "9-folds were used as the training and validation set and the
remaining 1-fold as a test set", and eq. (3) rewards "the accuracy of the classifier on the
current feature subset" without saying on which rows. Grove's RMOTiFS validates the reward
inside the 9 training folds (leave-one-out) and never sees the test fold. This script measures,
on the same outer folds and with the same search seeds as bench/r_motifs/table3.py, readings
that DO let the selection see the rows it is scored on. None of them is Grove's method: if
one reproduces the paper's figures, that is evidence that those figures carry selection bias.

Readings (each for R-MOTiFS and, with ``--methods``, MOTiFS = one tree):
- ``inner``: the honest protocol of Table 3 (min-max and leave-one-out reward on the 9
  training folds), recomputed here for paired ratios.
- ``test``: the reward of a subset is the accuracy of a 5-NN trained on the 9 training folds
  and scored on the outer TEST fold; the reported accuracy is then the selected subset's
  reward itself (selection sees the test fold's labels).
- ``whole``: one selection per run on ALL rows (min-max and leave-one-out reward on all rows),
  then 10-fold CV of a 5-NN with the selected columns (the common "select, then
  cross-validate" leak: every test fold took part in the selection).
- ``scale-all``: honest, except that min-max scaling is fitted on all rows (train + test
  features, no labels): a small, label-free leak, to size it.

    nice -n 10 python -m bench.r_motifs.leak --datasets sonar ionosphere --runs 2 \
        --out /work/notes/wave5/rmotifs/leak.jsonl
    python -m bench.r_motifs.leak --summary --out ... \
        [--table3 bench/r_motifs/results/r_motifs_table3_results.jsonl]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier
from tqdm import tqdm

from bench.r_motifs.table3 import LOADERS, PAPER, minmax
from online.selection.knn_reward import KNNReward
from online.selection.r_motifs import RMOTiFS

READINGS = ("inner", "test", "whole", "scale-all")


class TestFoldRMOTiFS(RMOTiFS):
    """RMOTiFS whose eq. (3) reward is the accuracy on given held-out rows (LEAKY: diagnostic).

    Set ``heldout_ = (X_test, y_test)`` (already scaled like the fit rows) before ``fit``.
    The search, its seeds and its random draws are those of RMOTiFS.
    """

    def _make_reward(self, X, y, rng):
        X_test, y_test = self.heldout_
        rows = np.vstack([X, X_test])
        reward = KNNReward(rows, np.concatenate([y, y_test]), n_neighbors=self.n_neighbors)
        # one split: the test rows (group 1) are the queries, only training rows (group 0) vote
        groups = np.r_[np.zeros(len(X), dtype=np.int64), np.ones(len(X_test), dtype=np.int64)]
        reward._splits = [(groups, np.flatnonzero(groups == 1))]
        return reward


def _knn_accuracy(Xtr, ytr, Xte, yte, support):
    return float(KNeighborsClassifier(5).fit(Xtr[:, support], ytr).score(Xte[:, support], yte))


def _record(out, rec):
    with out.open("a") as f:
        f.write(json.dumps(rec) + "\n")


def run(args):
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        done = {
            (r["dataset"], r["reading"], r["method"], r["run"], r["fold"])
            for r in map(json.loads, out.read_text().splitlines())
        }
    for name in args.datasets:
        X, y = LOADERS[name]()
        for run_ in range(args.run_from, args.runs):
            folds = list(StratifiedKFold(10, shuffle=True, random_state=run_).split(X, y))
            for method in args.methods:
                params = {
                    "recursive": method == "rmotifs",
                    "max_validation_samples": args.max_validation_samples,
                }
                if "whole" in args.readings and (name, "whole", method, run_, 0) not in done:
                    # one selection on every row, then the 10 folds with its columns
                    c0 = time.process_time()
                    sel = RMOTiFS(random_state=1000 * run_, **params).fit(minmax(X, X)[0], y)
                    cpu = time.process_time() - c0
                    for fold, (tr, te) in enumerate(folds):
                        Xtr, Xte = minmax(X[tr], X[te])
                        _record(
                            out,
                            {
                                "dataset": name,
                                "reading": "whole",
                                "method": method,
                                "run": run_,
                                "fold": fold,
                                "accuracy": _knn_accuracy(Xtr, y[tr], Xte, y[te], sel.support_),
                                "reward": sel.accuracy_,
                                "n_features": int(sel.support_.sum()),
                                "recursions": len(sel.history_),
                                "cpu_seconds": cpu / len(folds),
                            },
                        )
                jobs = [(fold, tr, te) for fold, (tr, te) in enumerate(folds) if fold < args.folds]
                for fold, tr, te in tqdm(jobs, desc=f"{name} run {run_} {method}"):
                    for reading in args.readings:
                        if reading == "whole" or (name, reading, method, run_, fold) in done:
                            continue
                        if reading == "scale-all":
                            low, high = X.min(axis=0), X.max(axis=0)
                            span = np.where(high > low, high - low, 1.0)
                            Xtr, Xte = (X[tr] - low) / span, (X[te] - low) / span
                        else:
                            Xtr, Xte = minmax(X[tr], X[te])
                        seed = 1000 * run_ + fold  # the seed of Table 3's fit on this fold
                        c0 = time.process_time()
                        if reading == "test":
                            sel = TestFoldRMOTiFS(random_state=seed, **params)
                            sel.heldout_ = (Xte, y[te])
                        else:
                            # scale-all: RMOTiFS's own min-max on the fit rows would undo the
                            # leak, so it gets the all-rows scaling as is
                            sel = RMOTiFS(
                                random_state=seed,
                                scaling=None if reading == "scale-all" else "minmax",
                                **params,
                            )
                        sel.fit(Xtr, y[tr])
                        cpu = time.process_time() - c0
                        _record(
                            out,
                            {
                                "dataset": name,
                                "reading": reading,
                                "method": method,
                                "run": run_,
                                "fold": fold,
                                "accuracy": _knn_accuracy(Xtr, y[tr], Xte, y[te], sel.support_),
                                "reward": sel.accuracy_,
                                "n_features": int(sel.support_.sum()),
                                "recursions": len(sel.history_),
                                "cpu_seconds": cpu,
                            },
                        )


def summary(path, table3=None):
    df = pd.read_json(path, lines=True)
    df = df.drop_duplicates(["dataset", "reading", "method", "run", "fold"])  # reruns are identical
    if table3:  # honest figures of Table 3 on the same (run, fold)s, when not recomputed here
        t3 = pd.read_json(table3, lines=True)
        t3 = t3[t3.method.isin(["rmotifs", "motifs"]) & (t3.get("validation", "loo") == "loo")]
        t3 = t3.assign(reading="inner")[
            [
                "dataset",
                "reading",
                "method",
                "run",
                "fold",
                "accuracy",
                "reward",
                "n_features",
                "recursions",
                "cpu_seconds",
            ]
        ]
        have = set(map(tuple, df[["dataset", "reading", "method", "run", "fold"]].values.tolist()))
        keep = [
            tuple(r) not in have
            for r in t3[["dataset", "reading", "method", "run", "fold"]].values.tolist()
        ]
        cells = set(map(tuple, df[["dataset", "method", "run", "fold"]].values.tolist()))
        keep = [
            k and tuple(r) in cells
            for k, r in zip(keep, t3[["dataset", "method", "run", "fold"]].values.tolist())
        ]
        df = pd.concat([df, t3[keep]], ignore_index=True)
    lines = [
        "| data set | method | paper | "
        + " | ".join(READINGS)
        + " | test - inner (paired, folds) | runs of 10 folds: "
        + ", ".join(READINGS)
        + " |",
        "|---|---|---|" + "---|" * len(READINGS) + "---|---|",
    ]
    for (name, method), g in df.groupby(["dataset", "method"], sort=False):
        p = PAPER.get(name)
        paper = (
            "-"
            if not p
            else (
                f"{p[0][0]:.3f} / {p[0][2]}"
                if method == "rmotifs"
                else f"{p[1][0]:.3f} / {p[1][1]}"
            )
        )
        cells = []
        for reading in READINGS:
            r = g[g.reading == reading]
            cells.append(f"{r.accuracy.mean():.3f} / {r.n_features.mean():.1f}" if len(r) else "-")
        wide = g.pivot_table(index=["run", "fold"], columns="reading", values="accuracy")
        if {"test", "inner"} <= set(wide.columns):
            both = wide[["test", "inner"]].dropna()
            d = both.test - both.inner
            paired = f"{d.mean():+.3f} ± {d.std(ddof=1) / np.sqrt(len(d)):.3f} ({len(d)})"
        else:
            paired = "-"
        shape = ", ".join(
            str(g[g.reading == r].run.nunique()) if (g.reading == r).any() else "-"
            for r in READINGS
        )
        lines.append(
            f"| {name} | {method} | {paper} | " + " | ".join(cells) + f" | {paired} | {shape} |"
        )
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--datasets", nargs="+", default=["sonar", "ionosphere"], choices=sorted(LOADERS)
    )
    ap.add_argument("--readings", nargs="+", default=list(READINGS), choices=READINGS)
    ap.add_argument(
        "--methods", nargs="+", default=["rmotifs", "motifs"], choices=["rmotifs", "motifs"]
    )
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--run-from", type=int, default=0)
    ap.add_argument("--folds", type=int, default=10)
    ap.add_argument("--max-validation-samples", type=int, default=None)
    ap.add_argument("--out", default="/tmp/r_motifs_bench/leak.jsonl")
    ap.add_argument("--table3", help="with --summary: add Table 3's honest lines on the same folds")
    ap.add_argument("--summary", action="store_true")
    args = ap.parse_args()
    if not args.summary:
        run(args)
    print(summary(args.out, args.table3))


if __name__ == "__main__":
    main()
