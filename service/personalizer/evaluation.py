"""Personalizer's offline evaluations: counterfactual values of candidate policies on an app's
logged events.

Every logged event carries the exact probability its action was served with (Grove's
decisions log their propensity, and the exploration floor keeps every action's above zero), so
a candidate policy pi is valued from the log alone. For each candidate the events are replayed
in order: pi's probability of the logged action is taken **before** pi learns the event
(progressive validation: a learning candidate is judged as it would have served), then pi
learns it, as the app's trainer would.

Estimates (:mod:`online.confidence`, :mod:`online.evaluation`):

- the summary is IPS (``mean(w r)``, ``w = pi(a|x) / p``) with its **anytime-valid** 95%
  confidence sequence (betting, Waudby-Smith & Ramdas 2023): valid however often the result is
  looked at, and for candidates that learn while they are replayed;
- SNIPS is given beside it, and DR with a predictable reward model (per action, the mean
  reward of the earlier events, starting at 1/2) and its own sequence; DR's bound needs the
  least probability the logging policy gave any action, taken as the window's least logged
  propensity (an estimate: the log has only the chosen action's);
- values are in the app's reward units (Grove learns rewards rescaled into [0, 1]).

The summary's ``confidenceInterval`` is what a Personalizer client reads as one interval: the
hull of the IPS band and the IPS estimate (:func:`summary_interval`), so that it is ordered
and holds the estimate. The band itself stays in ``estimates.ips``. Two things make them
differ, both for candidates that learn while they are replayed: the band bounds the best value
the candidate had from below and its worst from above, so it is inverted (low > high) when the
candidate improved by more than the band's width; and the IPS mean is not the band's centre
(its upper side is read from ``w (1 - r)``), so it can fall outside, above 1 even. A superset of
a confidence set keeps its coverage, so the summary's interval is still valid; the optimal
policy is chosen on the band itself (``_optimal``).

Candidates (Personalizer's ``policySource``): ``Online`` (the policy that served: its own
rewards, w = 1), ``Random`` (uniform over the actions), ``Baseline`` (the first action of the
request's list, as Personalizer's; a candidate only when the app lists actions), the request's
``Custom`` learning settings, and with ``enablePolicyOptimization`` every hosted bandit kind
with its default parameters (``OfflineExperimentation``). The ``optimalPolicy`` is the
candidate (not Online) whose lower bound is highest, if that bound is above the Online
policy's upper bound: better for sure, at the sequence's level; otherwise the Online policy is
kept.

The action set of an event is the list its request offered (minus its excluded actions), which
Grove logs with the event when it is not the app's own; for an event without it (decided
among the app's actions, or logged before Grove recorded the lists), the app's actions and
every action seen in the window. ``Baseline`` plays the first action of the event's set (the
request's first, as Personalizer's baseline).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from service.models import MODEL_KINDS, model_kind
from service.personalizer.logged import LoggedEvent
from service.records import AppConfig

#: results are kept per 5 minutes: Personalizer's finest aggregation interval
BUCKET_MS = 5 * 60 * 1000


@dataclass
class Candidate:
    name: str
    source: str  # Online, Random, Baseline, Custom, OfflineExperimentation
    arguments: str = ""
    kind: str | None = None  # a Grove policy kind to replay (Custom, OfflineExperimentation)
    params: dict[str, Any] = field(default_factory=dict)


def default_candidates(config: AppConfig, optimize: bool) -> list[Candidate]:
    """Online, Random, Baseline (if the app lists actions), and the hosted kinds if asked."""
    out = [Candidate("Online", "Online"), Candidate("Random", "Random")]
    if config.action_ids:
        out.append(Candidate("Baseline", "Baseline",
                             f"the request's first action ({config.action_ids[0]!r} for one "
                             "decided among the app's)"))
    if optimize:
        for kind in MODEL_KINDS.values():
            if kind.uses_actions:
                out.append(Candidate(kind.name, "OfflineExperimentation", f"--kind {kind.name}",
                                     kind.name, {}))
    return out


def _probabilities(candidate: Candidate, learner: Any, event: LoggedEvent,
                   actions: list[str], features: dict | None) -> np.ndarray:
    """pi(. | x) over ``actions`` (every column) for one event, before the candidate learns
    it: over the actions the event's request offered, or over all of ``actions``; the
    actions' ``features`` for the kinds that read them."""
    offered = list(event.offered) if event.offered else actions
    if candidate.source == "Random":
        probs = dict.fromkeys(offered, 1.0 / len(offered))
    elif candidate.source == "Baseline":
        probs = {offered[0]: 1.0}  # the app's first action is first in ``actions``
    else:
        choice = model_kind(candidate.kind).decide(learner, dict(event.context), offered, [],
                                                   features)
        probs = dict(choice.ranking)
    return np.array([float(probs.get(a, 0.0)) for a in actions])


def evaluate(
    events: Sequence[LoggedEvent],
    config: AppConfig,
    candidates: Sequence[Candidate],
    progress: Callable[[float, str], None],
    alpha: float = 0.05,
) -> dict[str, Any]:
    """Every candidate's estimates over ``events`` (oldest first), in the app's reward units."""
    from online.confidence import OffPolicyEstimates, dr_lower_bounds

    if not events:
        raise ValueError("no logged events in the evaluation's time window")
    actions = list(dict.fromkeys([*config.action_ids, *(e.action for e in events),
                                  *(a for e in events for a in e.offered or ())]))
    index = {a: i for i, a in enumerate(actions)}
    k, n = len(actions), len(events)
    rewards = np.array([config.rescale(e.reward) for e in events])
    logged = np.array([index[e.action] for e in events])
    propensity = np.array([e.probability for e in events])
    if np.any((propensity <= 0) | (propensity > 1)):
        raise ValueError("the log holds propensities outside (0, 1]")
    p_min = float(propensity.min())
    low, high = config.reward_range
    span = high - low
    buckets = (np.array([e.time_ms for e in events]) // BUCKET_MS) * BUCKET_MS

    def in_units(x: float) -> float | None:
        return None if not math.isfinite(x) else low + x * span

    results = []
    for c_i, candidate in enumerate(candidates):
        learner = None
        if candidate.kind is not None:
            learner = model_kind(candidate.kind).new(dict(candidate.params), actions)
        target = np.zeros(n)
        q_logged, q_policy = np.zeros(n), np.zeros(n)
        dr_low, dr_low_c = np.zeros(n), np.zeros(n)
        sums, counts = np.zeros(k), np.zeros(k)
        for i, event in enumerate(events):
            features = event.features(config)
            if candidate.source == "Online":
                pi = None
                target[i] = propensity[i]
            else:
                pi = _probabilities(candidate, learner, event, actions, features)
                target[i] = pi[logged[i]]
                q = (sums + 0.5) / (counts + 1.0)  # earlier events only: predictable
                q_logged[i], q_policy[i] = q[logged[i]], float(pi @ q)
                lo, lo_c = dr_lower_bounds(pi[None, :], q[None, :], p_min)
                dr_low[i], dr_low_c[i] = lo[0], lo_c[0]
            if learner is not None:
                model_kind(candidate.kind).learn_run(learner, [event.learned(config)])
            sums[logged[i]] += rewards[i]
            counts[logged[i]] += 1
            if i % 500 == 499:
                progress((c_i + (i + 1) / n) / len(candidates),
                         f"{candidate.name}: {i + 1} of {n} events")
        est = OffPolicyEstimates(alpha=alpha)
        if candidate.source == "Online":
            est.update(rewards, target, propensity)
        else:
            est.update(rewards, target, propensity, q_logged, q_policy, dr_low, dr_low_c)
        ips, dr = est.ips()[0], est.dr()[0]
        terms = target / propensity * rewards
        series = []
        for start in np.unique(buckets):
            mask = buckets == start
            series.append([int(start), int(mask.sum()), float(terms[mask].sum()),
                           float((terms[mask] ** 2).sum())])
        results.append({
            "name": candidate.name,
            "arguments": candidate.arguments,
            "policySource": candidate.source,
            "summary": {
                "expectedReward": in_units(ips.value),
                "confidenceInterval": [in_units(x) for x in
                                       summary_interval(ips.value, ips.low, ips.high)],
            },
            "estimates": {
                "ips": {"value": in_units(ips.value), "low": in_units(ips.low),
                        "high": in_units(ips.high), "n": ips.n},
                "snips": in_units(float(est.snips()[0])),
                "dr": None if candidate.source == "Online" else {
                    "value": in_units(dr.value), "low": in_units(dr.low),
                    "high": in_units(dr.high), "n": dr.n},
                "level": 1 - alpha,
                "anytimeValid": True,
            },
            "buckets": series,
        })
    progress(1.0, f"{len(candidates)} policies on {n} events")
    return {
        "events": n,
        "actions": actions,
        "bucketMs": BUCKET_MS,
        "rewardRange": [low, high],
        "policies": results,
        "optimalPolicy": _optimal(results),
    }


def summary_interval(value: float, low: float, high: float) -> tuple[float, float]:
    """The smallest interval holding the band ``[low, high]`` (inverted or not) and the
    estimate ``value`` (see the module doc); NaN ends (no events) stay NaN.

    >>> summary_interval(0.5, 0.4, 0.6)
    (0.4, 0.6)
    >>> summary_interval(0.62, 0.61, 0.60)  # a learning candidate's inverted band
    (0.6, 0.62)
    >>> summary_interval(1.03, 0.4, 0.98)  # an IPS mean above the band
    (0.4, 1.03)
    """
    if not (math.isfinite(value) and math.isfinite(low) and math.isfinite(high)):
        return low, high
    return min(value, low, high), max(value, low, high)


def _optimal(results: list[dict]) -> str | None:
    """The candidate surely better than the Online policy (see the module doc), or None: on
    the IPS bands themselves, not the summaries' hulls."""
    online = next((r for r in results if r["policySource"] == "Online"), None)
    if online is None or online["estimates"]["ips"]["high"] is None:
        return None
    bar = online["estimates"]["ips"]["high"]
    best = None
    for result in results:
        lo = result["estimates"]["ips"]["low"]
        if result["policySource"] in ("Online", "Random", "Baseline") or lo is None:
            continue
        if lo > bar and (best is None or lo > best[0]):
            best = (lo, result["name"])
    return best[1] if best else None
