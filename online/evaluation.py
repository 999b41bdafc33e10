"""Off-policy evaluation of a contextual-bandit policy on logged bandit feedback.

Logged feedback is one event per row: a context x_i, the action a_i the *logging* policy played,
its propensity p_i = mu(a_i | x_i) (the probability the logging policy gave a_i), and the reward
r_i. The estimators below value a *target* policy pi from these events alone:

* :func:`replay` — the replay method of Li, Chu, Langford, Wang (WSDM 2011, Algorithm 3): play
  pi on the logged contexts and keep only the events where it picks the logged action; the
  estimate is the mean reward of those events. Unbiased when the logging policy is uniformly
  random (their Theorem 1); a learning policy is updated only on the kept events.
* :func:`ips` — inverse propensity scoring (Horvitz-Thompson): mean of w_i r_i with
  w_i = pi(a_i | x_i) / p_i.
* :func:`snips` — self-normalized IPS: sum(w_i r_i) / sum(w_i).
* :func:`doubly_robust` — doubly robust (Dudik, Langford, Li, ICML 2011, eq. (2)): the direct
  method's prediction sum_a pi(a | x_i) q(x_i, a) plus the IPS correction
  w_i (r_i - q(x_i, a_i)), with the reward model q of :class:`RewardModel`.
* :func:`mean_estimate` — the logged policy's own average reward (IPS with pi = mu).

Each returns an :class:`Estimate` with a two-sided normal-approximation confidence interval.

Choices where the papers are silent or ambiguous
------------------------------------------------
- Confidence intervals are normal approximations (central limit theorem) at level ``level``
  (0.95 by default): value ± z * se, with se the sample standard deviation (ddof=1) of the
  per-event terms over sqrt(n). For SNIPS (a ratio) se comes from the delta method:
  se = sqrt(sum w_i^2 (r_i - V)^2) / sum w_i. The replay method's se is that of the mean of the
  kept rewards (its n is the number of kept events). With fewer than two events the interval is
  (-inf, inf); intervals are not clipped to the reward range.
- The DR reward model is documented in :class:`RewardModel`: per-action regression on the
  context, cross-fitted (an event's own reward never fits the prediction used for it).
- Propensities must lie in (0, 1] and target probabilities in [0, 1]; anything else raises
  ``ValueError`` (a zero propensity makes IPS undefined).
- SNIPS with sum(w) = 0 (pi never gives weight to a logged action) has no value: NaN.

References
----------
Li, L., Chu, W., Langford, J., Wang, X. Unbiased Offline Evaluation of Contextual-bandit-based
News Article Recommendation Algorithms. WSDM 2011.
Dudik, M., Langford, J., Li, L. Doubly Robust Policy Evaluation and Learning. ICML 2011.
Swaminathan, A., Joachims, T. The Self-Normalized Estimator for Counterfactual Learning.
NeurIPS 2015.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

__all__ = [
    "Estimate",
    "RewardModel",
    "doubly_robust",
    "ips",
    "mean_estimate",
    "replay",
    "snips",
]


@dataclass(frozen=True)
class Estimate:
    """A policy value with its confidence interval ``[low, high]`` at ``level``, from ``n`` events.

    >>> e = mean_estimate([0, 1, 1, 0])
    >>> e.value, e.n, e.low < 0.5 < e.high
    (0.5, 4, True)
    >>> e.contains(0.7)
    True
    """

    value: float
    low: float
    high: float
    n: int
    level: float = 0.95

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high

    def to_dict(self) -> dict:
        return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
                for k, v in asdict(self).items()}


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    return float(stats.norm.ppf(0.5 + level / 2))


def _from_terms(terms: np.ndarray, level: float) -> Estimate:
    """Mean of per-event terms with a normal interval."""
    n = len(terms)
    if n == 0:
        return Estimate(math.nan, -math.inf, math.inf, 0, level)
    value = float(terms.mean())
    if n < 2:
        return Estimate(value, -math.inf, math.inf, n, level)
    half = _z(level) * float(terms.std(ddof=1)) / math.sqrt(n)
    return Estimate(value, value - half, value + half, n, level)


def _array(values, name: str) -> np.ndarray:
    a = np.asarray(values, dtype=float)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite")
    return a


def _weights(target, propensity, n: int) -> np.ndarray:
    pi = _array(target, "target probabilities")
    p = _array(propensity, "propensities")
    if len(pi) != n or len(p) != n:
        raise ValueError(f"expected {n} target probabilities and propensities, "
                         f"got {len(pi)} and {len(p)}")
    if np.any((p <= 0.0) | (p > 1.0)):
        raise ValueError("propensities must be in (0, 1]")
    if np.any((pi < 0.0) | (pi > 1.0)):
        raise ValueError("target probabilities must be in [0, 1]")
    return pi / p


def mean_estimate(rewards, level: float = 0.95) -> Estimate:
    """The average reward of the logged events (the logging policy's own value)."""
    return _from_terms(_array(rewards, "rewards"), level)


def replay(rewards, matched, level: float = 0.95) -> Estimate:
    """Li et al. (2011) replay method: mean reward over the events where the target policy
    chose the logged action (``matched[i]`` true).

    >>> replay([1, 0, 1, 1], [True, True, False, False]).value
    0.5
    """
    r = _array(rewards, "rewards")
    m = np.asarray(matched, dtype=bool)
    if m.shape != r.shape:
        raise ValueError(f"matched has shape {m.shape}, rewards {r.shape}")
    return _from_terms(r[m], level)


def ips(rewards, target, propensity, level: float = 0.95) -> Estimate:
    """Inverse propensity scoring: mean of ``target[i] / propensity[i] * rewards[i]``, where
    ``target[i]`` = pi(a_i | x_i) and ``propensity[i]`` = p_i.

    The logging policy evaluated on its own logs (pi = mu) gets the logged mean exactly:

    >>> ips([1, 0, 1], [0.5, 0.2, 0.25], [0.5, 0.2, 0.25]).value
    0.666...
    >>> ips([1, 0, 1], [1, 0, 0], [0.5, 0.5, 0.5]).value  # always a_0-like: weight 2 on event 0
    0.666...
    """
    r = _array(rewards, "rewards")
    return _from_terms(_weights(target, propensity, len(r)) * r, level)


def snips(rewards, target, propensity, level: float = 0.95) -> Estimate:
    """Self-normalized IPS: ``sum(w r) / sum(w)`` with ``w = target / propensity``.

    >>> snips([1, 0, 1], [1, 0, 0], [0.5, 0.5, 0.5]).value
    1.0
    """
    r = _array(rewards, "rewards")
    w = _weights(target, propensity, len(r))
    n, total = len(r), float(w.sum())
    if n == 0 or total <= 0.0:
        return Estimate(math.nan, -math.inf, math.inf, n, level)
    value = float((w * r).sum() / total)
    if n < 2:
        return Estimate(value, -math.inf, math.inf, n, level)
    # delta method for a ratio of means; the n/(n-1) factor matches the ddof=1 of the others
    se = math.sqrt(float((w**2 * (r - value) ** 2).sum()) * n / (n - 1)) / total
    half = _z(level) * se
    return Estimate(value, value - half, value + half, n, level)


def doubly_robust(rewards, target, propensity, q_logged, q_policy, level: float = 0.95
                  ) -> Estimate:
    """Doubly robust estimate (Dudik et al. 2011, eq. (2)): mean over events of
    ``q_policy[i] + target[i] / propensity[i] * (rewards[i] - q_logged[i])``.

    ``q_logged[i]`` = q(x_i, a_i), the reward model's prediction for the logged action;
    ``q_policy[i]`` = sum_a pi(a | x_i) q(x_i, a), its prediction for the target policy.
    With a perfect reward model the correction vanishes; with q = 0 it is IPS.

    >>> doubly_robust([1, 0], [1, 0], [0.5, 0.5], q_logged=[0.0, 0.0], q_policy=[0.0, 0.0]).value
    1.0
    >>> doubly_robust([1, 0], [1, 0], [0.5, 0.5], q_logged=[1.0, 0.0], q_policy=[1.0, 0.5]).value
    0.75
    """
    r = _array(rewards, "rewards")
    w = _weights(target, propensity, len(r))
    q_a = _array(q_logged, "q_logged")
    q_pi = _array(q_policy, "q_policy")
    if len(q_a) != len(r) or len(q_pi) != len(r):
        raise ValueError("q_logged and q_policy need one value per event")
    return _from_terms(q_pi + w * (r - q_a), level)


class RewardModel:
    """The reward model q(x, a) of the doubly robust estimator: one regression per action.

    For each action a, a model of E[r | x, a] is fitted on the logged events that played a:
    logistic regression (scikit-learn, L2 penalty ``C``) when every logged reward is 0 or 1,
    ridge regression (``alpha`` = 1 / ``C``) otherwise, on standardized features. Contexts are
    dicts turned into a numeric matrix by scikit-learn's ``DictVectorizer`` (numbers as they are,
    strings one-hot, None/missing as 0). Predictions are clipped to the logged reward range.

    ``fit_predict`` is cross-fitted: the events are split into ``n_folds`` folds (at random,
    seeded) and the predictions for the events of one fold come from models fitted on the other
    folds, so an event's own reward never enters q(x_i, .). An action with too few events in the
    training folds (fewer than ``min_events``, or a single reward value) predicts the mean reward
    of its training events, or the overall training mean if it has none.

    Parameters
    ----------
    C
        Inverse regularization strength.
    n_folds
        Cross-fitting folds (at least 2).
    min_events
        Fewest events of an action to fit a regression instead of a mean.
    seed
        Seed of the fold assignment.

    Examples
    --------
    >>> import random
    >>> rng = random.Random(0)
    >>> xs = [{"device": rng.choice(["phone", "desk"])} for _ in range(400)]
    >>> acts = [rng.randrange(2) for _ in xs]
    >>> rs = [float((x["device"] == "phone") == (a == 1)) for x, a in zip(xs, acts)]
    >>> q = RewardModel(seed=0).fit_predict(xs, acts, rs, n_actions=2)
    >>> q.shape
    (400, 2)
    >>> phone = xs.index({"device": "phone"})
    >>> bool(q[phone, 1] > 0.9 and q[phone, 0] < 0.1)
    True
    """

    def __init__(self, C: float = 1.0, n_folds: int = 2, min_events: int = 10, seed: int = 0):
        if n_folds < 2:
            raise ValueError(f"n_folds must be at least 2, got {n_folds}")
        self.C = C
        self.n_folds = n_folds
        self.min_events = min_events
        self.seed = seed

    def fit_predict(self, contexts, actions, rewards, n_actions: int) -> np.ndarray:
        """Cross-fitted q(x_i, a) for every event i and action a (float32, shape (n, n_actions))."""
        from sklearn.feature_extraction import DictVectorizer

        actions = np.asarray(actions, dtype=np.int64)
        r = _array(rewards, "rewards")
        n = len(r)
        if len(actions) != n or len(contexts) != n:
            raise ValueError("contexts, actions and rewards need one entry per event")
        X = DictVectorizer(sparse=False).fit_transform(
            [{k: v for k, v in x.items() if v is not None} for x in contexts])
        low, high = float(r.min(initial=0.0)), float(r.max(initial=1.0))
        binary = bool(np.all((r == 0.0) | (r == 1.0)))
        folds = np.random.default_rng(self.seed).integers(self.n_folds, size=n)
        q = np.empty((n, n_actions), dtype=np.float32)
        for f in range(self.n_folds):
            test, train = folds == f, folds != f
            if not test.any():
                continue
            fallback = float(r[train].mean()) if train.any() else 0.5 * (low + high)
            for a in range(n_actions):
                rows = train & (actions == a)
                q[test, a] = self._fit_one(X[rows], r[rows], X[test], binary, fallback)
        return np.clip(q, low, high)

    def _fit_one(self, X, y, X_test, binary: bool, fallback: float) -> np.ndarray:
        from sklearn.linear_model import LogisticRegression, Ridge
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        if len(y) == 0:
            return np.full(len(X_test), fallback)
        if len(y) < self.min_events or np.all(y == y[0]):
            return np.full(len(X_test), float(y.mean()))
        if binary:
            model = make_pipeline(StandardScaler(), LogisticRegression(C=self.C, max_iter=200))
            return model.fit(X, y.astype(int)).predict_proba(X_test)[:, 1]
        model = make_pipeline(StandardScaler(), Ridge(alpha=1.0 / self.C))
        return model.fit(X, y).predict(X_test)
