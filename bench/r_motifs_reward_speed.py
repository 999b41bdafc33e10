"""Speed of the R-MOTiFS reward: leave-one-out 5-NN accuracy of random feature subsets.

Compares, on the same random subsets (about half the columns each, as the default policy
draws them) and the same rows:
- sklearn-LOO: cross_val_score(KNeighborsClassifier(5), X[:, S], y, cv=LeaveOneOut()),
  the plain scikit-learn way (only a few subsets: it is slow);
- sklearn-kneighbors: one KNeighborsClassifier fit per subset, kneighbors(k + 1) on the
  training rows, self dropped: the clever scikit-learn way;
- KNNReward "gram", "sum" (precomputed per-feature distance matrices) and "auto" (the
  default: "gram" on small data, scikit-learn's chunked k-nearest search on large).
All give the same accuracy (checked here); times are CPU time per subset, one BLAS thread.

    nice -n 10 python bench/r_motifs_reward_speed.py
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import time

import numpy as np
from r_motifs_table3 import LOADERS, minmax
from sklearn.model_selection import LeaveOneOut, cross_val_score
from sklearn.neighbors import KNeighborsClassifier

from online.selection.knn_reward import KNNReward


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", nargs="+", default=["sonar", "ionosphere", "wdbc", "spambase"])
    ap.add_argument("--subsets", type=int, default=30)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print("| data set | rows x features | sklearn LOO | sklearn kneighbors | KNNReward sum | KNNReward gram "
          "| KNNReward auto | auto vs kneighbors |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.datasets:
        X, y = LOADERS[name]()
        X, _ = minmax(X, X)
        n, d = X.shape
        masks = [rng.random(d) < 0.5 for _ in range(args.subsets)]
        t_gram, v_gram = timed(KNNReward(X, y, method="gram", cache=False), masks)
        auto = KNNReward(X, y, cache=False)
        t_auto, v_auto = timed(auto, masks)
        t_knb, v_knb = timed(lambda m, X=X, y=y: sklearn_kneighbors_loo(X[:, m], y), masks)
        cells = {}
        if d * n * n * 8 <= 2**30:
            t_sum, v_sum = timed(KNNReward(X, y, method="sum", cache=False), masks)
            assert np.allclose(v_sum, v_gram)
            cells["sum"] = f"{t_sum * 1e3:.1f} ms"
        if n <= 600:
            few = masks[:2]
            t_loo, v_loo = timed(lambda m, X=X, y=y: cross_val_score(KNeighborsClassifier(5), X[:, m], y,
                                                           cv=LeaveOneOut()).mean(), few)
            assert np.allclose(v_loo, v_gram[:2])
            cells["loo"] = f"{t_loo * 1e3:.0f} ms"
        agree = np.mean(np.isclose(v_knb, v_auto))
        print(f"| {name} | {n} x {d} | {cells.get('loo', '-')} | {t_knb * 1e3:.1f} ms | "
              f"{cells.get('sum', '-')} | {t_gram * 1e3:.1f} ms | {t_auto * 1e3:.1f} ms ({auto.method}) | "
              f"{t_knb / t_auto:.1f}x (same accuracy on {agree:.0%} of subsets) |")


if __name__ == "__main__":
    main()
