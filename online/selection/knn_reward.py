"""Fast validated k-NN accuracy of feature subsets: the reward of R-MOTiFS, eq. (3).

A wrapper feature selector scores thousands of column subsets of the same rows. Refitting a
scikit-learn ``KNeighborsClassifier`` for each is wasteful: only the columns change, and
squared Euclidean distances are additive over features,

    d_S(a, b) = sum_{f in S} (a_f - b_f) ** 2 = |a_S|^2 + |b_S|^2 - 2 a_S . b_S.

Two exact ways of using that, both ending in the compiled k-slot neighbour search of
``knn_kernels`` (no rows x rows matrix, no sort):

- ``"direct"``: per query row, the distances are summed feature by feature from the
  feature-major copy of X (a streaming, vectorised loop); as fast as "gram" on subsets of a
  few columns, up to 2x slower on half of Sonar's or WDBC's.
- ``"gram"``: per block of query rows, one BLAS product ``X_S X_S^T``; the kernel ranks rows
  by ``|b_S|^2 - 2 a_S . b_S`` (``|a_S|^2`` is constant along a query's row) from the summed
  per-feature squares; best for subsets of more than ``AUTO_DIRECT_MAX`` columns.

``"auto"`` (default) picks by the subset's size. Rewards are cached by subset: the tree search
revisits subsets, more so in late recursions.

Validation (which rows vote for which): a row's k nearest neighbours are searched only among
rows of other groups. ``"loo"``: every row is its own group (leave-one-out). ``"kfold:K"``:
stratified K folds; ``"kfold:KxR"``: R repetitions with different seeded partitions, averaged;
``"holdout:P"``: a stratified share P of the rows is validated against the others;
``"resub"``: resubstitution, the training accuracy (every row is among its own neighbours).
"""

from __future__ import annotations

import numpy as np

from online.selection.knn_kernels import knn_hits, knn_hits_from_products

__all__ = ["KNNReward", "validation_groups"]

# "auto": "direct" up to this many columns, "gram" above (bench/r_motifs/README.md)
AUTO_DIRECT_MAX = 4
_GRAM_BLOCK = 64  # query rows per BLAS block (64 was 1.5x faster than 256 on Spambase)


def _stratified_folds(codes, n_folds, rng):
    """Fold id per row: each class's rows shuffled and dealt round-robin to the folds."""
    folds = np.empty(len(codes), dtype=np.int64)
    start = 0
    for c in np.unique(codes):
        rows = rng.permutation(np.flatnonzero(codes == c))
        folds[rows] = (start + np.arange(len(rows))) % n_folds
        start += len(rows)  # continue the deal where the previous class stopped
    return folds


def validation_groups(validation, codes, rng):
    """Parse ``validation``; returns a list of (groups per row, query rows), one per repetition.

    >>> codes = np.array([0, 0, 0, 1, 1, 1])
    >>> [g.tolist() for g, _ in validation_groups("loo", codes, np.random.default_rng(0))]
    [[0, 1, 2, 3, 4, 5]]
    >>> len(validation_groups("kfold:3x2", codes, np.random.default_rng(0)))
    2
    """
    n = len(codes)
    kind, _, arg = str(validation).partition(":")
    if kind == "loo" and not arg:
        return [(np.arange(n, dtype=np.int64), np.arange(n))]
    if kind == "resub" and not arg:  # group -1: no row is excluded, the query itself votes
        return [(np.full(n, -1, dtype=np.int64), np.arange(n))]
    if kind == "kfold":
        k, _, r = arg.partition("x")
        n_folds, repeats = int(k), int(r or 1)
        if not 2 <= n_folds <= n or repeats < 1:
            raise ValueError(f"bad k-fold validation {validation!r}")
        return [(_stratified_folds(codes, n_folds, rng), np.arange(n)) for _ in range(repeats)]
    if kind == "holdout":
        share = float(arg)
        if not 0.0 < share < 1.0:
            raise ValueError(f"holdout share must be in (0, 1), got {validation!r}")
        # stratified: the same share of every class's rows is validated
        groups = np.zeros(n, dtype=np.int64)
        for c in np.unique(codes):
            rows = rng.permutation(np.flatnonzero(codes == c))
            groups[rows[:max(1, round(share * len(rows)))]] = 1
        return [(groups, np.flatnonzero(groups == 1))]
    raise ValueError(f"validation must be 'loo', 'kfold:K', 'kfold:KxR', 'holdout:P' or "
                     f"'resub', got {validation!r}")


class KNNReward:
    """Validated k-NN accuracy of column subsets of fixed rows, with a cache.

    With ``validation="loo"`` it equals
    ``cross_val_score(KNeighborsClassifier(k), X[:, S], y, cv=LeaveOneOut()).mean()``
    (uniform weights, Euclidean distance), except for exact ties in distance at the k-th
    neighbour, which go to the lower row index here (``distance_ties="index"``). Ties in the
    vote go to the smallest class, as in scikit-learn.

    Parameters
    ----------
    X : array of shape (n_samples, n_features)
        Rows, already scaled the way the distances should see them.
    y : array of shape (n_samples,)
        Labels (any sortable values).
    n_neighbors : int
        k of k-NN.
    validation : str
        "loo", "kfold:K", "kfold:KxR", "holdout:P" or "resub" (module docstring).
    queries : array of int, optional
        Only these rows are classified (each still against all rows it may use): the same
        estimate on fewer rows, for large data. Not with "holdout".
    method : {"auto", "direct", "gram"}
        How distances are built (module docstring).
    distance_ties : {"index", "share"}
        Rows tied at the k-th nearest distance: "index" (default) keeps the lower row index
        first; "share" lets every tied row vote with an equal share of the places left (ties
        within ``1e-9`` times the largest squared norm of the subset, so the rounding of the
        "gram" path does not matter).
    random_state : int, numpy Generator or None
        Seeds the k-fold and holdout partitions (drawn once, at construction).
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
    >>> 0.5 < KNNReward(X, y, validation="kfold:5x2", random_state=0)(np.array([1, 0, 0, 0])) <= 1
    True
    """

    def __init__(self, X, y, n_neighbors=5, validation="loo", queries=None, method="auto",
                 random_state=None, cache=True, distance_ties="index"):
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D, got shape {X.shape}")
        n = X.shape[0]
        if len(y) != n:
            raise ValueError(f"X has {n} rows but y has {len(y)}")
        if not 1 <= n_neighbors < n:
            raise ValueError(f"n_neighbors must be in [1, n_samples - 1], "
                             f"got {n_neighbors} with {n} rows")
        if method not in ("auto", "direct", "gram"):
            raise ValueError(f"method must be 'auto', 'direct' or 'gram', got {method!r}")
        if distance_ties not in ("index", "share"):
            raise ValueError(f"distance_ties must be 'index' or 'share', got {distance_ties!r}")
        self.n_neighbors = n_neighbors
        self.method = method
        self.distance_ties = distance_ties
        self.classes_, codes = np.unique(np.asarray(y), return_inverse=True)
        self._codes = codes.astype(np.int64)
        self._splits = validation_groups(
            validation, self._codes, np.random.default_rng(random_state)
        )
        if queries is not None:
            if str(validation).startswith("holdout"):
                raise ValueError("queries cannot be combined with holdout validation")
            q = np.asarray(queries, dtype=np.int64)
            self._splits = [(g, q) for g, _ in self._splits]
        self._X = X
        self._XT = np.ascontiguousarray(X.T)  # feature-major: one feature's values contiguous
        self._sq = X * X
        self._cache = {} if cache else None
        self.n_evaluations = 0
        self.n_cache_hits = 0

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
        cols = np.flatnonzero(mask).astype(np.int64)
        value = 0.0 if len(cols) == 0 else float(np.mean([
            self._hits(cols, groups, queries) / len(queries) for groups, queries in self._splits]))
        if self._cache is not None:
            self._cache[key] = value
        return value

    def _hits(self, cols, groups, queries) -> int:
        k, n_classes = self.n_neighbors, len(self.classes_)
        method = self.method
        if method == "auto":
            method = "direct" if len(cols) <= AUTO_DIRECT_MAX else "gram"
        tie_eps, norms = -1.0, None
        if self.distance_ties == "share" or method == "gram":
            norms = self._sq[:, cols].sum(axis=1)
        if self.distance_ties == "share":
            tie_eps = 1e-9 * max(1.0, float(norms.max()))
        if method == "direct":
            return int(
                knn_hits(self._XT, cols, queries, groups, self._codes, k, n_classes, tie_eps)
            )
        xs = self._X[:, cols]
        xs_t = np.ascontiguousarray(xs.T)
        hits = 0
        for start in range(0, len(queries), _GRAM_BLOCK):
            block = queries[start:start + _GRAM_BLOCK]
            hits += knn_hits_from_products(xs[block] @ xs_t, norms, block, groups, self._codes,
                                           k, n_classes, tie_eps)
        return int(hits)
