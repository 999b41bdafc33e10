"""Fast leave-one-out k-NN accuracy of feature subsets: the reward of R-MOTiFS, eq. (3).

A wrapper feature selector scores thousands of column subsets of the same rows. Refitting a
scikit-learn ``KNeighborsClassifier`` for each is wasteful: only the columns change.
Squared Euclidean distances are additive over features,

    d_S(a, b) = sum_{f in S} (a_f - b_f) ** 2 = |a_S|^2 + |b_S|^2 - 2 a_S . b_S,

and two exact ways of building a subset's distance matrix from that are implemented:

- ``"gram"`` (default): per-feature squares are precomputed; a subset sums its columns of
  them and takes one matrix product ``X_S X_S^T`` (BLAS). Memory ``n * n``.
- ``"sum"``: the ``d`` per-feature matrices ``(a_f - b_f)^2`` are precomputed once (memory
  ``d * n * n``); a subset adds its own, or subtracts its complement's from the full matrix.
  No cancellation error, but memory-bound: 2x to 15x slower than ``"gram"`` on every shape
  measured (bench/README_r_motifs.md), so it is kept only as a reference path.

Then the k nearest other rows of every query row vote (the row itself is excluded:
leave-one-out), and the reward is the share of query rows whose vote is their own label.
Above about 300,000 query-row x row pairs (about 550 rows), the full matrix and
``numpy.argpartition`` on it cost more than scikit-learn's chunked brute-force k-nearest search
(``"kneighbors"``: a ``NearestNeighbors`` per subset; 2x faster at 900 rows, 3.5x on
Spambase's 4141), so ``"auto"`` switches to it.
Rewards are cached by subset: the tree search revisits subsets, more so in late recursions.
"""

from __future__ import annotations

import numpy as np
from sklearn.neighbors import NearestNeighbors

__all__ = ["KNNReward"]


class KNNReward:
    """Leave-one-out k-NN accuracy of column subsets of fixed rows, with a cache.

    With ``queries=None`` it equals
    ``cross_val_score(KNeighborsClassifier(k), X[:, S], y, cv=LeaveOneOut()).mean()``
    (uniform weights, Euclidean distance), except for exact ties in distance at the k-th
    neighbour, which ``numpy.argpartition`` breaks instead of scikit-learn's neighbour search.
    Ties in the vote go to the smallest class, as in scikit-learn. With ``queries`` only
    those rows are classified (each still against all other rows): the same estimate on
    fewer rows, for large data.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        Rows, already scaled the way the distances should see them.
    y : array of shape (n_samples,)
        Labels (any sortable values).
    n_neighbors : int
        k of k-NN.
    queries : array of int, optional
        Rows whose leave-one-out prediction is scored; all rows when None.
    method : {"auto", "gram", "sum", "kneighbors"}
        How the neighbours are found (see the module docstring); "auto" is "gram" up to
        ``AUTO_GRAM_PAIRS`` query-row x row pairs and "kneighbors" above.
    dtype : numpy dtype
        float64 by default; float32 is faster but can flip near-ties.
    cache : bool
        Keep the accuracy of every subset evaluated.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(60, 4))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> reward = KNNReward(X, y, n_neighbors=5)
    >>> reward(np.array([True, False, False, False])) > reward(np.array([False, True, True, True]))
    True
    >>> reward(np.zeros(4, dtype=bool))  # the empty subset classifies nothing
    0.0
    >>> reward(np.array([True, False, False, False])) == reward(np.array([1, 0, 0, 0]))
    True
    >>> reward.n_evaluations, reward.n_cache_hits
    (3, 2)
    """

    def __init__(self, X, y, n_neighbors=5, queries=None, method="auto", dtype=np.float64,
                 cache=True):
        X = np.asarray(X, dtype=dtype)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        n = X.shape[0]
        if len(y) != n:
            raise ValueError(f"X has {n} rows but y has {len(y)}")
        if not 1 <= n_neighbors < n:
            raise ValueError(f"n_neighbors must be in [1, n_samples - 1], "
                             f"got {n_neighbors} with {n} rows")
        if method not in ("auto", "gram", "sum", "kneighbors"):
            raise ValueError("method must be 'auto', 'gram', 'sum' or 'kneighbors', "
                             f"got {method!r}")
        self.n_neighbors = n_neighbors
        self.classes_, codes = np.unique(np.asarray(y), return_inverse=True)
        self._codes = codes.astype(np.intp)
        self._onehot = np.eye(len(self.classes_), dtype=np.int32)[self._codes]
        self._queries = np.arange(n) if queries is None else np.asarray(queries, dtype=np.intp)
        if method == "auto":
            method = "gram" if len(self._queries) * n <= AUTO_GRAM_PAIRS else "kneighbors"
        self.method = method
        self._X = X
        self._sq = X * X
        self._cache = {} if cache else None
        self.n_evaluations = 0
        self.n_cache_hits = 0
        if method == "sum":
            q = X[self._queries]
            # per-feature squared differences, feature-major: one feature is contiguous
            self._per_feature = np.square(q.T[:, :, None] - X.T[:, None, :])
            self._full = self._per_feature.sum(axis=0)

    def __call__(self, mask) -> float:
        """Accuracy of the columns where ``mask`` is true (eq. 3); 0.0 for the empty subset."""
        mask = np.asarray(mask, dtype=bool)
        key = np.packbits(mask).tobytes()
        if self._cache is not None:
            hit = self._cache.get(key)
            if hit is not None:
                self.n_cache_hits += 1
                return hit
        self.n_evaluations += 1
        if not mask.any():
            value = 0.0
        elif self.method == "kneighbors":
            value = self._vote(self._kneighbors(np.flatnonzero(mask)))
        else:
            value = self.accuracy_of(self.distances(mask))
        if self._cache is not None:
            self._cache[key] = value
        return value

    def distances(self, mask) -> np.ndarray:
        """Squared Euclidean distances of the subset, query rows x all rows (a fresh array)."""
        cols = np.flatnonzero(mask)
        if self.method == "sum":
            return self._summed(mask, cols)
        # "gram" (also used by distances() when method is "kneighbors")
        xs = self._X[:, cols]
        sq = self._sq[:, cols].sum(axis=1)
        dist = xs[self._queries] @ xs.T
        dist *= -2.0
        dist += sq[self._queries, None]
        dist += sq[None, :]
        return dist

    def _summed(self, mask, cols) -> np.ndarray:
        pf = self._per_feature
        rest = np.flatnonzero(~mask)
        if len(rest) < len(cols):  # subtract the shorter complement from the full matrix
            dist = self._full.copy()
            for f in rest:
                dist -= pf[f]
            return dist
        dist = pf[cols[0]].copy()
        for f in cols[1:]:
            dist += pf[f]
        return dist

    def accuracy_of(self, dist) -> float:
        """Leave-one-out k-NN accuracy from ``distances()`` (overwrites the self-distances)."""
        q = self._queries
        dist[np.arange(len(q)), q] = np.inf  # leave one out: a row is not its own neighbour
        k = self.n_neighbors
        if k == 1:
            neighbours = dist.argmin(axis=1)[:, None]
        else:
            neighbours = np.argpartition(dist, k - 1, axis=1)[:, :k]
        return self._vote(neighbours)

    def _kneighbors(self, cols) -> np.ndarray:
        """k nearest other rows of each query row, by scikit-learn's brute-force search."""
        q, k = self._queries, self.n_neighbors
        xs = self._X[:, cols]
        idx = NearestNeighbors(n_neighbors=k + 1, algorithm="brute").fit(xs).kneighbors(
            xs[q], return_distance=False)
        is_self = idx == q[:, None]
        # a duplicate row at distance 0 can push a row out of its own k + 1: drop the last then
        is_self[~is_self.any(axis=1), -1] = True
        return idx[~is_self].reshape(len(q), k)

    def _vote(self, neighbours) -> float:
        votes = self._onehot[neighbours].sum(axis=1)  # (n_queries, n_classes)
        predicted = votes.argmax(axis=1)  # first maximum: the smallest class wins a tie
        return float(np.mean(predicted == self._codes[self._queries]))


# above this many query-row x row pairs, "auto" uses scikit-learn's chunked k-nearest search
AUTO_GRAM_PAIRS = 300_000
