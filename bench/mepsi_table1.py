"""MEPSI's Table 1: test accuracy of 20 trees out of 200 chosen by MEPSI and by baselines.

Protocol (MEPSI paper, Tables S1-S3): per data set and repetition, a random 30 % test split
(Vowel: its default split), a scikit-learn random forest of 200 trees (entropy, sqrt features,
bootstrap, max_samples 1.0, ccp_alpha of Table S1, or ``--ccp 0`` for unpruned trees), pruning
to k = 20 on the training data, and the test accuracy of the chosen trees' vote: by default the
mean of their class probabilities and Eq. (1) (``--vote soft``: the paper's H_S = sum w_i h_i of
scoring functions; its "All" column matches scikit-learn's forest), or ``--vote hard`` (labels).
Methods: All (vote of the 200 trees), RF (scikit-learn's probability average, for reference),
Random, Kappa, OA reduce-error, OA boosting-based and MEPSI (C of Table S3, plus any
``--extra-C``). MEPSI's time includes the TED matrix (printed separately).

Runs append to ``<out>.jsonl`` (one line per data set and repetition; finished runs are
skipped when the command is re-run) and the report goes to ``<out>.md``.

    nice -n 10 python bench/mepsi_table1.py --reps 20                 # paper ccp_alpha
    nice -n 10 python bench/mepsi_table1.py --reps 20 --ccp 0 --extra-C 0.05,0.01
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mepsi_data import TABLE, load
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

from online.pruning import (
    MEPSI,
    METHODS,
    forest_predictions,
    from_sklearn_forest,
    ted_matrix,
    vote_accuracy,
)
from online.pruning.ted import _blocks

BASELINES = ["random", "kappa", "reduce_error", "boosting"]


def run_one(
    name,
    rep,
    ccp,
    extra_C,
    k,
    n_trees,
    vote,
    esm_avg="subset",
    esm_samples=200,
    skip_paper_C=False,
) -> dict:
    X, y, split = load(name)
    if split is not None:
        Xtr, Xte, ytr, yte = X[~split], X[split], y[~split], y[split]
    else:
        Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=rep)
    alpha = TABLE[name][3] if ccp is None else ccp
    t0 = time.perf_counter()
    rf = RandomForestClassifier(
        n_estimators=n_trees,
        criterion="entropy",
        max_features="sqrt",
        bootstrap=True,
        max_samples=None,
        ccp_alpha=alpha,
        random_state=rep,
        n_jobs=1,
    ).fit(Xtr, ytr)
    fit_s = time.perf_counter() - t0
    trees = from_sklearn_forest(rf)
    soft = vote == "soft"
    P_tr, P_te = (
        forest_predictions(rf, Xtr, scores=soft),
        forest_predictions(rf, Xte, scores=soft),
    )
    if soft:  # scores are indexed by rf.classes_
        ytr, yte = np.searchsorted(rf.classes_, ytr), np.searchsorted(rf.classes_, yte)
    acc = {
        "all": vote_accuracy(P_te, yte, np.arange(n_trees)),
        "rf": float(
            np.mean(rf.predict(Xte) == rf.classes_[yte]) if soft else rf.score(Xte, yte)
        ),
    }
    sel = {}
    for m in BASELINES:
        s = METHODS[m](P_tr, ytr, k, random_state=rep)
        sel[m] = s.tolist()
        acc[m] = vote_accuracy(P_te, yte, s)
    t0 = time.perf_counter()
    rows = sum(len(_blocks(t)["local"]) for t in trees if t.n_nodes)
    # small trees: the whole TED matrix, shared by every C; large ones: MEPSI's bounded search,
    # each fit passing on the TEDs it computed
    D = ted_matrix(trees) if rows**2 / 2 <= 3e8 else None
    ted_s = time.perf_counter() - t0
    times, n_ted = {}, {}
    for C in ([] if skip_paper_C else [TABLE[name][4]]) + list(extra_C):
        key = "mepsi" if C == TABLE[name][4] else f"mepsi_C{C:g}"
        t0 = time.perf_counter()
        m = MEPSI(
            k=k, C=C, esm_avg=esm_avg, n_esm_samples=esm_samples, random_state=rep
        ).fit(trees, P_tr, ytr, distances=D)
        times[key] = time.perf_counter() - t0 + ted_s
        n_ted[key] = int(m.ted_evaluations_)
        D = m.distances_
        acc[key] = vote_accuracy(P_te, yte, m.selected_)
        sel[key] = m.selected_.tolist()
        acc[key + "_train_error"] = float(m.errors_[-1])
    nc = np.array([t.n_nodes for t in trees])
    return {
        "data": name,
        "rep": rep,
        "ccp_alpha": alpha,
        "vote": vote,
        "esm_avg_mode": esm_avg,
        "acc": acc,
        "selected": sel,
        "mepsi_seconds": times,
        "ted_evaluations": n_ted,
        "ted_seconds": ted_s,
        "forest_seconds": fit_s,
        "mean_internal_nodes": float(nc.mean()),
        "max_internal_nodes": int(nc.max()),
        "esm_avg": float(m.esm_avg_),
    }


def report(records: list[dict], names: list[str]) -> str:
    methods = ["all", "rf", "random", "kappa", "reduce_error", "boosting"]
    mep = sorted(
        {
            k
            for r in records
            for k in r["acc"]
            if k.startswith("mepsi") and not k.endswith("_train_error")
        },
        key=lambda s: (s != "mepsi", s),
    )
    methods += mep
    head = {
        "all": "All",
        "rf": "RF(soft)",
        "random": "Random",
        "kappa": "Kappa",
        "reduce_error": "OA-RE",
        "boosting": "OA-Boost",
    }
    cols = [
        head.get(m, m.replace("mepsi_C", "MEPSI C=").replace("mepsi", "MEPSI"))
        for m in methods
    ]
    lines = [
        "| data | reps | nodes | " + " | ".join(cols) + " | first MEPSI s (TED s) |",
        "|" + "---|" * (len(cols) + 4),
    ]
    ranks = []
    rank_methods = [m for m in methods if m != "rf"]
    for n in names:
        rs = [r for r in records if r["data"] == n]
        if not rs:
            continue
        means = {
            m: np.mean([r["acc"][m] for r in rs]) * 100
            for m in methods
            if all(m in r["acc"] for r in rs)
        }
        stds = {m: np.std([r["acc"][m] for r in rs]) * 100 for m in means}
        cells = [
            f"{means[m]:.1f}±{stds[m]:.1f}" if m in means else "-" for m in methods
        ]
        secs = np.mean([next(iter(r["mepsi_seconds"].values())) for r in rs])
        teds = np.mean([r["ted_seconds"] for r in rs])
        nodes = np.mean([r["mean_internal_nodes"] for r in rs])
        lines.append(
            f"| {n} | {len(rs)} | {nodes:.1f} | "
            + " | ".join(cells)
            + f" | {secs:.2f} ({teds:.2f}) |"
        )
        vals = np.array([-means.get(m, -np.inf) for m in rank_methods])
        order = vals.argsort(kind="stable")
        rk = np.empty(len(vals))
        rk[order] = np.arange(1, len(vals) + 1)
        for v in np.unique(vals):  # average ranks on ties
            rk[vals == v] = rk[vals == v].mean()
        ranks.append(rk)
    if ranks:
        avg = np.mean(ranks, axis=0)
        lines.append("")
        lines.append(
            "Average rank over data sets (1 = best; RF(soft) not ranked): "
            + ", ".join(
                f"{cols[methods.index(m)]} {a:.2f}"
                for m, a in sorted(zip(rank_methods, avg), key=lambda t: t[1])
            )
        )
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--datasets", default=",".join(TABLE))
    p.add_argument("--reps", type=int, default=20)
    p.add_argument(
        "--ccp",
        type=float,
        default=None,
        help="ccp_alpha for every data set (default: Table S1)",
    )
    p.add_argument("--extra-C", default="", help="more MEPSI C values, comma separated")
    p.add_argument("--k", type=int, default=20)
    p.add_argument("--trees", type=int, default=200)
    p.add_argument(
        "--vote",
        choices=["soft", "hard"],
        default="soft",
        help="soft: mean of tree class probabilities, Eq. (1) (the paper's H_S); hard: majority vote of labels",
    )
    p.add_argument(
        "--esm-avg",
        choices=["subset", "term"],
        default="subset",
        help="MEPSI's ESM_avg reading",
    )
    p.add_argument(
        "--skip-paper-C", action="store_true", help="run MEPSI only with --extra-C"
    )
    p.add_argument("--esm-samples", type=int, default=200, help="MEPSI n_esm_samples")
    p.add_argument("--out", default=None)
    p.add_argument("--report-only", action="store_true")
    a = p.parse_args(argv)
    names = [n for n in a.datasets.split(",") if n]
    extra = [float(c) for c in a.extra_C.split(",") if c]
    tag = (
        ("paper" if a.ccp is None else f"ccp{a.ccp:g}")
        + ("" if a.vote == "soft" else "_hard")
        + ("" if a.esm_avg == "subset" else "_term")
    )
    out = Path(a.out or Path(__file__).resolve().parent / "out" / f"mepsi_table1_{tag}")
    out.parent.mkdir(parents=True, exist_ok=True)
    jsonl = out.with_suffix(".jsonl")
    records = (
        [json.loads(line) for line in jsonl.read_text().splitlines()]
        if jsonl.exists()
        else []
    )
    done = {(r["data"], r["rep"]) for r in records}
    if not a.report_only:
        jobs = [(n, r) for r in range(a.reps) for n in names if (n, r) not in done]
        for n, r in tqdm(jobs, desc="mepsi table1"):
            rec = run_one(
                n,
                r,
                a.ccp,
                extra,
                a.k,
                a.trees,
                a.vote,
                a.esm_avg,
                a.esm_samples,
                a.skip_paper_C,
            )
            records.append(rec)
            with jsonl.open("a") as f:
                f.write(json.dumps(rec) + "\n")
    text = report(records, names)
    out.with_suffix(".md").write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
