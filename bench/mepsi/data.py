"""Data sets of MEPSI's Table 1 (Table S1 splits and ccp_alpha, Table S3 C) as numeric arrays.

Categorical columns become ordinal codes (categories sorted), missing values (``?``) NaN, which
scikit-learn's random forest accepts. Each loader returns ``(X, y, split)`` where ``split`` is a
boolean test mask for data sets with a default split, else ``None`` (random 30 % test split).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from bench.common.paths import DATA

# name -> (file, target, dropped columns, ccp_alpha of Table S1, C of Table S3)
TABLE = {
    "digits": (None, None, (), 0.2, 0.8),
    "breast_cancer": ("breast_cancer_ljubljana", "Class", (), 0.1, 0.5),
    "vowel": ("vowel", "class", ("train_or_test", "speaker", "sex"), 0.2, 0.75),
    "mfeat_factors": ("mfeat_factors", "digit", (), 0.2, 0.75),
    "splice": ("splice", "class", ("instance_name",), 0.2, 0.75),
    "credit_a": ("credit_a_crx", "A16", (), 0.2, 0.75),
    "tic_tac_toe": ("tic_tac_toe", "class", (), 0.05, 0.5),
    "vehicle": ("vehicle", "Class", (), 0.2, 0.75),
    "sick": ("sick_train", "Class", ("record_id",), 0.05, 0.5),
    "usps": ("usps", "label", (), 0.2, 0.8),
}


def load(name: str):
    file, target, drop, _, _ = TABLE[name]
    if file is None:
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        return X.astype(np.float64), y, None
    df = pd.read_csv(DATA / f"{file}.csv.gz", na_values=["?"])
    split = None
    if name == "vowel":  # Table S1: default split
        split = df["train_or_test"].to_numpy() == 1
    y = df[target].astype(str).to_numpy()
    cols = []
    for c in df.columns:
        if c == target or c in drop:
            continue
        col = df[c]
        if pd.api.types.is_numeric_dtype(col):
            cols.append(col.to_numpy(dtype=np.float64))
        else:
            cats = sorted(col.dropna().astype(str).unique())
            codes = col.map({v: i for i, v in enumerate(cats)})
            cols.append(codes.to_numpy(dtype=np.float64))
    return np.column_stack(cols), y, split
