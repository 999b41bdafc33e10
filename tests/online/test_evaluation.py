"""Off-policy estimators (online.evaluation) on synthetic logs whose true values are known."""

from __future__ import annotations

import math

import numpy as np
import pytest

from online.evaluation import (
    Estimate,
    RewardModel,
    doubly_robust,
    ips,
    mean_estimate,
    replay,
    snips,
)

K = 4


def true_rate(x: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Click probability of action a in context x (x in 0..K-1): action x is the good one."""
    return np.where(a == x, 0.7, 0.1 + 0.05 * a)


def uniform_logs(n: int, seed: int):
    rng = np.random.default_rng(seed)
    x = rng.integers(K, size=n)
    a = rng.integers(K, size=n)
    r = (rng.random(n) < true_rate(x, a)).astype(float)
    return x, a, r, np.full(n, 1.0 / K), rng


def test_replay_of_uniform_random_on_uniform_logs_matches_the_logged_mean():
    _, a, r, _, rng = uniform_logs(20_000, seed=1)
    chosen = rng.integers(K, size=len(a))  # a uniform random target policy
    estimate = replay(r, chosen == a)
    logged = mean_estimate(r)
    assert estimate.n == pytest.approx(len(a) / K, rel=0.05)
    assert estimate.contains(logged.value)
    # and the interval means what it says: ~95 % of replications cover the true value
    truth = float(true_rate(np.arange(K)[:, None], np.arange(K)[None, :]).mean())
    covered = 0
    for seed in range(200):
        _, a, r, _, rng = uniform_logs(2_000, seed=100 + seed)
        covered += replay(r, rng.integers(K, size=len(a)) == a).contains(truth)
    assert 0.88 <= covered / 200 <= 0.99


def test_ips_of_the_logging_policy_is_the_logged_mean():
    rng = np.random.default_rng(2)
    n = 5_000
    p = rng.uniform(0.05, 1.0, size=n)  # any logging propensities
    r = rng.random(n).round(2)
    assert ips(r, p, p).value == pytest.approx(r.mean(), abs=1e-12)
    assert snips(r, p, p).value == pytest.approx(r.mean(), abs=1e-12)
    assert ips(r, p, p).low == pytest.approx(mean_estimate(r).low)


def test_ips_snips_dr_recover_a_deterministic_target_on_uniform_logs():
    x, a, r, p, _ = uniform_logs(40_000, seed=3)
    target_action = x  # the best policy: action x in context x
    truth = 0.7
    pi = (a == target_action).astype(float)
    q = RewardModel(seed=0).fit_predict([{"x": str(v)} for v in x], a, r, K)
    q_logged = q[np.arange(len(a)), a]
    q_policy = q[np.arange(len(a)), target_action]
    level = 0.99  # four single-run checks: 99 % intervals (calibration is tested above)
    est = {
        "ips": ips(r, pi, p, level),
        "snips": snips(r, pi, p, level),
        "dr": doubly_robust(r, pi, p, q_logged, q_policy, level),
        "replay": replay(r, pi == 1.0, level),
    }
    for name, e in est.items():
        assert e.contains(truth), (name, e)
    # a good reward model makes DR much tighter than IPS
    width = {k: e.high - e.low for k, e in est.items()}
    assert width["dr"] < 0.6 * width["ips"]
    assert width["snips"] < width["ips"]


def test_snips_and_dr_on_hand_computed_cases():
    r = np.array([1.0, 0.0, 1.0, 0.0])
    p = np.array([0.5, 0.5, 0.25, 0.25])
    pi = np.array([1.0, 1.0, 0.5, 0.0])
    w = pi / p  # 2, 2, 2, 0
    assert ips(r, pi, p).value == pytest.approx((2 + 0 + 2 + 0) / 4)
    assert snips(r, pi, p).value == pytest.approx(4 / 6)
    # SNIPS's delta-method standard error, by hand
    v = 4 / 6
    se = math.sqrt((w**2 * (r - v) ** 2).sum() * 4 / 3) / w.sum()
    e = snips(r, pi, p)
    assert (e.high - e.low) / 2 == pytest.approx(1.959964 * se, rel=1e-5)
    # DR: q = 0 is IPS; a perfect model of deterministic rewards leaves only the direct method
    zeros = np.zeros(4)
    assert doubly_robust(r, pi, p, zeros, zeros).value == pytest.approx(ips(r, pi, p).value)
    exact = doubly_robust(r, pi, p, q_logged=r, q_policy=np.array([0.3, 0.3, 0.3, 0.3]))
    assert exact.value == pytest.approx(0.3) and exact.high - exact.low == pytest.approx(0.0)


def test_degenerate_and_bad_inputs():
    assert math.isnan(replay([1.0, 0.0], [False, False]).value)
    one = replay([1.0, 0.0], [True, False])
    assert one.value == 1.0 and one.low == -math.inf and one.to_dict()["low"] is None
    assert math.isnan(snips([1.0], [0.0], [0.5]).value)  # the target never plays a logged action
    for bad in ([0.0, 0.5], [0.5, 1.5], [0.5, float("nan")]):
        with pytest.raises(ValueError):
            ips([1.0, 0.0], [0.5, 0.5], bad)
    with pytest.raises(ValueError, match="target probabilities"):
        snips([1.0, 0.0], [1.2, 0.0], [0.5, 0.5])
    with pytest.raises(ValueError, match="expected 2"):
        ips([1.0, 0.0], [0.5], [0.5, 0.5])
    with pytest.raises(ValueError, match="level"):
        mean_estimate([1.0, 0.0, 1.0], level=1.5)
    assert isinstance(mean_estimate([0.0, 1.0]), Estimate)


def test_reward_model_is_cross_fitted_and_falls_back_to_means():
    rng = np.random.default_rng(4)
    n = 600
    x = [{"f": float(v), "g": str(rng.integers(3))} for v in rng.random(n)]
    a = rng.integers(2, size=n)  # action 2 is never logged
    # each event's reward is pure noise: an in-sample fit could memorise it, a cross-fitted one
    # predicts it no better than the mean
    r = rng.normal(size=n)
    q = RewardModel(seed=0, C=1e6).fit_predict(x, a, r, n_actions=3)
    assert q.shape == (n, 3) and q.dtype == np.float32
    q_a = q[np.arange(n), a]
    assert np.corrcoef(q_a, r)[0, 1] < 0.1
    assert np.allclose(q[:, 2], q[0, 2]) or len(np.unique(q[:, 2])) <= 2  # fold means only
    assert r.min() <= q.min() and q.max() <= r.max()
    with pytest.raises(ValueError, match="n_folds"):
        RewardModel(n_folds=1)
