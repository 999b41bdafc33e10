"""Speed of the R-MOTiFS reward: leave-one-out 5-NN accuracy of random feature subsets.

Compares, on the same random subsets (about half the columns each, as the default policy
draws them, or --share) and the same rows:
- sklearn-LOO: cross_val_score(KNeighborsClassifier(5), X[:, S], y, cv=LeaveOneOut()),
  the plain scikit-learn way (only a few subsets: it is slow);
- sklearn-kneighbors: one KNeighborsClassifier fit per subset, kneighbors(k + 1) on the
  training rows, self dropped: the clever scikit-learn way;
- previous: KNNReward as of commit PREVIOUS (BLAS Gram matrix + numpy.argpartition up to
  ~550 rows, scikit-learn's chunked k-nearest search above), loaded from git;
- KNNReward "direct" (compiled per-feature streaming sum + k-slot insertion, no n x n matrix),
  "gram" (BLAS blocks + the same compiled k-slot search) and "auto" (the default: "direct" up
  to 4 columns, "gram" above).
Accuracies are compared (they differ only where exact distance ties are broken differently);
times are CPU time per subset, one BLAS thread. --fit also times RMOTiFS(random_state=0).fit
on all rows (S = 1000) with the current and the previous reward.

    nice -n 10 python -m bench.r_motifs.reward_speed --fit
"""

from __future__ import annotations

import argparse
import subprocess
import time
import types

import numpy as np
from sklearn.model_selection import LeaveOneOut, cross_val_score
from sklearn.neighbors import KNeighborsClassifier

from bench.common.paths import ROOT
from bench.r_motifs.table3 import LOADERS, minmax
from online.selection import r_motifs
from online.selection.knn_reward import KNNReward

PREVIOUS = "2cd0901"  # last commit with the argpartition / scikit-learn search reward


def previous_reward_class():
    """KNNReward of commit PREVIOUS, or None without git."""
    try:
        src = subprocess.run(
            ["git", "show", f"{PREVIOUS}:online/selection/knn_reward.py"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    module = types.ModuleType("previous_knn_reward")
    exec(compile(src, f"{PREVIOUS}:knn_reward.py", "exec"), module.__dict__)  # noqa: S102 (our own file from git)
    return module.KNNReward


def sklearn_kneighbors_loo(X, y, k=5):
    knn = KNeighborsClassifier(k).fit(X, y)
    idx = knn.kneighbors(X, n_neighbors=k + 1, return_distance=False)
    idx = np.array([row[row != i][:k] for i, row in enumerate(idx)])
    codes = np.searchsorted(knn.classes_, y)
    votes = np.eye(len(knn.classes_), dtype=int)[codes][idx].sum(axis=1)
    return float(np.mean(votes.argmax(axis=1) == codes))


def timed(fn, masks):
    t0 = time.process_time()  # CPU time: the machine is shared, wall time is noise
    values = [fn(m) for m in masks]
    return (time.process_time() - t0) / len(masks), values


def fit_cpu(X, y, reward_class=None):
    """CPU seconds of one RMOTiFS(random_state=0).fit, optionally with another reward class."""
    saved = r_motifs.KNNReward
    if reward_class is not None:  # the previous class has no validation / random_state
        r_motifs.KNNReward = lambda X, y, n_neighbors, validation, queries, random_state: (
            reward_class(X, y, n_neighbors=n_neighbors, queries=queries)
        )
    try:
        t0 = time.process_time()
        sel = r_motifs.RMOTiFS(random_state=0).fit(X, y)
        return time.process_time() - t0, sel
    finally:
        r_motifs.KNNReward = saved


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=["sonar", "ionosphere", "wdbc", "german"])
    ap.add_argument("--subsets", type=int, default=30)
    ap.add_argument("--share", type=float, default=0.5, help="chance of each column in a subset")
    ap.add_argument("--fit", action="store_true", help="also time whole fits (S = 1000)")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    Previous = previous_reward_class()
    for method in ("direct", "gram"):  # compile the kernels before any timing
        KNNReward(np.eye(6), np.arange(6) % 2, method=method)(np.ones(6, dtype=bool))
    print(
        f"subsets: {args.subsets} random, each column with chance {args.share}; CPU ms per subset"
    )
    print()
    print(
        "| data set | rows x features | sklearn LOO | sklearn kneighbors | previous | direct "
        "| gram "
        "| auto | auto vs previous | auto vs kneighbors | same accuracy as kneighbors |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    fits = []
    for name in args.datasets:
        X, y = LOADERS[name]()
        X, _ = minmax(X, X)
        n, d = X.shape
        masks = [m for m in (rng.random(d) < args.share for _ in range(args.subsets)) if m.any()]
        t_direct, _ = timed(KNNReward(X, y, method="direct", cache=False), masks)
        t_gram, _ = timed(KNNReward(X, y, method="gram", cache=False), masks)
        t_auto, v_auto = timed(KNNReward(X, y, cache=False), masks)
        t_knb, v_knb = timed(lambda m, X=X, y=y: sklearn_kneighbors_loo(X[:, m], y), masks)
        t_prev = timed(Previous(X, y, cache=False), masks)[0] if Previous else float("nan")
        loo = "-"
        if n <= 600:
            few = masks[:2]
            t_loo, _ = timed(
                lambda m, X=X, y=y: cross_val_score(
                    KNeighborsClassifier(5), X[:, m], y, cv=LeaveOneOut()
                ).mean(),
                few,
            )
            loo = f"{t_loo * 1e3:.0f}"
        agree = np.mean(np.isclose(v_knb, v_auto))
        print(
            f"| {name} | {n} x {d} | {loo} | {t_knb * 1e3:.2f} | {t_prev * 1e3:.2f} | "
            f"{t_direct * 1e3:.2f} | {t_gram * 1e3:.2f} | {t_auto * 1e3:.2f} | "
            f"{t_prev / t_auto:.1f}x | {t_knb / t_auto:.1f}x | {agree:.0%} |"
        )
        if args.fit:
            cpu_now, sel_now = fit_cpu(X, y)
            cpu_prev, sel_prev = fit_cpu(X, y, Previous) if Previous else (float("nan"), None)
            fits.append((name, cpu_now, cpu_prev, sel_now, sel_prev))
    if fits:
        print()
        print(
            "| data set | fit CPU s now | fit CPU s previous | ratio "
            "| evaluations (cache hits) now | "
            "features now / previous |"
        )
        print("|---|---|---|---|---|---|")
        for name, cpu_now, cpu_prev, sel_now, sel_prev in fits:
            prev_nf = len(sel_prev.selected_features_) if sel_prev is not None else "-"
            print(
                f"| {name} | {cpu_now:.2f} | {cpu_prev:.2f} | {cpu_prev / cpu_now:.1f}x | "
                f"{sel_now.n_evaluations_} ({sel_now.n_cache_hits_}) | "
                f"{len(sel_now.selected_features_)} / {prev_nf} |"
            )


if __name__ == "__main__":
    main()
