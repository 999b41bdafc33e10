"""Time MEPSI pruning 200 -> 20 trees per data set (issue target: at most 60 s on 2 cores).

One forest per data set (Table S1 ccp_alpha, or ``--ccp 0`` for unpruned trees), MEPSI with the
paper's C (Table S3). Reports wall-clock and CPU seconds of the process (CPU time is the
figure to compare when the machine is shared), split into the TED part and the rest, and the
number of TEDs computed. Reduce-error ordering is timed beside it as the peer.

    nice -n 10 python bench/mepsi_timing.py
    nice -n 10 python bench/mepsi_timing.py --ccp 0 --datasets tic_tac_toe,breast_cancer --esm-samples 2
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

from online.pruning import MEPSI, forest_predictions, from_sklearn_forest, reduce_error


def clocks():
    return time.perf_counter(), time.process_time()


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--datasets", default=",".join(TABLE))
    p.add_argument("--ccp", type=float, default=None)
    p.add_argument("--esm-samples", type=int, default=200)
    p.add_argument("--C", type=float, default=None, help="override Table S3's C")
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
        P = forest_predictions(rf, Xtr, scores=True)
        yc = np.searchsorted(rf.classes_, ytr)
        C = TABLE[name][4] if a.C is None else a.C
        w0, c0 = clocks()
        m = MEPSI(k=20, C=C, n_esm_samples=a.esm_samples, random_state=0).fit(
            trees, P, yc
        )
        w1, c1 = clocks()
        reduce_error(P, yc, 20)
        w2, c2 = clocks()
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
            )
        )
        print(
            f"{name}: MEPSI wall {w1 - w0:.1f}s cpu {c1 - c0:.1f}s TEDs {m.ted_evaluations_}",
            flush=True,
        )
    print(
        "| data | mean internal nodes | m (pruning set) | MEPSI wall s | MEPSI CPU s | TEDs computed | OA-RE wall s | OA-RE CPU s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r[0]} | {r[1]:.1f} | {r[2]} | {r[3]:.1f} | {r[4]:.1f} | {r[5]} | {r[6]:.2f} | {r[7]:.2f} |"
        )


if __name__ == "__main__":
    main()
