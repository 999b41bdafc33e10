"""5-NN with all features under different preprocessings, 10-fold CV (scalers fitted on the 9
training folds): does the unstated "preprocess" of Algorithm 1 move the baseline that Table 3's
accuracies build on? Cheap; prints one table (bench/r_motifs/README.md, section 3b).

    nice -n 10 python -m bench.r_motifs.scaling --runs 5
"""

from __future__ import annotations

import argparse

import numpy as np
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import FunctionTransformer, MinMaxScaler, StandardScaler

from bench.r_motifs.table3 import LOADERS

SCALINGS = {
    "min-max": MinMaxScaler,
    "standard": StandardScaler,
    "none": lambda: FunctionTransformer(),
    "log1p + min-max": lambda: make_pipeline(
        FunctionTransformer(lambda X: np.sign(X) * np.log1p(np.abs(X))), MinMaxScaler()
    ),
}


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--datasets",
        nargs="+",
        default=["wdbc", "ionosphere", "sonar", "spambase", "spect", "german"],
    )
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    print("| data set | " + " | ".join(SCALINGS) + " |")
    print("|---|" + "---|" * len(SCALINGS))
    for name in args.datasets:
        X, y = LOADERS[name]()
        cells = []
        for make in SCALINGS.values():
            accs = [
                cross_val_score(
                    make_pipeline(make(), KNeighborsClassifier(5)),
                    X,
                    y,
                    cv=StratifiedKFold(10, shuffle=True, random_state=r),
                ).mean()
                for r in range(args.runs)
            ]
            cells.append(f"{np.mean(accs):.3f}")
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
