"""Job kind ``feature-selection``: R-MOTiFS (``online.RMOTiFS``) on a table's columns.

Input: the columns to choose from (``features``, default every column but the target) and the
``target`` column (class labels). Output: the selected columns, the validated k-NN accuracy
with all features and with the selection, FSR (eq. 4 of the R-MOTiFS paper) and the history
of the recursions.

Encoding of the columns (the paper's data sets are numeric; logged contexts are not always):
numbers and booleans as they are, missing numbers filled with the column's median; text columns
one-hot (``column=value``, a missing value is its own category). A text column counts as
selected when any of its one-hot columns is. Rows without a target are dropped.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field

from service.jobs.dataset import Dataset, DatasetError, feature_columns
from service.jobs.params import JobParams

#: most distinct values of a text column (one-hot columns cost k-NN time)
MAX_CATEGORIES = 200


class FeatureSelectionParams(JobParams):
    """Parameters of ``feature-selection`` (R-MOTiFS's defaults are the paper's)."""

    target: str = Field(min_length=1, description="column holding the class labels")
    features: list[str] | None = Field(
        default=None, min_length=1, description="input columns (default: all but the target)"
    )
    n_simulations: int = Field(default=1000, ge=1, le=100_000, description="S per recursion")
    c: float = Field(default=0.1, gt=0, description="C of the UCT, eq. (2)")
    n_neighbors: int = Field(default=5, ge=1, le=100, description="k of the k-NN reward")
    validation: str = Field(
        default="loo", pattern=r"^(loo|kfold:\d+(x\d+)?|holdout:0?\.\d+)$",
        description="how the reward validates k-NN: loo, kfold:K, kfold:KxR or holdout:P",
    )
    recursive: bool = Field(default=True, description="R-MOTiFS (True) or MOTiFS (False)")
    max_recursions: int | None = Field(default=None, ge=1)
    max_rows: int | None = Field(
        default=5000, ge=10, description="rows drawn at random (seeded) if there are more"
    )
    max_validation_samples: int | None = Field(default=None, ge=10)
    random_state: int | None = Field(default=0)


def _encode(frame: pd.DataFrame, columns: list[str]) -> tuple[np.ndarray, list[str], list[str]]:
    """X as float64, the name of each X column and the input column it comes from."""
    parts, names, origins = [], [], []
    for col in columns:
        series = frame[col]
        if pd.api.types.is_bool_dtype(series) or pd.api.types.is_numeric_dtype(series):
            values = series.astype("float64")
            if values.isna().all():
                raise DatasetError(f"column {col!r} has no values")
            if not np.isfinite(values.dropna()).all():
                raise DatasetError(f"column {col!r} holds infinite values")
            parts.append(values.fillna(values.median()).to_numpy()[:, None])
            names.append(col)
            origins.append(col)
            continue
        text = series.astype("string")
        if text.nunique(dropna=False) > MAX_CATEGORIES:
            raise DatasetError(
                f"column {col!r} is text with more than {MAX_CATEGORIES} distinct values: "
                f"leave it out of 'features' or encode it as numbers"
            )
        dummies = pd.get_dummies(text, prefix=col, prefix_sep="=", dummy_na=text.isna().any())
        parts.append(dummies.to_numpy(dtype="float64"))
        names += [str(c) for c in dummies.columns]
        origins += [col] * dummies.shape[1]
    return np.hstack(parts), names, origins


def _labels(series: pd.Series, target: str) -> np.ndarray:
    if pd.api.types.is_float_dtype(series):
        values = series.to_numpy(dtype="float64")
        if not np.all(values == np.round(values)):
            raise DatasetError(
                f"target {target!r} has continuous values: feature-selection needs class labels"
            )
        return values.astype(np.int64)
    if pd.api.types.is_bool_dtype(series) or pd.api.types.is_integer_dtype(series):
        return series.to_numpy().astype(np.int64)
    return series.astype("string").to_numpy(dtype=object).astype(str)


_VALIDATION_NAMES = {"loo": "leave-one-out", "kfold": "stratified k-fold", "holdout": "holdout"}


def run(params: FeatureSelectionParams, dataset: Dataset, progress) -> dict[str, Any]:
    from online import RMOTiFS  # scikit-learn is imported by the worker only

    frame = dataset.frame
    columns = feature_columns(frame, params.target, params.features)
    rows_given = int(frame.shape[0])
    frame = frame[frame[params.target].notna()]
    if params.max_rows is not None and frame.shape[0] > params.max_rows:
        frame = frame.sample(n=params.max_rows, random_state=params.random_state or 0)
    X, names, origins = _encode(frame, columns)
    y = _labels(frame[params.target], params.target)
    n_classes = len(np.unique(y))
    if n_classes < 2:
        raise DatasetError(f"target {params.target!r} has {n_classes} class: need at least 2")
    if X.shape[0] <= params.n_neighbors:
        raise DatasetError(
            f"{X.shape[0]} rows with a target: need more than n_neighbors={params.n_neighbors}"
        )
    progress(0.0, f"R-MOTiFS on {X.shape[0]} rows, {X.shape[1]} features, {n_classes} classes")

    selector = RMOTiFS(
        n_simulations=params.n_simulations,
        c=params.c,
        n_neighbors=params.n_neighbors,
        validation=params.validation,
        recursive=params.recursive,
        max_recursions=params.max_recursions,
        max_validation_samples=params.max_validation_samples,
        progress=progress,
        random_state=params.random_state,
    ).fit(X, y)

    def columns_of(indices) -> list[str]:
        return [names[i] for i in indices]

    selected = columns_of(selector.selected_features_)
    chosen = set(selector.selected_features_.tolist())
    return {
        "target": params.target,
        "selectedFeatures": selected,
        "selectedColumns": [c for c in columns if any(origins[i] == c for i in chosen)],
        "nFeatures": len(names),
        "nSelected": len(selected),
        "accuracyAllFeatures": selector.all_features_accuracy_,
        "accuracySelected": selector.accuracy_,
        "fsr": selector.fsr_,
        "validation": f"{_VALIDATION_NAMES[params.validation.partition(':')[0]]} "
        f"({params.validation}) {params.n_neighbors}-NN accuracy on the rows used (min-max scaled)",

        "rows": rows_given,
        "rowsUsed": int(X.shape[0]),
        "classes": n_classes,
        "history": [
            {
                "recursion": int(h["recursion"]),
                "nInputFeatures": int(h["n_input_features"]),
                "features": columns_of(h["subset"]),
                "accuracy": float(h["accuracy"]),
                "accepted": bool(h["accepted"]),
            }
            for h in selector.history_
        ],
        "nEvaluations": int(selector.n_evaluations_),
        "nCacheHits": int(selector.n_cache_hits_),
    }
