"""Reproduce Table 3 of the R-MOTiFS paper: accuracy and number of selected features.

Protocol (paper, Section 4.2): stratified 10-fold cross-validation, 5 independent runs
(run r shuffles the folds with seed r). Selection happens INSIDE each outer fold: every
selector sees only the 9 training folds (min-max scaled on them), then a 5-NN trained on
those folds with the selected columns is scored on the held-out fold. No selection bias.

Methods, all on the same folds:
- ``rmotifs``: online.RMOTiFS (S = 1000, C = 0.1, 5-NN leave-one-out reward).
- ``motifs``: the same search without recursion (one tree: MOTiFS).
- ``sfs``: scikit-learn SequentialFeatureSelector(KNeighborsClassifier(5), direction="forward",
  n_features_to_select="auto", tol=1e-9, cv=5): add features while the inner 5-fold CV
  accuracy strictly improves.
- ``all``: 5-NN on all features.

Every (data set, run, fold, method) result is appended to a JSON-lines file, so runs can be
split, resumed (already-done entries are skipped) and summarised later with ``--summary``.

Full protocol:
    nice -n 10 python -m bench.r_motifs.table3 --datasets wdbc ionosphere sonar spambase \
        spect german kr_vs_kp waveform musk1 --runs 5 --folds 10
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.datasets import load_breast_cancer
from sklearn.feature_selection import SequentialFeatureSelector
from sklearn.model_selection import StratifiedKFold
from sklearn.neighbors import KNeighborsClassifier
from tqdm import tqdm

from bench.common.paths import DATA
from online.selection.r_motifs import RMOTiFS

# Table 3: R-MOTiFS accuracy (± std over 5 runs) and features; MOTiFS; H-MOTiFS
PAPER = {
    "spambase": ((0.915, 0.003, 15.5), (0.907, 31.5), (0.907, 18.0)),
    "ionosphere": ((0.890, 0.008, 4.72), (0.889, 12.3), (0.892, 7.0)),
    "arrhythmia": ((0.678, 0.008, 12.3), (0.650, 94.4), (0.640, 40.0)),
    "waveform": ((0.817, 0.005, 14.4), (0.816, 19.4), (0.823, 12.0)),
    "wdbc": ((0.962, 0.002, 12.6), (0.967, 15.4), (0.964, 6.0)),
    "german": ((0.718, 0.014, 8.6), (0.725, 11.5), (0.728, 8.0)),
    "dna": ((0.893, 0.002, 12.2), (0.810, 89.3), (0.905, 18.0)),
    "sonar": ((0.834, 0.003, 14.1), (0.850, 28.9), (0.836, 12.0)),
    "musk1": ((0.853, 0.010, 32.7), (0.852, 81.3), (0.850, 50.0)),
    "coil20": ((0.981, 0.009, 81.6), (0.980, 505.4), (0.989, 308.0)),
    "orl": ((0.862, 0.011, 135.3), (0.862, 498.3), (0.883, 308.0)),
    "lung_discrete": ((0.807, 0.006, 41.0), (0.810, 154.8), (0.823, 98.0)),
    "kr_vs_kp": ((0.964, 0.005, 16.2), (0.961, 20.1), (0.975, 8.0)),
    "spect": ((0.813, 0.008, 8.7), (0.809, 10.3), (0.817, 7.0)),
}


def _csv(name, target, drop=()):
    df = pd.read_csv(DATA / f"{name}.csv.gz", na_values=["?"])
    y = df.pop(target).to_numpy()
    X = df.drop(columns=list(drop))
    for col in X.columns:  # categorical columns (kr-vs-kp) as integer codes
        if X[col].dtype == object:
            X[col] = X[col].astype("category").cat.codes
    X = X.fillna(X.median())  # arrhythmia has missing cells
    return X.to_numpy(dtype=np.float64), y


LOADERS = {
    "wdbc": lambda: load_breast_cancer(return_X_y=True),
    "ionosphere": lambda: _csv("ionosphere", "class"),
    "sonar": lambda: _csv("sonar", "class"),
    "spambase": lambda: _csv("spambase", "spam"),
    "spect": lambda: _csv("spect", "OVERALL_DIAGNOSIS", drop=["split"]),
    "german": lambda: _csv("german_numeric", "class"),
    "kr_vs_kp": lambda: _csv("kr_vs_kp", "class"),
    "waveform": lambda: _csv("waveform40", "class"),
    "musk1": lambda: _csv("musk1", "class", drop=["molecule_name", "conformation_name"]),
    "dna": lambda: _csv("dna_statlog", "Class"),
    "arrhythmia": lambda: _csv("arrhythmia", "class"),
    "lung_discrete": lambda: _csv("lung_discrete", "label"),
    "coil20": lambda: _csv("coil20", "label"),
    "orl": lambda: _csv("orl", "label"),
    "vehicle": lambda: _csv("vehicle", "Class"),  # not in the paper: used to choose the validation
}


def minmax(train, test):
    low, high = train.min(axis=0), train.max(axis=0)
    span = np.where(high > low, high - low, 1.0)
    return (train - low) / span, (test - low) / span


def standard(train, test):
    """z-scores fitted on the training rows (the ``--scaling standard`` diagnostic)."""
    mean, sd = train.mean(axis=0), train.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    return (train - mean) / sd, (test - mean) / sd


def select(method, X, y, seed, args):
    """Boolean support mask chosen by ``method`` on (scaled) training rows, plus extras."""
    if method == "all":
        return np.ones(X.shape[1], dtype=bool), {}
    if method in ("rmotifs", "motifs"):
        sel = RMOTiFS(
            n_simulations=args.simulations,
            recursive=method == "rmotifs",
            scaling=args.scaling,
            validation=args.validation,
            max_validation_samples=args.max_validation_samples,
            random_state=seed,
        ).fit(X, y)
        return sel.support_, {
            "recursions": len(sel.history_),
            "reward": sel.accuracy_,
            "evaluations": sel.n_evaluations_,
            "cache_hits": sel.n_cache_hits_,
        }
    if method == "sfs":
        sel = SequentialFeatureSelector(
            KNeighborsClassifier(5),
            direction="forward",
            n_features_to_select="auto",
            tol=1e-9,
            cv=5,
        ).fit(X, y)
        return sel.get_support(), {}
    raise ValueError(method)


def _key(r):
    # selectors that do not use the reward (sfs, all) do not depend on the validation
    validation = r.get("validation", "loo") if r["method"] in ("rmotifs", "motifs") else None
    return (r["dataset"], r["run"], r["fold"], r["method"], r["simulations"], validation)


def run(args):
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = set()
    if out.exists():
        for line in out.read_text().splitlines():
            r = json.loads(line)
            done.add(_key(r))
    for name in args.datasets:
        X, y = LOADERS[name]()
        jobs = [
            (run_, fold, tr, te)
            for run_ in range(args.run_from, args.runs)
            for fold, (tr, te) in enumerate(
                StratifiedKFold(
                    10,
                    shuffle=True,
                    random_state=run_ if args.partition_seed is None else args.partition_seed,
                ).split(X, y)
            )
            if args.fold_from <= fold < args.folds
        ]
        for run_, fold, tr, te in tqdm(jobs, desc=f"{name} {X.shape}"):
            Xtr, Xte = (minmax if args.scaling == "minmax" else standard)(X[tr], X[te])
            for method in args.methods:
                key = _key(
                    {
                        "dataset": name,
                        "run": run_,
                        "fold": fold,
                        "method": method,
                        "simulations": args.simulations,
                        "validation": args.validation,
                    }
                )
                if key in done:
                    continue
                t0, c0 = time.perf_counter(), time.process_time()
                support, extra = select(method, Xtr, y[tr], 1000 * run_ + fold, args)
                seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
                knn = KNeighborsClassifier(5).fit(Xtr[:, support], y[tr])
                acc = float(knn.score(Xte[:, support], y[te]))
                rec = {
                    "dataset": name,
                    "run": run_,
                    "fold": fold,
                    "method": method,
                    "simulations": args.simulations,
                    "validation": args.validation,
                    "accuracy": acc,
                    "n_features": int(support.sum()),
                    "seconds": seconds,
                    "cpu_seconds": cpu,
                    "max_validation_samples": args.max_validation_samples,
                    **extra,
                }
                if args.scaling != "minmax":
                    rec["scaling"] = args.scaling
                if args.partition_seed is not None:
                    rec["partition_seed"] = args.partition_seed
                with out.open("a") as f:
                    f.write(json.dumps(rec) + "\n")


def read_results(paths):
    """All result lines of ``paths`` (one JSON-lines file or several), duplicates dropped."""
    paths = [paths] if isinstance(paths, (str, Path)) else paths
    df = pd.concat([pd.read_json(p, lines=True) for p in paths], ignore_index=True)
    if "validation" not in df:
        df["validation"] = "loo"
    df["validation"] = df.validation.fillna("loo")
    keys = df.apply(lambda r: _key(r.to_dict()), axis=1)
    return df[~keys.duplicated()].reset_index(drop=True)


def paired_difference(df, a, b):
    """Mean test accuracy of method a minus method b over the (run, fold)s both ran, and their
    count."""
    acc = df.pivot_table(index=["run", "fold"], columns="method", values="accuracy")
    if a not in acc or b not in acc:
        return float("nan"), 0
    both = acc[[a, b]].dropna()
    return float((both[a] - both[b]).mean()), len(both)


def summary(path, simulations=None, validation="loo"):
    df = read_results(path)
    if simulations is not None:
        df = df[df.simulations == simulations]
    df = df[~df.method.isin(["rmotifs", "motifs"]) | (df.validation == validation)]
    rows = []
    for (name, method), g in df.groupby(["dataset", "method"], sort=False):
        folds = g.groupby("run").fold.nunique()
        g = g[g.run.isin(folds[folds == folds.max()].index)]  # only runs with all their folds
        per_run = g.groupby("run").accuracy.mean()
        rows.append(
            {
                "dataset": name,
                "method": method,
                "runs": g.run.nunique(),
                "folds": len(g),
                "accuracy": per_run.mean(),
                "std_runs": per_run.std(ddof=0),
                "n_features": g.n_features.mean(),
                "sec_per_fold": g.seconds.mean(),
                "wall_total": g.seconds.sum(),
                "cpu_per_fold": g.cpu_seconds.mean() if "cpu_seconds" in g else float("nan"),
            }
        )
    table = pd.DataFrame(rows)
    lines = [
        f"R-MOTiFS / MOTiFS reward validation: {validation}",
        "",
        (
            "| data set | paper R-MOTiFS | R-MOTiFS here | MOTiFS here (paper) | forward SFS | "
            "all features | CPU s per fold: R-MOTiFS, MOTiFS, SFS "
            "| wall s per data set (all methods) "
            "| runs x folds |"
        ),
        "|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts = [
        (
            "| data set | R-MOTiFS - paper | features here vs paper | R-MOTiFS - forward SFS "
            "(paired, on the folds both ran) | verdict |"
        ),
        "|---|---|---|---|---|",
    ]
    for name in table.dataset.unique():
        t = table[table.dataset == name].set_index("method")

        def cell(m, std=False, t=t):
            if m not in t.index:
                return "-"
            r = t.loc[m]
            spread = f" ± {r.std_runs:.3f}" if std and r.runs > 1 else ""
            return f"{r.accuracy:.3f}{spread} / {r.n_features:.1f}"

        p = PAPER.get(name)
        paper = f"{p[0][0]:.3f} ± {p[0][1]:.3f} / {p[0][2]}" if p else "-"
        motifs = cell("motifs") + (f" ({p[1][0]:.3f} / {p[1][1]})" if p else "")
        cpu = ", ".join(
            f"{t.loc[m].cpu_per_fold:.1f}" if m in t.index else "-"
            for m in ("rmotifs", "motifs", "sfs")
        )
        shape = ", ".join(
            f"{m} {int(t.loc[m].runs)}x{int(t.loc[m].folds / max(t.loc[m].runs, 1))}"
            for m in ("rmotifs", "motifs", "sfs", "all")
            if m in t.index
        )
        lines.append(
            f"| {name} | {paper} | {cell('rmotifs', True)} | {motifs} | {cell('sfs')} | "
            f"{cell('all')} | {cpu} | {t.wall_total.sum():.0f} | {shape} |"
        )
        if p and "rmotifs" in t.index:
            r = t.loc["rmotifs"]
            d_paper = r.accuracy - p[0][0]
            d_sfs, n_common = paired_difference(df[df.dataset == name], "rmotifs", "sfs")
            met = d_paper >= -0.01 and r.n_features <= p[0][2]
            verdicts.append(
                f"| {name} | {d_paper:+.3f} | {r.n_features:.1f} vs {p[0][2]} | "
                f"{d_sfs:+.3f} ({n_common} folds) | {'met' if met else 'missed'} / "
                f"{'above' if d_sfs > 0 else 'not above'} forward |"
            )
    return "\n".join(lines + [""] + verdicts)


def plot(path, png, simulations=None, validation="loo"):
    """Accuracy against number of selected features, one panel per data set: every method's
    mean (runs x folds) with the paper's R-MOTiFS and MOTiFS points, and R-MOTiFS's reward
    (validated on the training folds) beside its test accuracy: the optimism of the search."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    df = read_results(path)
    if simulations is not None:
        df = df[df.simulations == simulations]
    df = df[~df.method.isin(["rmotifs", "motifs"]) | (df.validation == validation)]
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    order = ["wdbc", "ionosphere", "sonar", "spambase", "spect", "german"]
    names = sorted(dict.fromkeys(df.dataset), key=lambda n: order.index(n) if n in order else 99)
    ncols = min(3, len(names))
    nrows = -(-len(names) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 3.3 * nrows), squeeze=False)
    flat = axes.ravel()
    style = {
        "rmotifs": ("R-MOTiFS", "C0"),
        "motifs": ("MOTiFS", "C1"),
        "sfs": ("forward SFS", "C2"),
        "all": ("all features", "C7"),
    }
    for ax, name in zip(flat, names):
        g = df[df.dataset == name]
        for method, (label, color) in style.items():
            m = g[g.method == method]
            if len(m):
                ax.scatter(m.n_features.mean(), m.accuracy.mean(), color=color, label=label, s=40)
        r = g[g.method == "rmotifs"]
        if len(r) and "reward" in r:
            ax.scatter(
                r.n_features.mean(),
                r.reward.mean(),
                color="C0",
                marker="^",
                s=40,
                facecolors="none",
                label="R-MOTiFS reward",
            )
        if name in PAPER:
            p = PAPER[name]
            ax.scatter(p[0][2], p[0][0], color="C0", marker="x", s=60, label="paper R-MOTiFS")
            ax.scatter(p[1][1], p[1][0], color="C1", marker="x", s=60, label="paper MOTiFS")
        ax.set_title(f"{name} ({g.run.nunique()} runs)")
        ax.set_xscale("log")
        ax.set_xticks([2, 5, 10, 20, 50])
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("selected features (log)")
        ax.set_ylabel("accuracy")
    for ax in flat[len(names) :]:
        ax.axis("off")
    handles = {}
    for ax in flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.legend(handles.values(), handles.keys(), loc="lower center", ncol=len(handles), fontsize=8)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    fig.savefig(png, dpi=110)


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--datasets",
        nargs="+",
        default=["wdbc", "ionosphere", "sonar", "spambase"],
        choices=sorted(LOADERS),
    )
    ap.add_argument(
        "--methods",
        nargs="+",
        default=["all", "sfs", "motifs", "rmotifs"],
        choices=["all", "sfs", "motifs", "rmotifs"],
    )
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--fold-from", type=int, default=0, help="start at this fold of each run")
    ap.add_argument(
        "--run-from",
        type=int,
        default=0,
        help="start at this run (split a long protocol over processes)",
    )
    ap.add_argument(
        "--folds", type=int, default=10, help="run only the first N of the 10 folds of each run"
    )
    ap.add_argument(
        "--scaling",
        default="minmax",
        choices=["minmax", "standard"],
        help="preprocessing of the whole pipeline (selection and the scoring 5-NN), "
        "fitted on the training folds; not minmax: write to its own --out file",
    )
    ap.add_argument(
        "--partition-seed",
        type=int,
        default=None,
        help="every run uses the 10-fold partition of this seed (only the search seed "
        "changes from run to run); default: run r uses partition seed r. Write "
        "these results to their own --out file",
    )
    ap.add_argument("--simulations", type=int, default=1000)
    ap.add_argument(
        "--validation",
        default="loo",
        help="reward validation of R-MOTiFS / MOTiFS: loo, kfold:K, kfold:KxR, holdout:P",
    )
    ap.add_argument(
        "--max-validation-samples",
        type=int,
        default=None,
        help="bound the LOO reward to this many query rows (default: all, as the paper)",
    )
    ap.add_argument("--out", default="/tmp/r_motifs_bench/results.jsonl")
    ap.add_argument("--summary", action="store_true", help="only print the table from --out")
    ap.add_argument("--plot", help="also draw accuracy against features to this PNG")
    ap.add_argument(
        "--inputs", nargs="+", help="with --summary: read these result files (not --out)"
    )
    args = ap.parse_args()
    if not args.summary:
        run(args)
    results = args.inputs if args.summary and args.inputs else args.out
    print(summary(results, args.simulations, args.validation))
    if args.plot:
        plot(results, args.plot, args.simulations, args.validation)


if __name__ == "__main__":
    main()
