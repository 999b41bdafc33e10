"""Confidence sequences of off-policy values: coverage at every checkpoint on simulated logs."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from online.confidence import (
    LowerConfidenceSequence,
    OffPolicyEstimates,
    dr_lower_bounds,
)

RUNS, EVENTS, EVERY = 200, 4000, 100
K, N_CONTEXTS, FLOOR = 5, 4, 0.2


def _problem():
    """Reward probabilities theta[x, a], a logging policy mu and a target pi (both fixed)."""
    rng = np.random.default_rng(7)
    theta = rng.uniform(0.05, 0.7, (N_CONTEXTS, K))
    logging_choice = rng.integers(K, size=N_CONTEXTS)
    mu = np.full((N_CONTEXTS, K), FLOOR / K)
    mu[np.arange(N_CONTEXTS), logging_choice] += 1 - FLOOR
    pi = np.zeros((N_CONTEXTS, K))
    pi[np.arange(N_CONTEXTS), theta.argmax(axis=1)] = 0.9  # a good target, far from mu
    pi += 0.1 / K
    value = float((pi * theta).sum(axis=1).mean())  # contexts are uniform
    return theta, mu, pi, value


def _logs(seed: int):
    """RUNS independent logs of EVENTS events each: contexts, actions, rewards, propensities."""
    theta, mu, pi, value = _problem()
    rng = np.random.default_rng(seed)
    x = rng.integers(N_CONTEXTS, size=(RUNS, EVENTS))
    u = rng.random((RUNS, EVENTS, 1))
    a = (u > mu[x].cumsum(axis=2)).sum(axis=2)
    r = (rng.random((RUNS, EVENTS)) < theta[x, a]).astype(float)
    return x, a, r, mu[x, a], pi, value


def _predictable_q(a: np.ndarray, r: np.ndarray) -> np.ndarray:
    """Per-action mean of the rewards seen before each event (1/2 with none): q[run, i, action]."""
    onehot = np.eye(K)[a]
    counts = np.cumsum(onehot, axis=1) - onehot
    sums = np.cumsum(onehot * r[..., None], axis=1) - onehot * r[..., None]
    return (sums + 0.5) / (counts + 1.0)


def _normal_band(terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    n = terms.shape[1]
    half = stats.norm.ppf(0.975) * terms.std(axis=1, ddof=1) / np.sqrt(n)
    return terms.mean(axis=1) - half, terms.mean(axis=1) + half


@pytest.mark.slow
def test_ips_and_dr_sequences_cover_the_true_value_at_every_checkpoint():
    x, a, r, p, pi, value = _logs(seed=11)
    target = pi[x, a]
    q = _predictable_q(a, r)
    pi_full = pi[x]
    est = OffPolicyEstimates(alpha=0.05, rows=RUNS)
    covered = {"ips": np.ones(RUNS, bool), "dr": np.ones(RUNS, bool),
               "normal, checked repeatedly": np.ones(RUNS, bool)}
    for start in range(0, EVENTS, EVERY):
        s = slice(start, start + EVERY)
        qs, pis = q[:, s], pi_full[:, s]
        low, low_c = dr_lower_bounds(pis.reshape(-1, K), qs.reshape(-1, K), FLOOR / K)
        q_logged = np.take_along_axis(qs, a[:, s, None], axis=2)[..., 0]
        est.update(r[:, s], target[:, s], p[:, s], q_logged=q_logged,
                   q_policy=(pis * qs).sum(axis=2), dr_low=low.reshape(RUNS, -1),
                   dr_low_c=low_c.reshape(RUNS, -1))
        for name, bands in (("ips", est.ips()), ("dr", est.dr())):
            lo = np.array([b.low for b in bands])
            hi = np.array([b.high for b in bands])
            covered[name] &= (lo <= value) & (value <= hi)
        if start + EVERY >= 2 * EVERY:
            lo, hi = _normal_band(target[:, : start + EVERY] / p[:, : start + EVERY]
                                  * r[:, : start + EVERY])
            covered["normal, checked repeatedly"] &= (lo <= value) & (value <= hi)
    rates = {name: float(c.mean()) for name, c in covered.items()}
    assert rates["ips"] >= 0.95, rates
    assert rates["dr"] >= 0.95, rates
    # the check has teeth: a fixed-n interval looked at after every batch does not pass it
    assert rates["normal, checked repeatedly"] < 0.95, rates
    # and the bands are informative, not [0, 1]
    ips, dr = est.ips(), est.dr()
    lo, hi = _normal_band(target / p * r)
    normal_width = float(np.median(hi - lo))
    widths = {name: float(np.median([b.high - b.low for b in bands]))
              for name, bands in (("ips", ips), ("dr", dr))}
    assert widths["ips"] < 2.5 * normal_width and widths["dr"] < 3 * normal_width, (
        widths, normal_width)
    assert abs(np.mean([b.value for b in ips]) - value) < 0.01


def test_a_learning_target_is_bounded_between_its_worst_and_best_values():
    """A target whose value drifts from 0.2 to 0.8: the band stays within [min, max] +- slack."""
    rng = np.random.default_rng(3)
    cs = LowerConfidenceSequence(alpha=0.05)
    n = 20_000
    means = np.linspace(0.2, 0.8, n)
    cs.update((rng.random(n) < means).astype(float))
    assert 0.2 - 1e-9 <= cs.lower()[0] <= 0.8


def test_values_below_their_lower_bound_are_refused():
    cs = LowerConfidenceSequence()
    with pytest.raises(ValueError, match="below its stated lower bound"):
        cs.update([0.5, -0.1])
    with pytest.raises(ValueError, match="finite"):
        cs.update([np.nan])


def test_estimates_round_trip_through_their_state():
    rng = np.random.default_rng(0)
    est = OffPolicyEstimates(alpha=0.1)
    r = (rng.random(500) < 0.4).astype(float)
    est.update(r, np.full(500, 0.5), np.full(500, 0.5))
    clone = OffPolicyEstimates.from_state(est.to_state())
    assert clone.ips() == est.ips()
    assert clone.dr()[0].n == 0 and clone.dr()[0].to_dict() == est.dr()[0].to_dict()
    more = (rng.random(100) < 0.4).astype(float)
    est.update(more, np.full(100, 0.5), np.full(100, 0.5))
    clone.update(more, np.full(100, 0.5), np.full(100, 0.5))
    assert clone.ips() == est.ips()
