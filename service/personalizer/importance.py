"""Personalizer's feature importances, measured on an app's logged events.

Personalizer read importances off its Vowpal Wabbit model's weights. Grove's policies have no
common notion of a feature weight (tree ensembles, LinUCB and Bandit Forest differ), and the
R-MOTiFS feature-selection job answers another question (which subset predicts a class label,
with no per-feature score), so the importance here is measured from the logged events
themselves, the same way whatever policy served them:

    importance(f) = 1 - SSE(reward | action, f) / SSE(reward | action)

the share of the reward's squared error, beyond what the action alone explains, that knowing
the feature removes. Predictions are cell means (action x value of f; a number is cut into
deciles), **cross-fitted** over two halves (each half is predicted from the other's means, a
cell unseen there falls back to the action's mean), so a feature with many values does not
score by fitting noise; a negative share is 0. Each event is weighted by 1 / its logged
propensity, so the reward the log would show under uniform play is what is explained, not
the serving policy's preferences. Scores are then normalised to sum to 1 (Personalizer's
"normalized feature scores"), sorted in descending order. Personalizer's namespaces are the
part of a dotted name before its first dot (``user.tier``: namespace ``user``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from service.personalizer.logged import LoggedEvent

MAX_VALUES = 200  # a text feature with more distinct values is scored on its 200 commonest


def _codes(values: list[Any]) -> np.ndarray:
    """Integer cells of one feature's values (deciles of numbers, categories of the rest,
    missing its own cell)."""
    numbers = np.array(
        [v if isinstance(v, (int, float)) and not isinstance(v, bool) else np.nan for v in values],
        dtype=float,
    )
    numeric = ~np.isnan(numbers)
    codes = np.full(len(values), -1, dtype=np.int64)
    if numeric.sum() >= max(1, len(values) // 2):
        edges = np.unique(np.quantile(numbers[numeric], np.linspace(0.1, 0.9, 9)))
        codes[numeric] = np.searchsorted(edges, numbers[numeric], side="right")
        return codes
    text = [None if v is None else str(v) for v in values]
    counts: dict[str, int] = {}
    for t in text:
        if t is not None:
            counts[t] = counts.get(t, 0) + 1
    commonest = sorted(counts.items(), key=lambda kv: -kv[1])[:MAX_VALUES]
    keep = {t: i for i, (t, _) in enumerate(commonest)}
    return np.array([keep.get(t, -1) if t is not None else -2 for t in text], dtype=np.int64)


def _cross_fit_sse(cells: np.ndarray, actions: np.ndarray, y: np.ndarray, w: np.ndarray,
                   halves: np.ndarray) -> float:
    """Weighted squared error of cell means fitted on the other half (action mean if unseen)."""
    sse = 0.0
    for part in (0, 1):
        fit, test = halves != part, halves == part
        cell_sum: dict[tuple, float] = {}
        cell_w: dict[tuple, float] = {}
        act_sum: dict[int, float] = {}
        act_w: dict[int, float] = {}
        for c, a, yi, wi in zip(cells[fit], actions[fit], y[fit], w[fit], strict=True):
            cell_sum[(c, a)] = cell_sum.get((c, a), 0.0) + wi * yi
            cell_w[(c, a)] = cell_w.get((c, a), 0.0) + wi
            act_sum[a] = act_sum.get(a, 0.0) + wi * yi
            act_w[a] = act_w.get(a, 0.0) + wi
        overall = float((w[fit] * y[fit]).sum() / max(w[fit].sum(), 1e-12))
        for c, a, yi, wi in zip(cells[test], actions[test], y[test], w[test], strict=True):
            if (c, a) in cell_w:
                pred = cell_sum[(c, a)] / cell_w[(c, a)]
            elif a in act_w:
                pred = act_sum[a] / act_w[a]
            else:
                pred = overall
            sse += wi * (yi - pred) ** 2
    return sse


def importances(
    events: Sequence[LoggedEvent], progress: Callable[[float, str], None], seed: int = 0
) -> list[dict[str, Any]]:
    """Personalizer's ``featureScores``: ``[{"namespace", "featureName", "score"}]``, best first.

    >>> from service.personalizer.logged import LoggedEvent
    >>> rng = np.random.default_rng(0)
    >>> events = []
    >>> for i in range(2000):
    ...     fav, noise = f"a{rng.integers(3)}", str(rng.integers(5))
    ...     action = f"a{rng.integers(3)}"
    ...     events.append(LoggedEvent(str(i), i, {"user.fav": fav, "noise": noise}, action,
    ...                               float(action == fav), 1 / 3))
    >>> scores = importances(events, lambda f, m: None)
    >>> [(s["namespace"], s["featureName"]) for s in scores], scores[0]["score"] > 0.9
    ([('user', 'fav'), ('', 'noise')], True)
    """
    if not events:
        raise ValueError("no logged events in the feature importance's time window")
    names = sorted({name for e in events for name in e.context})
    action_ids = {a: i for i, a in enumerate(dict.fromkeys(e.action for e in events))}
    actions = np.array([action_ids[e.action] for e in events])
    y = np.array([e.reward for e in events], dtype=float)
    w = 1.0 / np.array([e.probability for e in events], dtype=float)
    halves = np.random.default_rng(seed).integers(2, size=len(events))
    base = _cross_fit_sse(np.zeros(len(events), dtype=np.int64), actions, y, w, halves)
    raw = {}
    for i, name in enumerate(names):
        cells = _codes([e.context.get(name) for e in events])
        sse = _cross_fit_sse(cells, actions, y, w, halves)
        raw[name] = max(0.0, 1.0 - float(sse) / base) if base > 0 else 0.0
        progress((i + 1) / max(1, len(names)), f"feature {i + 1} of {len(names)}")
    total = sum(raw.values())
    out = []
    for name, score in sorted(raw.items(), key=lambda kv: (-kv[1], kv[0])):
        namespace, dot, feature = name.partition(".")
        out.append({
            "namespace": namespace if dot else "",
            "featureName": feature if dot else name,
            "score": float(score / total) if total > 0 else 0.0,
        })
    return out
