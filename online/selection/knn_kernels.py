"""Compiled k-NN validation kernels of the R-MOTiFS reward (eq. 3): one pass per query row.

A query row's distances to every row are built column by column from the subset's features
(squared Euclidean distance is a sum over features), the k nearest rows that may vote for it
are kept by insertion into a k-slot list, and their labels vote. Nothing of size rows x rows is
ever allocated: the work is ``n_queries * n_rows * (|S| + 1)`` streaming steps.

Which rows may vote for query row i: every row j whose group differs, ``groups[j] !=
groups[i]``; a query of negative group is voted on by every row, itself included. One rule
covers the validations of ``KNNReward``: leave-one-out (each row its own group), k-fold (group =
fold), holdout (training rows in one group, validation rows in another), resubstitution (-1).

Distance ties at the k-th place: with ``tie_eps < 0`` the lower row index goes first (as a
stable sort, scikit-learn's usual result); with ``tie_eps >= 0`` every allowed row within
``tie_eps`` of the k-th distance shares the places left after the strictly nearer rows (each
gets an equal fraction of a vote), so the result does not depend on row order or rounding.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def knn_hits(XT, cols, queries, groups, codes, k, n_classes, tie_eps=-1.0):
    """Number of ``queries`` whose k nearest allowed rows vote their own label.

    XT: features x rows (C order, a feature's values contiguous); cols: the subset's feature
    indices; groups: one int per row (rows of the query's group do not vote). Distance ties at
    the k-th place: module docstring (``tie_eps``); vote ties go to the smallest class code.
    """
    n = XT.shape[1]
    dist, top_d, top_i, votes = _work_arrays(n, k, n_classes)
    hits = 0
    for qi in range(queries.shape[0]):
        q = queries[qi]
        dist[:] = 0.0
        for c in range(cols.shape[0]):
            row = XT[cols[c]]
            xq = row[q]
            for j in range(n):
                diff = row[j] - xq
                dist[j] += diff * diff
        hits += _nearest_vote_hits(dist, q, groups, codes, k, top_d, top_i, votes, tie_eps)
    return hits


@njit(cache=True)
def knn_hits_from_products(prod, norms, queries, groups, codes, k, n_classes, tie_eps=-1.0):
    """``knn_hits`` from a block of inner products ``prod[i] = X_S[queries[i]] . X_S^T``.

    The squared distance is ``|q|^2 + norms[j] - 2 prod[i, j]``; ``|q|^2`` is the same for the
    whole row, so ranking by ``norms[j] - 2 prod[i, j]`` finds the same neighbours (exact
    distance ties may be ordered differently by rounding).
    """
    n = prod.shape[1]
    dist, top_d, top_i, votes = _work_arrays(n, k, n_classes)
    hits = 0
    for qi in range(queries.shape[0]):
        q = queries[qi]
        row = prod[qi]
        for j in range(n):
            dist[j] = norms[j] - 2.0 * row[j]
        hits += _nearest_vote_hits(dist, q, groups, codes, k, top_d, top_i, votes, tie_eps)
    return hits


@njit(cache=True)
def _work_arrays(n, k, n_classes):
    """Distances to the n rows, the k-slot neighbour list (distances, rows), class votes."""
    return (np.empty(n), np.empty(k), np.empty(k, dtype=np.int64),
            np.zeros(n_classes, dtype=np.int64))


@njit(cache=True)
def _nearest_vote_hits(dist, q, groups, codes, k, top_d, top_i, votes, tie_eps):
    """1 if the k rows nearest to query q by ``dist`` (rows of q's group excluded, unless the
    group is negative) vote q's label, else 0. Ties at the k-th distance: module docstring;
    vote ties go to the smallest class code. ``top_d``, ``top_i``, ``votes``: work arrays of
    size k, k, n_classes."""
    g = groups[q]
    top_d[:] = np.inf
    top_i[:] = -1
    for j in range(dist.shape[0]):
        d = dist[j]
        if d < top_d[k - 1] and (g < 0 or groups[j] != g):
            p = k - 1
            while p > 0 and top_d[p - 1] > d:  # strict: an equal earlier row stays ahead
                top_d[p] = top_d[p - 1]
                top_i[p] = top_i[p - 1]
                p -= 1
            top_d[p] = d
            top_i[p] = j
    votes[:] = 0
    if tie_eps >= 0.0 and top_i[k - 1] >= 0:
        # rows strictly nearer than the k-th distance vote 1; the n_tied rows tied with it
        # share the k - n_less places left. Votes are kept times n_tied, in integers, so that
        # vote ties stay exact: n_tied per nearer row, k - n_less per tied row.
        dk = top_d[k - 1]
        n_less = 0
        for p in range(k):
            if top_d[p] < dk - tie_eps:
                n_less += 1
        n_tied = 0
        for j in range(dist.shape[0]):
            if abs(dist[j] - dk) <= tie_eps and (g < 0 or groups[j] != g):
                n_tied += 1
                votes[codes[j]] += k - n_less
        for p in range(k):
            if top_d[p] < dk - tie_eps:
                votes[codes[top_i[p]]] += n_tied
    else:
        for p in range(k):
            if top_i[p] >= 0:
                votes[codes[top_i[p]]] += 1
    best = 0
    for c in range(1, votes.shape[0]):
        if votes[c] > votes[best]:
            best = c
    return 1 if best == codes[q] else 0
