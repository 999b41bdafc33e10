"""Time MEPSI pruning 200 -> 20 trees per data set (issue target: at most 60 s on 2 cores).

One forest per data set (Table S1 ccp_alpha, or ``--ccp 0`` for unpruned trees), MEPSI with the
paper's C (Table S3) or ``--C``, the error term on the training set or (``--prune-on oob``) on
each tree's out-of-bag samples. Reports wall-clock and CPU seconds of one fresh MEPSI fit (CPU
time is the figure to compare when the machine is shared; it includes numba's compilation,
about 1 s, on the first data set), the CPU seconds of the whole TED matrix alone with the
compiled kernel, and the number of TEDs the fit computed. Reduce-error ordering is timed
beside it as the peer.

    nice -n 10 python bench/mepsi_timing.py
    nice -n 10 python bench/mepsi_timing.py --ccp 0 --prune-on oob
"""

from __future__ import annotations

import argparse
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
    forest_oob_predictions,
    forest_predictions,
    from_sklearn_forest,
    reduce_error,
    ted_matrix,
)


def clocks():
    return time.perf_counter(), time.process_time()


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--datasets", default=",".join(TABLE))
    p.add_argument("--ccp", type=float, default=None)
    p.add_argument("--esm-samples", type=int, default=200)
    p.add_argument("--C", type=float, default=None, help="override Table S3's C")
    p.add_argument("--prune-on", choices=["train", "oob"], default="train")
    p.add_argument("--backend", choices=["auto", "numba", "numpy"], default="auto")
    a = p.parse_args(argv)
    rows = []
    for name in tqdm(a.datasets.split(","), desc="mepsi timing"):
        X, y, split = load(name)
        if split is not None:
            Xtr, ytr = X[~split], y[~split]
        else:
            Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.3, random_state=0)
        alpha = TABLE[name][3] if a.ccp is None else a.ccp
        rf = RandomForestClassifier(
            200, criterion="entropy", ccp_alpha=alpha, random_state=0, n_jobs=1
        ).fit(Xtr, ytr)
        trees = from_sklearn_forest(rf)
        if a.prune_on == "oob":
            P = forest_oob_predictions(rf, Xtr)
        else:
            P = forest_predictions(rf, Xtr, scores=True)
        yc = np.searchsorted(rf.classes_, ytr)
        C = TABLE[name][4] if a.C is None else a.C
        w0, c0 = clocks()
        m = MEPSI(
            k=20, C=C, n_esm_samples=a.esm_samples, ted_backend=a.backend, random_state=0
        ).fit(trees, P, yc)
        w1, c1 = clocks()
        reduce_error(P, yc, 20)
        w2, c2 = clocks()
        ted_matrix(trees, backend=a.backend)
        ted_cpu = time.process_time() - c2
        nodes = np.mean([t.n_nodes for t in trees])
        rows.append(
            (
                name,
                nodes,
                len(ytr),
                w1 - w0,
                c1 - c0,
                m.ted_evaluations_,
                w2 - w1,
                c2 - c1,
                ted_cpu,
            )
        )
        print(
            f"{name}: MEPSI wall {w1 - w0:.1f}s cpu {c1 - c0:.1f}s TEDs {m.ted_evaluations_}"
            f" (full matrix {ted_cpu:.1f}s cpu), nodes {nodes:.1f}",
            flush=True,
        )
    print(
        "| data | mean internal nodes | m (pruning set) | MEPSI wall s | MEPSI CPU s | TEDs computed | OA-RE wall s | OA-RE CPU s | all 19,900 TEDs CPU s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r[0]} | {r[1]:.1f} | {r[2]} | {r[3]:.1f} | {r[4]:.1f} | {r[5]} | {r[6]:.2f} | {r[7]:.2f} | {r[8]:.1f} |"
        )


if __name__ == "__main__":
    main()
