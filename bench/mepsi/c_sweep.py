"""MEPSI's accuracy as a function of its trade-off C, beside reduce-error ordered aggregation.

Why MEPSI with Table S3's C loses to plain reduce-error (OA-RE) on the paper's small trees:
with C -> 0 Algorithm 1 is OA-RE started from the best pair, so if the structural term helped,
some C > 0 would beat C = 0 and OA-RE. Per data set and repetition (fixed 30 % test split as in
the paper, forest seed = repetition, Table S1 ccp_alpha or ``--ccp``), one TED matrix is shared
by every C; the error term is measured on ``--prune-on`` (train: the paper; oob: each tree's
out-of-bag samples). "MEPSI C by OOB" picks, per forest, the C of the grid whose selection has
the lowest out-of-bag error (an honest validation when the error term is the training set;
with ``--prune-on oob`` it is the same set that chose the trees, so it only breaks ties).

Writes ``bench/out/mepsi_c_sweep_<tag>.jsonl`` (resumable), prints a table and draws
``bench/mepsi/plots/mepsi_c_sweep_<tag>.png`` (test accuracy vs C, OA-RE as a dashed line).

    nice -n 10 python -m bench.mepsi.c_sweep --reps 5 --prune-on train
    nice -n 10 python -m bench.mepsi.c_sweep --reps 5 --prune-on oob
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split
from tqdm import tqdm

from bench.common.paths import OUT
from bench.mepsi.data import TABLE, load
from online.pruning import (
    MEPSI,
    from_sklearn_forest,
    reduce_error,
    ted_matrix,
    vote_accuracy,
)
from online.pruning.protocol import held_out_set, paper_forest, pruning_set

GRID = (0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 0.8)
HERE = Path(__file__).resolve().parent


def run_one(name, rep, ccp, prune_on, esm_avg, grid) -> dict:
    X, y, split = load(name)
    if split is not None:
        Xtr, Xte, ytr, yte = X[~split], X[split], y[~split], y[split]
    else:
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0)
    alpha = TABLE[name][3] if ccp is None else ccp
    rf = paper_forest(200, alpha, random_state=rep).fit(Xtr, ytr)
    trees = from_sklearn_forest(rf)
    P_oob, ytr_c = pruning_set(rf, Xtr, ytr, prune_on="oob")
    P = P_oob if prune_on == "oob" else pruning_set(rf, Xtr, ytr)[0]
    P_te, yte_c = held_out_set(rf, Xte, yte)  # a test class the forest never saw: -1
    D = ted_matrix(trees)
    acc, oob_err = {}, {}
    for C in grid:
        m = MEPSI(k=20, C=C, esm_avg=esm_avg, random_state=rep).fit(trees, P, ytr_c, distances=D)
        acc[str(C)] = vote_accuracy(P_te, yte_c, m.selected_)
        oob_err[str(C)] = 1.0 - vote_accuracy(P_oob, ytr_c, m.selected_)
    best = min(grid, key=lambda C: (oob_err[str(C)], C))  # ties: the smaller C
    re = reduce_error(P, ytr_c, 20)
    return {
        "data": name,
        "rep": rep,
        "acc": acc,
        "oob_error": oob_err,
        "C_by_oob": best,
        "acc_C_by_oob": acc[str(best)],
        "acc_reduce_error": vote_accuracy(P_te, yte_c, re),
        "acc_all": vote_accuracy(P_te, yte_c, np.arange(200)),
        "paper_C": TABLE[name][4],
    }


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--datasets",
        default="digits,breast_cancer,vowel,mfeat_factors,splice,credit_a,tic_tac_toe,vehicle,sick",
    )
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--ccp", type=float, default=None)
    p.add_argument("--prune-on", choices=["train", "oob"], default="train")
    p.add_argument("--esm-avg", choices=["term", "subset"], default="subset")
    a = p.parse_args(argv)
    names = a.datasets.split(",")
    tag = ("paper" if a.ccp is None else f"ccp{a.ccp:g}") + f"_{a.prune_on}_{a.esm_avg}"
    jsonl = OUT / f"mepsi_c_sweep_{tag}.jsonl"
    jsonl.parent.mkdir(exist_ok=True)
    recs = [json.loads(x) for x in jsonl.read_text().splitlines()] if jsonl.exists() else []
    done = {(r["data"], r["rep"]) for r in recs}
    for n, r in tqdm([(n, r) for r in range(a.reps) for n in names if (n, r) not in done]):
        rec = run_one(n, r, a.ccp, a.prune_on, a.esm_avg, GRID)
        recs.append(rec)
        with jsonl.open("a") as f:
            f.write(json.dumps(rec) + "\n")
    print(
        "| data | reps | All | OA-RE | "
        + " | ".join(f"C={C:g}" for C in GRID)
        + " | C by OOB | best C (test) |"
    )
    print("|" + "---|" * (len(GRID) + 6))
    rows = []
    for n in names:
        rs = [r for r in recs if r["data"] == n]
        if not rs:
            continue
        curve = np.array([[r["acc"][str(C)] for C in GRID] for r in rs]).mean(0) * 100
        re_ = np.mean([r["acc_reduce_error"] for r in rs]) * 100
        cv = np.mean([r["acc_C_by_oob"] for r in rs]) * 100
        al = np.mean([r["acc_all"] for r in rs]) * 100
        rows.append((n, curve, re_))
        print(
            f"| {n} | {len(rs)} | {al:.1f} | {re_:.1f} | "
            + " | ".join(f"{v:.1f}" for v in curve)
            + f" | {cv:.1f} | {GRID[int(np.argmax(curve))]:g} |"
        )
    diffs = {
        "C by OOB": [r["acc_C_by_oob"] - r["acc_reduce_error"] for r in recs],
        **{f"C={C:g}": [r["acc"][str(C)] - r["acc_reduce_error"] for r in recs] for C in GRID},
    }
    for k, d in diffs.items():
        d = np.array(d) * 100
        print(
            f"{k} vs OA-RE over {len(d)} runs: better {(d > 0).sum()}, equal "
            f"{(d == 0).sum()}, worse {(d < 0).sum()}, mean {d.mean():+.2f} points"
        )
    if rows:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        ncol = min(3, len(rows))
        nrow = -(-len(rows) // ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(3.4 * ncol, 2.6 * nrow), squeeze=False)
        x = np.arange(len(GRID))
        for ax in axes.ravel()[len(rows) :]:
            ax.axis("off")
        for ax, (n, curve, re_) in zip(axes.ravel(), rows):
            ax.plot(x, curve, "o-", label="MEPSI")
            ax.axhline(re_, ls="--", color="k", label="OA-RE")
            ax.set_xticks(x, [f"{C:g}" for C in GRID], rotation=90, fontsize=7)
            ax.set_title(n, fontsize=9)
            ax.set_ylabel("test accuracy %", fontsize=8)
        axes[-1][0].set_xlabel("C (subset reading)")
        axes[0][0].legend(fontsize=7)
        fig.suptitle(f"MEPSI test accuracy vs C ({tag}); dashed: reduce-error", fontsize=9)
        fig.tight_layout()
        out = HERE / "plots" / f"mepsi_c_sweep_{tag}.png"
        fig.savefig(out, dpi=90)
        print(f"plot: {out}")


if __name__ == "__main__":
    main()
