"""Choose R-MOTiFS's reward validation and stopping rule without looking at any test fold.

The paper says only that the 9 training folds are "the training and validation set" (Section
4.2); how the reward (eq. 3) validates k-NN on them is not stated. This script compares
candidate readings on data the Table 3 test folds never see:

for each data set and split s = 0..splits-1: take the TRAINING rows of outer fold s of
run 0 (stratified 10-fold, seed 0; the outer test fold is dropped unseen), split them once
(stratified, seed s) into a selection part (2/3) and a check part (1/3), min-max scale on the
selection part, run each variant of R-MOTiFS on the selection part, and score a 5-NN trained
on the selection part with the chosen columns on the check part.

Variants: validation "loo" (leave-one-out), "kfold:5", "kfold:5x3" (3 repetitions),
"holdout:0.3"; and with leave-one-out, the stopping rules on_tie="stop" (Algorithm 1's strict
"greater than") and baseline="all-features" (Section 3.1 read literally: the first tree must
beat all features).

Wave 5 variants: "loo+share-ties" (rows tied at the k-th distance share the last places
instead of the lower row index going first), "resub" (the reward is the training accuracy,
every row among its own neighbours), "loo+standard" (the reward's distances on standardised
instead of min-max scaled columns; the check 5-NN stays min-max, as Table 3's).

Rule (fixed before the run): a variant replaces the default (loo, on_tie="continue", no
baseline) only if its mean check accuracy, paired split by split and pooled over all data sets,
is higher by more than one standard error of the paired differences.

    nice -n 10 python -m bench.r_motifs.validation --datasets sonar ionosphere wdbc spect vehicle \
        --splits 10 --out /work/notes/wave4/r-motifs/validation.jsonl
    python -m bench.r_motifs.validation --summary --out ...
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.model_selection import StratifiedKFold, train_test_split
from sklearn.neighbors import KNeighborsClassifier
from tqdm import tqdm

from bench.r_motifs.table3 import LOADERS, minmax
from online.selection.r_motifs import RMOTiFS

VARIANTS = {
    "loo": {},
    "kfold:5": {"validation": "kfold:5"},
    "kfold:5x3": {"validation": "kfold:5x3"},
    "holdout:0.3": {"validation": "holdout:0.3"},
    "loo+tie-stop": {"on_tie": "stop"},
    "loo+baseline-all": {"baseline": "all-features"},
    # wave 5: the other open levers, same rule (README section 1b)
    "loo+share-ties": {"distance_ties": "share"},
    "resub": {"validation": "resub"},
    "loo+standard": {"scaling": "standard"},
}


def run(args):
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        done = {
            (r["dataset"], r["split"], r["variant"])
            for r in map(json.loads, out.read_text().splitlines())
        }
    for name in args.datasets:
        X, y = LOADERS[name]()
        outer = list(StratifiedKFold(10, shuffle=True, random_state=0).split(X, y))
        for s in tqdm(range(args.splits), desc=name):
            train = outer[s][0]  # outer test rows outer[s][1] are never used
            sel_rows, check_rows = train_test_split(
                train, test_size=1 / 3, stratify=y[train], random_state=s
            )
            Xa, Xb = minmax(X[sel_rows], X[check_rows])
            for variant in args.variants:
                if (name, s, variant) in done:
                    continue
                c0 = time.process_time()
                sel = RMOTiFS(
                    n_simulations=args.simulations, random_state=s, **VARIANTS[variant]
                ).fit(Xa, y[sel_rows])
                cpu = time.process_time() - c0
                cols = sel.support_
                acc = (
                    KNeighborsClassifier(5)
                    .fit(Xa[:, cols], y[sel_rows])
                    .score(Xb[:, cols], y[check_rows])
                )
                rec = {
                    "dataset": name,
                    "split": s,
                    "variant": variant,
                    "check_accuracy": float(acc),
                    "reward": sel.accuracy_,
                    "n_features": int(cols.sum()),
                    "recursions": len(sel.history_),
                    "cpu_seconds": cpu,
                }
                with out.open("a") as f:
                    f.write(json.dumps(rec) + "\n")


def summary(path):
    df = pd.read_json(path, lines=True)
    wide = df.pivot_table(index=["dataset", "split"], columns="variant", values="check_accuracy")
    wide = wide.dropna()
    lines = [
        "| variant | check accuracy (mean) | minus loo (paired) | SE | reward - check | features "
        "| CPU s per fit | splits |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for v in [v for v in VARIANTS if v in wide.columns]:
        diff = wide[v] - wide["loo"]
        g = df[df.variant == v].set_index(["dataset", "split"]).loc[wide.index]
        se = diff.std(ddof=1) / np.sqrt(len(diff)) if len(diff) > 1 else float("nan")
        lines.append(
            f"| {v} | {wide[v].mean():.4f} | {diff.mean():+.4f} | {se:.4f} | "
            f"{(g.reward - g.check_accuracy).mean():+.3f} | {g.n_features.mean():.1f} | "
            f"{g.cpu_seconds.mean():.1f} | {len(diff)} |"
        )
    per = wide.groupby("dataset").mean()
    lines += [
        "",
        "Per data set, mean check accuracy:",
        "",
        "| data set | " + " | ".join(per.columns) + " |",
        "|---|" + "---|" * len(per.columns),
    ]
    for name, row in per.iterrows():
        lines.append(f"| {name} | " + " | ".join(f"{x:.3f}" for x in row) + " |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--datasets",
        nargs="+",
        default=["sonar", "ionosphere", "wdbc", "spect", "vehicle"],
        choices=sorted(LOADERS),
    )
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--splits", type=int, default=10)
    ap.add_argument("--simulations", type=int, default=1000)
    ap.add_argument("--out", default="/tmp/r_motifs_bench/validation.jsonl")
    ap.add_argument("--summary", action="store_true")
    args = ap.parse_args()
    if not args.summary:
        run(args)
    print(summary(args.out))


if __name__ == "__main__":
    main()
