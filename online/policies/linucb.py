"""LinUCB with disjoint linear models (Li, Chu, Langford, Schapire, WWW 2010, Algorithm 1)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from online.policies.base import Policy
from online.policies.drift import ResidualMonitor, watch_error
from online.policies.features import LARGEST_CODED, FeatureEncoder, checked_scales, column_scales

COUNT, FIRST, LAST, CREATED = range(4)  # the rows of LinUCB._seen
# a feature away for more than this many of its mean gaps has stopped coming (Poisson: e^-16)
STALE_GAPS = 16.0

__all__ = ["LinUCB"]


class LinUCB(Policy):
    """Disjoint LinUCB: a ridge regression of the reward on the context per action, played by
    its upper confidence bound, with an exact-probability exploration floor.

    For each action a the policy keeps ``A_a^{-1}`` and ``b_a`` of Algorithm 1 (``A_a = lambda I
    + sum x x^T``, ``b_a = sum r x`` over the events where a was played) and scores a context x
    by ``p_a = theta_a . x + alpha sqrt(x^T A_a^{-1} x)`` with ``theta_a = A_a^{-1} b_a``
    (eq. (5), line 9). ``A_a^{-1}`` is updated in place by the Sherman-Morrison formula (a
    rank-one update, O(d^2) per event instead of an O(d^3) inverse); ``theta_a . x`` is read as
    ``b_a . (A_a^{-1} x)``, so deciding costs one matrix-vector product per action, in one
    compiled loop over the candidates.

    Choices where the paper is silent or that Grove needs
    -----------------------------------------------------
    * **Exact probabilities.** Algorithm 1 plays argmax p_a, ties broken arbitrarily. Here the
      actions whose score is within 1e-12 (relative) of the best split ``1 - epsilon`` evenly,
      and every candidate gets ``epsilon / n`` on top (n candidates): so every action keeps a
      logged propensity of at least epsilon / n, which another policy needs to be learned or
      evaluated from this one's log. The default ``epsilon=0.01`` costs at most 1% of the reward
      of the UCB choice; ``epsilon=0`` is the paper's rule (ties still split evenly: before any
      learning every action ties, so the first events are uniform).
    * **Features.** Strings are one-hot columns; a missing feature is 0; a constant 1 is the
      first feature (``fit_intercept``), so numeric contexts get a per-action bias. Columns are
      added as features appear (a new column is 0 in all earlier events, so its row and column
      of A are those of lambda I: the update is exact). ``max_columns`` bounds the d^2 cost
      per action: past it, a new feature takes the column of a feature that has stopped
      coming (away for more than 16 of its own mean gaps between events:
      :meth:`_stale_columns`), which every action's statistics forget exactly (the inverse of
      A without that column, by its Schur complement: :meth:`_forget_columns`); with none
      stopped, the new feature is left out. Campaigns, articles, the day's tags sent as
      category values come and go: before (the twentieth session) the first 128 were coded
      for ever, and on ``bench/policies/late_keys.py`` (a new campaign every 200 events, 20
      live) LinUCB fell from 0.84 to 0.22-0.23 once 128 campaigns had started (events
      30k-60k, seeds 0-2); now 0.81 there. A stream whose features keep coming decides as
      before (usps, 932 columns: the same rewards).
    * **Numbers on a large scale** are used as given up to ``LARGEST_CODED`` = 2^20 (~1e6) in
      magnitude, as the paper's raw features (a feature on a large scale is barely penalised by
      lambda); a column that brings a larger ``|x_j|`` is divided from then on by ``s_j``, the
      smallest power of 2 that brings its largest learned ``|x_j|`` down to 2^20 (VW's running
      max |x| normalisation, in powers of 2 so that dividing is exact). Why: float64
      Sherman-Morrison updates of an ``A_a^{-1}`` whose columns span many orders of magnitude
      lose its positive definiteness, and a denominator or a score goes to zero or infinity
      (unscaled, streams of 300 events of three columns drawing from {1e12, -1e12, 1, 0,
      1e-300} broke 2 of 100 seeds, from {1e9, -1e9, 1e-300, 1, 0.5, 0, 3} 1 of 100, from
      values up to 2^20 none; with the scales, no seed of any of them, nor of 60 seeds of
      values from 5e-324 to 1e30). Why not scale every column into [-1, 1]: on raw-number
      streams (``bench/policies/raw_numbers.py``) that penalised and explored the size
      features of vehicle (~100-1,000) as if they were 0/1 variables: 0.727 against 0.785 at
      20k steps. When ``s_j`` grows by ``1/c``, the statistics are re-expressed exactly in the
      new coordinates (``A = lambda I + sum x x^T`` with every past ``x_j`` times c:
      ``A^{-1}``'s row and column j divided by c, ``b_j`` times c, and lambda (1 - c^2) added
      back to ``A_jj`` by one more Sherman-Morrison update), so the policy is the one that had
      used ``s_j`` from the start. A context decided with a value beyond ``s_j`` 2^20 is
      scaled by the same ``s_j`` (deciding changes no state). With a penalty other than 1 the
      bound is 2^20 times the power of 2 nearest below sqrt(lambda): A's condition grows with
      ``x^2 / lambda`` (lambda 1e-9 with values of 1e30 broke 6-12 of 60-150 random streams at
      2^20).
    * **Off-policy learning** is direct regression: each action's ridge regression is fit on the
      events where it was played, whatever policy played it; under the linear model the least
      squares estimate is unbiased whatever the logging distribution (the logging policy only
      changes which contexts each regression sees). ``weighting="ips"`` weights each event by
      1 / probability instead (A += w x x^T, b += w r x): it corrects for a misspecified model
      under the logging distribution at the price of variance. Default ``"none"``.
    * **Unseen actions.** An action passed to :meth:`decide` that the policy has no statistics
      for scores as a fresh one (``theta = 0``, ``A = lambda I``): its width ``alpha |x| /
      sqrt(lambda)`` makes it tried soon.
    * Rewards are used as given (the paper's are clicks in {0, 1}).
    * **Changes** (``drift_delta``; traffic is not stationary, and ``A_a``, ``b_a`` sum every
      event since the start, so the paper's policy never forgets). Each learned event's
      held-out error, the reward minus ``theta_a . x`` before the update, is tested as the
      tree-ensemble policy tests its own (:mod:`~online.policies.drift`: a mean other than zero
      over the action's last 16 to 512 errors, false alarms over the whole stream <=
      ``drift_delta``). When the test rejects, the other actions are tested at the change point
      found, and every action found changed restarts (``A_a = lambda I``, ``b_a = 0``): the
      restart of M-UCB (Cao et al., AISTATS 2019), per action. On stationary streams no change
      was found (Letter, Adult and Shuttle at 100k events, vowel, splice and the MOOC stream at
      30k: the mean error of an action's 1,024 consecutive plays stayed within 0.13 of zero);
      figures in bench/policies/README.md.

    Parameters
    ----------
    alpha
        Width of the confidence bound (the paper's ``1 + sqrt(ln(2/delta)/2)``, 2.36 for delta =
        0.05; 1 by default, as river's ``LinUCBDisjoint``).
    ridge
        lambda, the ridge penalty (1 in the paper: ``A_a`` starts as the identity).
    epsilon
        Share of the probability spread uniformly over the candidates (see above).
    fit_intercept
        Add a constant feature 1.
    weighting
        ``"none"`` (direct regression) or ``"ips"`` (see above).
    max_columns
        Largest number of feature columns (not counting the intercept); past it, columns of
        features that stopped coming go to new ones (see above).
    drift_delta
        The chance of a false alarm, over the whole stream, of the test for a change (see
        above); None: no test, the paper's policy.
    forget_after
        An action removed from the inventory, or come with events and never added, is
        forgotten, its ``A_a`` and ``b_a`` freed, once this many events have been learned since
        its last one (``Policy._forget_stale``; the tree-ensemble policy's window, 100,000 by
        default); None: kept for ever, as the paper's policy.
    seed
        Seed of the draws of :meth:`decide`.

    Examples
    --------
    The best ad is a value of the context:

    >>> import random
    >>> rng = random.Random(0)
    >>> policy = LinUCB(seed=1)
    >>> ads = ["a1", "a2", "a3", "a4", "a5"]
    >>> total = 0.0
    >>> for t in range(2000):
    ...     x = {"favorite": rng.choice(ads), "device": rng.choice(["mobile", "desktop"])}
    ...     d = policy.decide(x, actions=ads)
    ...     reward = float(d.action == x["favorite"])
    ...     policy.learn_one(x, d.action, reward, d.probability)
    ...     total += reward if t >= 1000 else 0.0
    >>> total / 1000 > 0.95
    True
    >>> d = policy.decide({"favorite": "a3", "device": "mobile"})
    >>> d.action, round(d.probability, 3)
    ('a3', 0.992)

    The probabilities of a decision are exact (0.99 to the best, 0.01 / 5 to every action):

    >>> round(d.probabilities["a1"], 3)
    0.002

    State is arrays and JSON-able metadata; a restored policy decides the same:

    >>> clone = LinUCB.from_state(policy.to_state())
    >>> x = {"favorite": "a5", "device": "desktop"}
    >>> clone.probabilities(x) == policy.probabilities(x)
    True

    References
    ----------
    Li, L., Chu, W., Langford, J., Schapire, R. E. A Contextual-Bandit Approach to Personalized
    News Article Recommendation. WWW 2010.
    """

    FORMAT = "grove.linucb"
    # 2: the columns' scales (a version-1 state's are all 1: what it learned with); 3: when each
    # feature column was seen (``seen``; a version-2 state's: once, at its last event)
    VERSION = 3

    def __init__(self, alpha: float = 1.0, ridge: float = 1.0, epsilon: float = 0.01,
                 fit_intercept: bool = True, weighting: str = "none", max_columns: int = 128,
                 drift_delta: float | None = 0.01, forget_after: int | None = 100_000,
                 seed: int | None = None):
        if not (alpha >= 0.0 and math.isfinite(alpha)):
            raise ValueError(f"alpha must be a finite number >= 0, got {alpha}")
        if not (ridge > 0.0 and math.isfinite(ridge)):
            raise ValueError(f"ridge must be a finite number > 0, got {ridge}")
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must be in [0, 1], got {epsilon}")
        if weighting not in ("none", "ips"):
            raise ValueError(f"weighting must be 'none' or 'ips', got {weighting!r}")
        if not (isinstance(max_columns, int) and max_columns >= 1):
            raise ValueError(f"max_columns must be an int >= 1, got {max_columns!r}")
        if drift_delta is not None and not 0.0 < drift_delta < 1.0:
            raise ValueError(f"drift_delta must be in (0, 1) or None, got {drift_delta!r}")
        if forget_after is not None and not (isinstance(forget_after, int)
                                             and not isinstance(forget_after, bool)
                                             and forget_after >= 1):
            raise ValueError(f"forget_after must be an int >= 1 or None, got {forget_after!r}")
        self.alpha = alpha
        self.ridge = ridge
        self.epsilon = epsilon
        self.fit_intercept = bool(fit_intercept)
        self.weighting = weighting
        self.max_columns = max_columns
        self.drift_delta = drift_delta
        self.forget_after = forget_after
        self._monitor = None if drift_delta is None else ResidualMonitor(0, drift_delta)
        self._changes = 0  # actions restarted
        self._A_inv = np.zeros((0, 0, 0))  # (action capacity, d capacity, d capacity)
        self._b = np.zeros((0, 0))
        self._plays = np.zeros(0, np.int64)  # events learned per action
        self._scale = np.ones(0)  # per coded column (the intercept's 1): powers of 2, >= 1
        # per feature column (int64, events counted from the first learned): the events that
        # set it (non-zero), the first and the last of them, and when it was created or
        # last forgotten: what _stale_columns reads
        self._seen = np.zeros((4, 0), np.int64)
        self._next_stale_check = 0  # no column can have stopped before (_stale_columns)
        # the largest |value| a coded column holds when learned: LARGEST_CODED times the power
        # of 2 nearest below sqrt(lambda) (1 for the default lambda), so that x^2 / lambda,
        # what A's condition grows with, stays under 2^40 whatever the penalty
        self._bound = LARGEST_CODED * 2.0 ** math.floor(math.log2(math.sqrt(ridge)))
        super().__init__(seed=seed)

    def _new_encoder(self) -> FeatureEncoder:
        return FeatureEncoder(categories="one-hot", missing="zero", max_columns=self.max_columns)

    @property
    def _d(self) -> int:
        return self._encoder.n_columns + self.fit_intercept

    def _vector(self, x: np.ndarray) -> np.ndarray:
        """The coded, scaled vector of an encoded context."""
        xv = np.concatenate(([1.0], x)) if self.fit_intercept else x
        return xv / self._scale[:len(xv)]

    # -- the algorithm -------------------------------------------------------------------------

    def _resize(self, n_actions: int, n_columns: int) -> None:
        K, dc = self._A_inv.shape[:2]
        d = n_columns + self.fit_intercept
        if n_actions <= K and d <= dc:
            return
        K2 = max(K, n_actions) if n_actions <= K else max(2 * K, n_actions, 4)
        d2 = max(dc, d) if d <= dc else max(2 * dc, d, 8)
        A_inv = np.zeros((K2, d2, d2))
        A_inv[:, np.arange(d2), np.arange(d2)] = 1.0 / self.ridge  # unseen columns: lambda I
        A_inv[:K, :dc, :dc] = self._A_inv
        b = np.zeros((K2, d2))
        b[:K, :dc] = self._b
        counts = np.zeros(K2, np.int64)
        counts[:K] = self._plays
        scale = np.ones(d2)
        scale[:dc] = self._scale[:dc]
        seen = np.zeros((4, d2), np.int64)
        seen[:, :self._seen.shape[1]] = self._seen
        seen[CREATED, self._seen.shape[1]:] = self._n_learned
        self._A_inv, self._b, self._plays, self._scale = A_inv, b, counts, scale
        self._seen = seen
        if self._monitor is not None:
            self._monitor.resize(K2)

    def _distribution(self, x: np.ndarray, known: np.ndarray) -> np.ndarray:
        xv = self._vector(x)
        probs = np.empty(len(known))
        ucb_distribution(xv, known, self._A_inv, self._b, self.alpha, self.ridge, self.epsilon,
                         probs)
        return probs

    def distribution_rows(self, xs: list[dict], actions=None) -> tuple[list, np.ndarray]:
        """The inventory's actions (or ``actions``), and for each context of ``xs`` the
        distribution :meth:`decide` would draw from over them (row i: ``xs[i]``; the values of
        :meth:`probabilities`, in that order, bit for bit).

        For an evaluator (``AutoPolicy``) that needs many rows at once: one compiled loop over
        the rows, no dict per row."""
        candidates, known = self._candidates(actions, ())
        X = self._rows(xs)
        probs = np.empty((len(xs), len(known)))
        ucb_distribution_rows(X, known, self._A_inv, self._b, self.alpha, self.ridge,
                              self.epsilon, probs)
        return candidates, probs

    def offered_rows(self, xs: list[dict], offers: list[tuple],
                     features: list | None = None) -> list[np.ndarray]:
        """For each context of ``xs``, the distribution :meth:`decide` would draw from over the
        actions its request offered (``offers[i]``): ``probabilities(xs[i], offers[i])``, in
        that order, bit for bit. One compiled loop over the rows. (``features``, the actions'
        own, are not read: LinUCB learns per action id.)"""
        if not xs:
            return []
        known, columns = self._offered_candidates(offers)
        flat = known[np.concatenate(columns)]
        starts = np.concatenate([[0], np.cumsum([len(cols) for cols in columns])])
        out = np.empty(len(flat))
        ucb_offered_rows(self._rows(xs), flat, starts, self._A_inv, self._b, self.alpha,
                         self.ridge, self.epsilon, out)
        return np.split(out, starts[1:-1])

    def _rows(self, xs: list[dict]) -> np.ndarray:
        """The contexts as LinUCB's vectors, one row each."""
        X = np.empty((len(xs), self._d))
        for i, x in enumerate(xs):
            X[i] = self._vector(self._encoder.encode(x)[0])  # (a row at a time: the encoder's)
        return X

    def scores(self, x: dict, actions=None, excluded=()) -> dict:
        """The upper confidence bound p_a of each candidate (eq. (5))."""
        xv, _ = self._encoder.encode(x)
        candidates, known = self._candidates(actions, excluded)
        out = np.empty(len(known))
        ucb_scores(self._vector(xv), known, self._A_inv, self._b, self.alpha, self.ridge, out)
        return dict(zip(candidates, out.tolist()))

    def _weight(self, probability: float) -> float:
        return 1.0 / probability if self.weighting == "ips" else 1.0

    def _learn(self, x: np.ndarray, k: int, reward: float, probability: float) -> None:
        self._learn_batch(x[None], np.array([k]), np.array([reward]), np.array([probability]))

    def _learn_batch(self, X, ks, rewards, probabilities) -> None:
        self._count_seen(X)
        if self.fit_intercept:
            X = np.hstack([np.ones((len(X), 1)), X])
        weights = 1.0 / probabilities if self.weighting == "ips" else np.ones(len(X))
        # the rows after which a column's scale grows are learned before it grows (as one
        # learn_one at a time would): the batch is learned in runs of one scale each
        scaled = np.empty_like(X)
        if scale_rows(X, self._scale, self._bound, scaled):  # (the usual case: no scale grows)
            self._learn_scaled(scaled, ks, rewards, weights, 0)
            return
        grows = self._scale_runs(np.abs(X))
        for lo, hi in zip(grows[:-1], grows[1:]):
            self._grow_scale(np.abs(X[lo]))
            self._learn_scaled(X[lo:hi] / self._scale[:X.shape[1]], ks[lo:hi], rewards[lo:hi],
                               weights[lo:hi], lo)

    def _count_seen(self, X: np.ndarray) -> None:
        """Count the features each row of ``X`` (encoded events, the next to learn) sets."""
        count_seen(X, self._n_learned, self._seen)

    _forgets_columns = True

    def _stale_columns(self, n: int, xv: np.ndarray) -> list[int]:
        """Up to ``n`` columns whose features have stopped coming, the surest first.

        A feature's events are taken to come at a steady rate while it lives (a Poisson
        stream): its mean gap is estimated from its events, ``(last - first + G) / count``,
        with a prior gap ``G``, the columns' average gap (columns x events / features set),
        worth one gap; it has stopped when it has been away for more than ``STALE_GAPS`` (16)
        of its mean gaps, which a living feature does with probability e^-16 (1e-7) each time
        it is away: a stream that keeps sending a feature does not lose it by chance in its
        lifetime. A campaign seen every 20 events is gone ~320 events after its last; a value
        seen every 500 events stays unless it is away for 8,000. A column never set counts from
        its creation with the prior gap. The context being learned keeps its own features.

        A stream past the bound misses a column at most events: the columns are looked at
        again only once the first of them can have stopped (its events until then, at the
        rates of now; a column seen since only stops later). No column is free here (a
        one-hot encoder's free column goes to the next new feature of any kind)."""
        now = self._n_learned
        if now < self._next_stale_check:
            return []
        d = self._encoder.n_columns
        seen = self._seen[:, :d]
        counted = seen[COUNT] > 0
        since = np.where(counted, seen[LAST], seen[CREATED])
        prior = d * (now + 1) / max(int(seen[COUNT].sum()), 1)
        gap = (np.where(counted, seen[LAST] - seen[FIRST], 0) + prior) / np.maximum(seen[COUNT], 1)
        away = (now - since) / gap
        away[np.flatnonzero(xv[:d])] = 0.0
        order = np.argsort(-away, kind="stable")[:n]
        stale = [int(j) for j in order if away[j] > STALE_GAPS]
        if not stale:
            self._next_stale_check = now + max(1, int(np.min((STALE_GAPS - away) * gap)))
        return stale

    def _seen_of_columns(self) -> np.ndarray:
        """``_seen`` of the encoder's columns (4 x columns; a column the arrays have no room
        for yet, before the first action: never seen)."""
        n = self._encoder.n_columns
        out = np.zeros((4, n), np.int64)
        k = min(n, self._seen.shape[1])
        out[:, :k] = self._seen[:, :k]
        return out

    def _forget_columns(self, columns: list[int]) -> None:
        """Every action's statistics as if the features of ``columns`` had never been seen:
        ``A^-1`` of the other columns is the inverse of their block of A (the Schur
        complement, ``M - M[:, j] M[j, :] / M[j, j]``: exact), the column's row and column of A
        are lambda I's again, its ``b`` entry 0 and its scale 1."""
        K = len(self._actions)
        for j in columns:
            i = j + self.fit_intercept
            M = self._A_inv[:K]
            pivot = M[:, i, :].copy()
            M -= pivot[:, :, None] * pivot[:, None, :] / pivot[:, i, None, None]
            M[:, i, :] = 0.0
            M[:, :, i] = 0.0
            M[:, i, i] = 1.0 / self.ridge
            self._b[:K, i] = 0.0
            self._scale[i] = 1.0
            self._seen[:, j] = 0
            self._seen[CREATED, j] = self._n_learned

    def _scale_runs(self, magnitudes: np.ndarray) -> list[int]:
        """Where the rows of ``magnitudes`` (|coded rows|, in order) start runs of one scale
        vector: 0, each row that needs a column's scale to grow, and the number of rows."""
        d = magnitudes.shape[1]
        # (the first row: the largest magnitudes the current scales admit, which they give back)
        admitted = self._scale[None, :d] * self._bound
        running = np.maximum.accumulate(np.vstack([admitted, magnitudes]), axis=0)
        needed = column_scales(running, self._bound)
        starts = np.flatnonzero((needed[1:] != needed[:-1]).any(axis=1))
        return [0, *[int(i) for i in starts if i > 0], len(magnitudes)]

    def _grow_scale(self, magnitudes: np.ndarray) -> None:
        """Grow the scales of the columns whose ``magnitudes`` pass them, the statistics
        re-expressed in the new coordinates (see the class's docstring)."""
        d = len(magnitudes)
        new = np.maximum(self._scale[:d], column_scales(magnitudes, self._bound))
        grown = np.flatnonzero(new > self._scale[:d])
        if not len(grown):
            return
        ratios = self._scale[grown] / new[grown]
        rescale_columns(self._A_inv, self._b, grown, ratios, self.ridge, len(self._actions))
        self._scale[grown] = new[grown]

    def _learn_scaled(self, X, ks, rewards, weights, offset: int) -> None:
        """Learn scaled rows, the first of them the batch's row ``offset`` (the events are
        numbered from the events learned before the batch: the drift monitor's clock)."""
        if self._monitor is None:
            learn_events(X, ks, rewards, weights, self._A_inv, self._b)
            np.add.at(self._plays, ks, 1)
            return
        done, first = 0, self._n_learned + offset  # the events' numbers
        self._monitor.reserve(ks)  # (a restart only empties rings: the room stays enough)
        while done < len(X):
            n, start = learn_watched(X[done:], ks[done:], rewards[done:], weights[done:],
                                     (self._A_inv, self._b), self._monitor.rings(),
                                     (self.drift_delta, first + done))
            np.add.at(self._plays, ks[done:done + n], 1)
            done += n
            if start >= 0:
                self._restart(int(ks[done - 1]), int(start))

    def _restart(self, k: int, start: int) -> None:
        """Action ``k``'s errors changed from event ``start`` on: it, and each other action
        whose errors since ``start`` also changed, starts afresh (lambda I, 0)."""
        changed = self._monitor.changed_with(k, start, range(len(self._actions)))
        self._A_inv[changed] = np.eye(self._A_inv.shape[1]) / self.ridge
        self._b[changed] = 0.0
        self._changes += len(changed)

    def _forget_horizon(self) -> int | None:
        return self.forget_after

    def _keep_actions(self, keep: np.ndarray) -> None:
        self._A_inv, self._b, self._plays = self._A_inv[keep], self._b[keep], self._plays[keep]
        if self._monitor is not None:
            self._monitor.select(keep)

    @property
    def n_changes(self) -> int:
        """Actions restarted after a change in their rewards (see ``drift_delta``)."""
        return self._changes

    # -- state ---------------------------------------------------------------------------------

    def _model_state(self, statistics: bool) -> dict:
        # (room for every column, the intercept's and those coded before the first action)
        self._resize(len(self._actions), self._encoder.n_columns)
        K, d = len(self._actions), self._d
        state = {"A_inv": self._A_inv[:K, :d, :d].copy(), "b": self._b[:K, :d].copy(),
                 "counts": self._plays[:K].copy(), "n_changes": self._changes,
                 "scale": self._scale[:d].copy(),
                 "seen": self._seen_of_columns(),
                 "next_stale_check": self._next_stale_check}
        if statistics and self._monitor is not None:
            state["monitor"] = self._monitor.to_state()
        return state

    def _load_model_state(self, state: dict) -> None:
        A_inv = np.asarray(state["A_inv"], float)
        if A_inv.size == 0:  # no action yet (JSON keeps no shape of an empty array)
            A_inv = np.zeros((0, self._d, self._d))
        K, d = A_inv.shape[0], A_inv.shape[1]
        self._A_inv = np.zeros((0, 0, 0))
        self._b = np.zeros((0, 0))
        self._plays = np.zeros(0, np.int64)
        self._resize(K, d - self.fit_intercept)
        self._A_inv[:K, :d, :d] = A_inv
        self._b[:K, :d] = np.asarray(state["b"], float).reshape(K, d)
        self._plays[:K] = np.asarray(state["counts"], np.int64)
        if "scale" in state:  # (version 1: every column's scale 1)
            self._scale[:d] = checked_scales(state["scale"], d, "scale")
        n = self._encoder.n_columns  # (restored first; A^-1 has no columns without actions)
        if self._seen.shape[1] < n:
            self._seen = np.concatenate([self._seen, np.zeros((4, n - self._seen.shape[1]),
                                                              np.int64)], axis=1)
        if "seen" in state:
            seen = np.asarray(state["seen"], np.int64).reshape(4, -1)
            if seen.shape[1] != n:
                raise ValueError(f"seen must be 4 x {n} (one column per feature column), got "
                                 f"{seen.shape}")
            self._seen[:, :n] = seen
        else:  # (written before: every feature taken as seen once, now)
            self._seen[:, :n] = [[1], [self._n_learned], [self._n_learned], [self._n_learned]]
        self._next_stale_check = int(state.get("next_stale_check", 0))
        self._changes = int(state.get("n_changes", 0))
        if self._monitor is not None and "monitor" in state:
            self._monitor = ResidualMonitor.from_state(state["monitor"])
            self._monitor.resize(self._A_inv.shape[0])

    @classmethod
    def _check_state(cls, state: dict) -> None:
        """Versions 1 (no scales: all 1), 2 (no ``seen``) and 3 are read."""
        super()._check_state({**state, "version": cls.VERSION}
                             if state.get("version") in (1, 2) else state)

    @classmethod
    def _unit_test_params(cls):
        yield {"alpha": 1.0, "seed": 42}


# -- compiled kernels ----------------------------------------------------------------------------


@njit(cache=True)
def count_seen(X, first_event, seen):
    """``LinUCB._seen`` after the rows of ``X``, events ``first_event``, ``first_event + 1``,
    ...: each non-zero entry's column counted, its first and last event kept."""
    for r in range(X.shape[0]):
        event = first_event + r
        for j in range(X.shape[1]):
            if X[r, j] != 0.0:
                if seen[COUNT, j] == 0:
                    seen[FIRST, j] = event
                seen[COUNT, j] += 1
                seen[LAST, j] = event


@njit(cache=True)
def ucb_scores(x, known, A_inv, b, alpha, ridge, out):
    """p_a = b_a . (A_a^{-1} x) + alpha sqrt(x . A_a^{-1} x) per candidate (eq. (5));
    ``known[j] < 0``: a fresh action (A = lambda I, b = 0).

    Only x's non-zero entries are read (one-hot and 0/1 contexts are mostly zeros): d x nnz
    products per candidate instead of d^2. The sums are the same, term for term in the same
    order, less the zero terms, so the scores are bit-identical to the dense loops'."""
    d = x.shape[0]
    nz = np.empty(d, np.int64)
    nnz = 0
    xx = 0.0
    for i in range(d):
        if x[i] != 0.0:
            nz[nnz] = i
            nnz += 1
            xx += x[i] * x[i]
    for j in range(known.shape[0]):
        k = known[j]
        if k < 0:
            out[j] = alpha * math.sqrt(xx / ridge)
            continue
        mean = 0.0
        var = 0.0
        for r in range(d):
            u = 0.0
            for i in range(nnz):
                c = nz[i]
                u += A_inv[k, r, c] * x[c]
            mean += b[k, r] * u
            if x[r] != 0.0:
                var += x[r] * u
        out[j] = mean + alpha * math.sqrt(max(var, 0.0))


@njit(cache=True)
def ucb_distribution(x, known, A_inv, b, alpha, ridge, epsilon, out):
    """The exploration rule's probabilities: 1 - epsilon split over the best scores (ties within
    1e-12 relative), epsilon / n to each of the n candidates."""
    n = known.shape[0]
    ucb_scores(x, known, A_inv, b, alpha, ridge, out)
    best = out.max()
    tol = 1e-12 * max(1.0, abs(best))
    n_best = 0
    for j in range(n):
        if out[j] >= best - tol:
            n_best += 1
    floor = epsilon / n
    top = (1.0 - epsilon) / n_best
    for j in range(n):
        out[j] = floor + top if out[j] >= best - tol else floor


@njit(cache=True)
def sherman_morrison(x, k, reward, weight, A_inv, b):
    """A_a += w x x^T through its inverse (Sherman-Morrison), b_a += w r x. Returns theta_a . x
    before the update, ``b_a . (A_a^-1 x)`` (the event's held-out prediction: the product
    ``A_a^-1 x`` is the update's own)."""
    d = x.shape[0]
    u = np.zeros(d)
    for r in range(d):
        s = 0.0
        for c in range(d):
            if x[c] != 0.0:
                s += A_inv[k, r, c] * x[c]
        u[r] = s
    predicted = 0.0
    denom = 1.0
    for r in range(d):
        predicted += b[k, r] * u[r]
        denom += weight * x[r] * u[r]
    scale = weight / denom
    for r in range(d):
        ur = scale * u[r]
        for c in range(d):
            A_inv[k, r, c] -= ur * u[c]
        b[k, r] += weight * reward * x[r]
    return predicted


@njit(cache=True)
def scale_rows(X, scale, limit, out):
    """``out = X / scale`` (per column); whether every ``|out|`` is at most ``limit``."""
    fits = True
    for i in range(X.shape[0]):
        for j in range(X.shape[1]):
            out[i, j] = X[i, j] / scale[j]
            fits &= abs(out[i, j]) <= limit
    return fits


@njit(cache=True)
def rescale_columns(A_inv, b, columns, ratios, ridge, n_actions):
    """Column ``columns[i]``'s scale grew by ``1 / ratios[i]`` (a power of 2: exact). Each
    action's ``A = lambda I + sum x x^T`` and ``b = sum r x`` become those of the past events
    with that column's values times the ratio c: ``A' = D A D + lambda (1 - c^2) e e^T`` (D the
    identity with c for the column), so ``A'^{-1}`` is ``D^{-1} A^{-1} D^{-1}`` (row and column
    divided by c) updated by Sherman-Morrison for the added ``w e e^T``, ``w = lambda (1 -
    c^2)``: with ``u`` the column (u_j its diagonal entry) and ``g = 1 / (1 + w u_j)``, the
    column's row and column become ``g u`` and every other entry ``A^{-1}_rs - w g u_r u_s``
    (written so, not as a difference, for the column's own entries: a column never learned has
    ``u_j = 1 / (lambda c^2)``, whose ``g u_j`` is 1 / lambda again, exactly enough)."""
    d = b.shape[1]
    for i in range(columns.shape[0]):
        j = columns[i]
        c = ratios[i]
        w = ridge * (1.0 - c * c)
        for k in range(n_actions):
            for r in range(d):
                A_inv[k, r, j] /= c
                A_inv[k, j, r] /= c  # (the diagonal entry: by c^2)
            b[k, j] *= c
            g = 1.0 / (1.0 + w * A_inv[k, j, j])
            for r in range(d):
                if r == j:
                    continue
                ur = A_inv[k, r, j]
                if ur == 0.0:
                    continue
                for s in range(d):
                    if s != j:
                        A_inv[k, r, s] -= w * g * ur * A_inv[k, s, j]
            for r in range(d):
                A_inv[k, r, j] *= g
                if r != j:
                    A_inv[k, j, r] = A_inv[k, r, j]


@njit(cache=True)
def ucb_distribution_rows(X, known, A_inv, b, alpha, ridge, epsilon, out):
    """:func:`ucb_distribution` for each row of ``X`` into the row of ``out``."""
    for i in range(X.shape[0]):
        ucb_distribution(X[i], known, A_inv, b, alpha, ridge, epsilon, out[i])


@njit(cache=True)
def ucb_offered_rows(X, known, starts, A_inv, b, alpha, ridge, epsilon, out):
    """:func:`ucb_distribution` for each row of ``X`` over its own candidates: row i's are
    ``known[starts[i]:starts[i + 1]]``, its probabilities go to the same slice of ``out``."""
    for i in range(X.shape[0]):
        lo, hi = starts[i], starts[i + 1]
        ucb_distribution(X[i], known[lo:hi], A_inv, b, alpha, ridge, epsilon, out[lo:hi])


@njit(cache=True)
def learn_watched(X, ks, rewards, weights, model, rings, watch):
    """:func:`sherman_morrison` for each row, in order, each event's held-out error (its
    reward minus ``b_k . A_k^-1 x`` before the update) tested as it comes
    (:func:`~online.policies.drift.watch_error`; ``model``: (A_inv, b), ``rings``: the
    monitor's arrays, ``watch``: (delta, the first row's event number)).
    Stops after the first event whose test rejects: returns (rows learned, the change's start
    event, or -1 when every row was learned without one)."""
    A_inv, b = model
    delta, first = watch
    for i in range(X.shape[0]):
        k = ks[i]
        predicted = sherman_morrison(X[i], k, rewards[i], weights[i], A_inv, b)
        start = watch_error(rings, k, rewards[i], predicted, first + i, delta)
        if start >= 0:
            return i + 1, start
    return X.shape[0], -1


@njit(cache=True)
def learn_events(X, ks, rewards, weights, A_inv, b):
    """:func:`sherman_morrison` for each row, in order."""
    for i in range(X.shape[0]):
        sherman_morrison(X[i], ks[i], rewards[i], weights[i], A_inv, b)
