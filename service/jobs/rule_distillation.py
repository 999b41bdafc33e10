"""Job kind ``rule-distillation``: RuDi (``online.RuDi``, Zhang et al., CIKM 2022) explains a
black-box score with a few weighted rules a person reads, in two modes.

The mode follows the job's input:

**Uploaded data** (one CSV / Parquet file; the job machinery takes one file per job): one row
per event with an entity id column (``entity``), optionally an order / timestamp column
(``order``, orders each entity's events, not a feature), categorical and numeric event columns,
and the teacher's score of each entity in a column named by ``scores``. The score is the
entity's, so it is given on the entity's event rows: repeated on each row, or on some rows
only (the other rows empty); the non-empty values of an entity must agree. Optional ``labels``
(a 0/1 column given the same way) give the AUC. The score and label columns are never features
(the rules would read the answer). ``features`` restricts the event columns RuDi may use.

**An app's logged events** (``{"app": ..., "last": N}``, ``action`` in the params): when does
the app's policy choose ``action``? Each logged decision is an entity whose sequence has one
event, its context (the features of the logged context; ``action``, ``reward`` and
``probability`` are the log's, not features); the teacher score of a decision is the
probability that the app's *current* model chooses ``action`` in that context: the model of
the app's latest snapshot (``dataset.store.load_snapshot``, loaded with
``service.models.model_kind(kind).load``, as the trainer does), asked to decide over the app's
actions. For a Bandit Forest this is ``decide(x).probabilities[action]``: the greedy vote's
share plus the exploration share, a deterministic function of the state (only the drawn action
is random). With sequences of length one the statistics reduce to the context's own values
(``Select age``, ``Select device=ios``, ...), so the rules read as conditions on the context.

The result (both modes): the rules in words with weight, support (share of the fitted entities
a rule holds for) and literal count, ``rulesText`` (Table 5's layout), the K statistics with
their correlation to the teacher (eq. 5) and the partial correlation they were chosen with
(eqs. 8-9), the multiple correlation of all K, fidelity (the pairwise agreement of sec. 4.3)
on the fitted entities and on held-out ones, the AUC against the labels when given, and the
time of each stage.

Choices where the paper or the issue is silent
----------------------------------------------
- One file: the machinery accepts one uploaded file per job, so scores (and labels) are columns
  of the events file, repeated per event row, rather than a second file. This needs no change
  to the upload route; a teacher-scores table is joined by the user with one ``merge``.
- Held-out fidelity: a random ``test_size`` of the entities (default 0.2) is left out of the
  fit, and fidelity (and AUC) are also measured on them with the fitted rules
  (``RuDi.score``). ``test_size = 0`` fits on all entities and reports in-sample figures only.
  The paper reports fidelity on held-out data (sec. 4.3); in-sample fidelity is reported too
  because it is what the printed rules achieve on the data they describe.
- Live mode: the entity of a decision is its position in the log (oldest first); the app's
  action inventory is the candidate set (logged events do not record the actions offered per
  request); a context feature missing from a decision is NaN in the table, which RuDi reads as
  0 for a number and as the category ``"nan"`` otherwise. The model is the latest snapshot's,
  the contexts are the newest ``last`` logged ones: the rules explain the policy as it is now,
  on the traffic it has seen. No labels in this mode.
- Defaults of RuDi's parameters are the paper's (Table 2), as in ``online.RuDi``; the search
  costs K x D x B x n_simulations statistic evaluations whatever the number of entities.
- A teacher score that is equal for every entity explains nothing: the job fails and says so
  (for a live forest this happens while it is still in its warm-up).
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pandas as pd
from pydantic import Field, field_validator

from service.jobs.dataset import Dataset, DatasetError, context_names
from service.jobs.dataset import contexts as logged_contexts
from service.jobs.params import JobParams

#: parameters that only make sense for one of the modes
UPLOAD_ONLY = ("entity", "order", "scores", "labels")
LIVE_ONLY = ("action",)
#: the entity column of the live mode (one decision per entity)
DECISION = "decision"


class RuleDistillationParams(JobParams):
    """Parameters of ``rule-distillation`` (see the module for which apply to which mode).

    The paper's one-letter names (K, D, R, B, H, L) are given in capitals, as in Table 2."""

    # uploaded data
    entity: str | None = Field(default=None, min_length=1, description="entity id column")
    order: str | None = Field(
        default=None, min_length=1, description="order / timestamp column (not a feature)"
    )
    scores: str | None = Field(
        default=None, min_length=1, description="teacher score column (the entity's, per row)"
    )
    labels: str | None = Field(
        default=None, min_length=1, description="optional 0/1 label column (gives the AUC)"
    )
    # an app's logged events
    action: str | None = Field(
        default=None, min_length=1, description="explain when the app's policy chooses this"
    )
    # both
    features: list[str] | None = Field(
        default=None, min_length=1, description="event / context columns RuDi may use"
    )
    categorical: list[str] | None = Field(
        default=None, description="columns to treat as categorical even if numeric"
    )
    operators: list[str] | None = Field(
        default=None, min_length=1, description="built-in operators to keep (names or prefixes)"
    )
    K: int = Field(alias="K", default=20, ge=1, le=200, description="statistics (MCTS-SG)")
    D: int = Field(alias="D", default=4, ge=1, le=10, description="maximum operators per statistic")
    R: int = Field(alias="R", default=20, ge=2, le=200, description="rules (even: R/2 AND, R/2 OR)")
    B: int = Field(
        alias="B", default=128, ge=2, le=100_000, description="entities per MCTS-SG reward"
    )
    n_simulations: int = Field(default=500, ge=1, le=100_000, description="MCTS-SG simulations")
    H: int = Field(
        alias="H", default=20, ge=1, le=2000, description="neurons per hidden logical layer"
    )
    L: int = Field(
        alias="L", default=2, ge=1, le=6, description="logical layers (rules of <= 2^L literals)"
    )
    epochs: int = Field(default=500, ge=1, le=100_000)
    batch_size: int = Field(default=128, ge=1, le=100_000)
    lr: tuple[float, float] = Field(default=(0.1, 0.001), description="Adam, start -> end")
    temperature: tuple[float, float] = Field(default=(1.0, 1e-4), description="start -> end")
    max_categories: int = Field(default=10, ge=1, le=1000)
    test_size: float = Field(
        default=0.2, ge=0, lt=1, description="held-out share of the entities (0: none)"
    )
    random_state: int = Field(default=0)

    @field_validator("R")
    @classmethod
    def _even(cls, value: int) -> int:
        if value % 2:
            raise ValueError("R must be even (R/2 conjunctions and R/2 disjunctions)")
        return value

    @field_validator("lr", "temperature")
    @classmethod
    def _positive(cls, value: tuple[float, float]) -> tuple[float, float]:
        if min(value) <= 0:
            raise ValueError("must be two positive numbers (start, end)")
        return value


def run(params: RuleDistillationParams, dataset: Dataset, progress) -> dict[str, Any]:
    live = dataset.source.get("type") == "events"
    wrong = [n for n in (UPLOAD_ONLY if live else LIVE_ONLY) if n in params.model_fields_set]
    if wrong:
        mode = "an app's logged events" if live else "uploaded data"
        raise DatasetError(f"parameters {wrong} do not apply to rule-distillation of {mode}")
    t0 = time.perf_counter()
    if live:
        events, entity, order, scores, labels, extra = _live(params, dataset, progress)
    else:
        events, entity, order, scores, labels, extra = _upload(params, dataset, progress)
    prepare_seconds = time.perf_counter() - t0
    result = _distil(params, events, entity, order, scores, labels, progress)
    result["timings"]["prepareSeconds"] = prepare_seconds
    result["timings"]["totalSeconds"] = time.perf_counter() - t0
    return {"mode": "live" if live else "upload", **extra, **result}


# -- inputs ------------------------------------------------------------------------------------
def _feature_columns(frame: pd.DataFrame, params, reserved: list[str]) -> list[str]:
    if params.features is None:
        columns = [c for c in frame.columns if c not in reserved]
    else:
        missing = [c for c in params.features if c not in frame.columns]
        if missing:
            raise DatasetError(
                f"feature columns {missing} are not in the data (columns: {list(frame.columns)})"
            )
        clash = [c for c in params.features if c in reserved]
        if clash:
            raise DatasetError(f"columns {clash} cannot be features (entity/order/score/label)")
        columns = list(params.features)
    if not columns:
        raise DatasetError("no feature columns for the statistics")
    return columns


def _per_entity(frame: pd.DataFrame, entity: str, column: str, what: str) -> pd.Series:
    """The one value of ``column`` per entity (its non-empty rows must agree)."""
    values = frame[column]
    if not pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values):
        converted = pd.to_numeric(values, errors="coerce")
        if converted.notna().sum() < values.notna().sum():
            raise DatasetError(f"{what} column {column!r} has non-numeric values")
        values = converted
    grouped = values.astype("float64").groupby(frame[entity], sort=True)
    lo, hi, count = grouped.min(), grouped.max(), grouped.count()
    none = count.index[count == 0].tolist()
    if none:
        raise DatasetError(f"{len(none)} entities have no {what} (e.g. {none[:3]})")
    clash = lo.index[(hi - lo).abs() > 1e-12 * np.maximum(1.0, hi.abs())].tolist()
    if clash:
        raise DatasetError(
            f"the {what} column {column!r} must hold one value per entity: {len(clash)} "
            f"entities have different values on their rows (e.g. {clash[:3]})"
        )
    return lo


def _upload(params: RuleDistillationParams, dataset: Dataset, progress):
    frame = dataset.frame
    if params.entity is None or params.scores is None:
        raise DatasetError(
            "rule-distillation of uploaded data needs 'entity' (the entity id column) and "
            "'scores' (the teacher score column)"
        )
    named = {
        "entity": params.entity,
        "order": params.order,
        "scores": params.scores,
        "labels": params.labels,
    }
    for role, column in named.items():
        if column is not None and column not in frame.columns:
            raise DatasetError(
                f"{role} column {column!r} is not in the data (columns: {list(frame.columns)})"
            )
    reserved = [c for c in named.values() if c is not None]
    if len(set(reserved)) < len(reserved):
        raise DatasetError(f"entity, order, scores and labels must be different columns: {named}")
    rows = int(frame.shape[0])
    frame = frame[frame[params.entity].notna()]
    if frame.shape[0] == 0:
        raise DatasetError(f"the entity column {params.entity!r} is empty")
    features = _feature_columns(frame, params, reserved)
    progress(0.02, f"{frame.shape[0]} events, {frame[params.entity].nunique()} entities")
    scores = _per_entity(frame, params.entity, params.scores, "scores")
    labels = None
    if params.labels is not None:
        labels = _per_entity(frame, params.entity, params.labels, "labels")
        if set(np.unique(labels.to_numpy()).tolist()) - {0.0, 1.0}:
            raise DatasetError(f"labels column {params.labels!r} must hold 0/1 values")
    keep = [params.entity] + ([params.order] if params.order else []) + features
    extra = {
        "entityColumn": params.entity,
        "orderColumn": params.order,
        "scoresColumn": params.scores,
        "labelsColumn": params.labels,
        "rows": rows,
        "rowsWithoutEntity": rows - int(frame.shape[0]),
    }
    return frame[keep].reset_index(drop=True), params.entity, params.order, scores, labels, extra


def _live(params: RuleDistillationParams, dataset: Dataset, progress):
    from service.models import WrongKind, model_kind

    store, app = dataset.store, dataset.app
    if store is None or app is None:
        raise DatasetError("rule-distillation of logged events needs the app's model store")
    if params.action is None:
        raise DatasetError(
            "rule-distillation of an app's logged events needs 'action' "
            "(explain when the app's policy chooses it)"
        )
    config = store.require_app(app)
    actions = config.action_ids
    if params.action not in actions:
        raise DatasetError(f"action {params.action!r} is not an action of app {app!r}: {actions}")
    kind = model_kind(config.policy_kind)
    try:
        decide = kind.require("decide", app)
    except WrongKind as exc:
        raise DatasetError(f"nothing to explain: {exc}") from None
    info, state = store.load_snapshot(app)
    model = kind.load(state)
    frame = dataset.frame
    names = context_names(frame)
    if not names:
        raise DatasetError(f"app {app!r}: the logged contexts have no features")
    contexts = logged_contexts(frame)
    n = len(contexts)
    progress(0.02, f"teacher: P({params.action!r}) of the model v{info.version} on {n} contexts")
    t0 = time.perf_counter()
    scores = np.empty(n)
    for i, x in enumerate(contexts):
        ranking = dict(decide(model, x, actions, []).ranking)
        scores[i] = ranking.get(params.action, 0.0)
        if i % 500 == 499:
            progress(0.02 + 0.08 * (i + 1) / n, f"teacher scores: {i + 1}/{n}")
    teacher_seconds = time.perf_counter() - t0
    events = frame[list(names)].rename(columns=names)
    if DECISION in events.columns:
        raise DatasetError(f"a context feature is named {DECISION!r}: rename it to explain")
    features = _feature_columns(events, params, [])
    events = events[features].copy()
    events.insert(0, DECISION, np.arange(n))
    extra = {
        "app": app,
        "action": params.action,
        "policyKind": config.policy_kind,
        "modelVersion": info.version,
        "events": n,
        "teacher": {
            "score": f"probability that the app's current model chooses {params.action!r}",
            "mean": float(scores.mean()),
            "min": float(scores.min()),
            "max": float(scores.max()),
            "seconds": teacher_seconds,
        },
    }
    return events, DECISION, None, pd.Series(scores, index=np.arange(n)), None, extra


# -- RuDi --------------------------------------------------------------------------------------
def _split(entities: np.ndarray, test_size: float, seed: int):
    n = len(entities)
    n_test = round(test_size * n)
    if test_size > 0 and (n_test < 2 or n - n_test < 2):
        raise DatasetError(
            f"{n} entities: too few to hold out a {test_size:g} share (set testSize to 0 "
            "to fit on all of them)"
        )
    if n_test == 0:
        return entities, entities[:0]
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(entities[order[n_test:]]), np.sort(entities[order[:n_test]])


def _distil(
    params, events: pd.DataFrame, entity: str, order, scores: pd.Series, labels, progress
) -> dict[str, Any]:
    from online.rules import RuDi

    entities = np.unique(events[entity].to_numpy())
    if len(entities) < 2:
        raise DatasetError(f"{len(entities)} entity: rule distillation needs at least two")
    if np.unique(scores.to_numpy()).size < 2:
        raise DatasetError(
            "the teacher score is the same for every entity: there is nothing to explain"
        )
    fit_ids, test_ids = _split(entities, params.test_size, params.random_state)
    fit_scores = scores.loc[fit_ids]
    if np.unique(fit_scores.to_numpy()).size < 2:
        raise DatasetError("the teacher score is the same for every fitted entity")
    fit_labels = labels.loc[fit_ids] if labels is not None else None
    if fit_labels is not None and np.unique(fit_labels.to_numpy()).size < 2:
        raise DatasetError("the labels of the fitted entities are all the same: no AUC")
    held = events[entity].isin(test_ids).to_numpy()
    fit_events, test_events = events[~held], events[held]

    model = RuDi(
        K=params.K,
        D=params.D,
        R=params.R,
        B=params.B,
        n_simulations=params.n_simulations,
        H=params.H,
        L=params.L,
        epochs=params.epochs,
        batch_size=params.batch_size,
        lr=tuple(params.lr),
        temperature=tuple(params.temperature),
        max_categories=params.max_categories,
        categorical=params.categorical,
        operators=params.operators,
        random_state=params.random_state,
    )
    lo, hi = 0.1, 0.95
    t0 = time.perf_counter()
    try:
        model.fit(
            fit_events,
            entity,
            fit_scores,
            labels=fit_labels,
            order_col=order,
            progress=lambda f, msg: progress(lo + (hi - lo) * f, msg),
        )
    except (ValueError, TypeError) as exc:  # RuDi's word on input it cannot use
        raise DatasetError(f"RuDi cannot fit this data: {exc}") from None
    fit_seconds = time.perf_counter() - t0
    search = model.search_seconds_ + model.evaluation_seconds_

    held_out = None
    if len(test_ids):
        progress(0.96, f"fidelity on {len(test_ids)} held-out entities")
        t1 = time.perf_counter()
        test_labels = labels.loc[test_ids] if labels is not None else None
        if test_labels is not None and np.unique(test_labels.to_numpy()).size < 2:
            test_labels = None  # one class among the held-out entities: no AUC there
        score = model.score(test_events, scores.loc[test_ids], test_labels)
        held_out = {
            "entities": len(test_ids),
            "fidelity": score["fidelity"],
            "auc": score.get("auc"),
            "seconds": time.perf_counter() - t1,
        }
    return {
        "entities": len(entities),
        "entitiesFitted": len(fit_ids),
        "eventsFitted": int(fit_events.shape[0]),
        "features": {
            "numerical": model.schema_.numerical,
            "categorical": model.schema_.categorical,
        },
        "rules": [
            {
                "rule": r["rule"],
                "weight": r["weight"],
                "support": r["support"],
                "nLiterals": r["n_literals"],
            }
            for r in model.rules_
        ],
        "rulesText": model.rules_text(),
        "statistics": [
            {
                "name": s["name"],
                "dimensions": s["dimensions"],
                "operators": s["operators"],
                "correlation": s["correlation"],
                "partialCorrelation": s["partial_correlation"],
            }
            for s in model.statistics_
        ],
        "multipleCorrelation": model.multiple_correlation_,
        "fidelity": model.fidelity_,
        "auc": model.auc_,
        "heldOut": held_out,
        "params": {
            "K": params.K,
            "D": params.D,
            "R": params.R,
            "B": params.B,
            "nSimulations": params.n_simulations,
            "H": params.H,
            "L": params.L,
            "epochs": params.epochs,
            "testSize": params.test_size,
            "randomState": params.random_state,
        },
        "timings": {
            "fitSeconds": fit_seconds,
            "statisticsSearchSeconds": model.search_seconds_,
            "statisticsEvaluationSeconds": model.evaluation_seconds_,
            "rulesSeconds": max(0.0, fit_seconds - search),
        },
        "fidelityMeaning": "share of entity pairs the rules order as the teacher does (sec. 4.3)",
    }
