"""LinUCB's ``A^-1`` of every model of the linear base (:mod:`~online.policies.ridge`), laid
out for deciding.

A decision reads, for each pair (i, j) of the coded row z's non-zero entries, entry (i, j) of
every candidate's ``A^-1`` (the width ``sqrt(z' A^-1 z)``). So the entries are stored with the
models as the last axis, ``pairs[row(i, j), m]``, and only the upper triangle (``A^-1`` is
symmetric), row by row: ``row(i, j) = start[i] + j`` for ``i <= j``. One pair's entries of all
the models are adjacent, read in one vector run. On Letter (26 actions, a coded row of 77 with
17 non-zeros) a decision's widths read 153 runs of 26 floats, ~300 cache lines. The models-first
layout this replaced (``A^-1[m]`` whole, as the fit makes it) read ~1,100 scattered lines:
2.6 against 7.5 us warm, 4.4 against 11.8 us after a 9 MB sweep (the trees' size) evicted them
(``bench/policies/README.md``, "The widths laid out pair by pair").

The price is on the learn path. One model's rank-one update (:func:`update_model`) writes its
D(D+1)/2 entries strided by the number of models: 2.8 -> 6.2 us per learned event on Letter. In
the service the trainer pays it and the API, which only decides, does not.

With only the diagonal kept (``diagonal``: past ``FULL_COVARIANCE_FLOATS``), entry (i, i) is
``pairs[i, m]`` (``start`` all zeros) and the rest of ``A^-1`` is taken as 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

__all__ = ["Widths", "squared_widths", "update_model"]


def _starts(D: int) -> np.ndarray:
    """Where each row of the upper triangle starts, less its first column: ``row(i, j) =
    start[i] + j``."""
    i = np.arange(D, dtype=np.int64)
    return i * D - i * (i - 1) // 2 - i


@dataclass
class Widths:
    """Every model's ``A^-1`` (float32), pair-major: see the module's docstring.

    >>> c = np.array([[[2.0, 0.5], [0.5, 1.0]], [[4.0, -1.0], [-1.0, 3.0]]], np.float32)
    >>> w = Widths.from_matrices(c)
    >>> w.pairs.tolist()  # rows (0, 0), (0, 1), (1, 1); a column per model
    [[2.0, 4.0], [0.5, -1.0], [1.0, 3.0]]
    >>> bool((w.matrices() == c).all())
    True
    """

    pairs: np.ndarray  # float32 (rows, n_models): 0 rows, no widths kept
    start: np.ndarray  # int64 (D,): row(i, j) = start[i] + j, i <= j (diagonal: zeros)
    diagonal: bool = False

    @classmethod
    def none(cls, n_models: int) -> Widths:
        """No widths (a state of version 1): every width is 0."""
        return cls(np.zeros((0, n_models), np.float32), np.zeros(0, np.int64))

    @classmethod
    def from_matrices(cls, c: np.ndarray) -> Widths:
        """From ``(n_models, D, D)`` matrices (their upper triangles are read), ``(n_models,
        D)`` diagonals or ``(n_models, 0)``: none."""
        c = np.asarray(c, np.float32)
        if c.ndim == 2:
            if not c.shape[1]:
                return cls.none(len(c))
            return cls(np.ascontiguousarray(c.T), np.zeros(c.shape[1], np.int64), True)
        rows, columns = np.triu_indices(c.shape[1])
        return cls(np.ascontiguousarray(c[:, rows, columns].T), _starts(c.shape[1]))

    def matrices(self) -> np.ndarray:
        """The ``from_matrices`` form: ``(n_models, D, D)`` symmetric, ``(n_models, D)``
        diagonals, or ``(n_models, 0)``."""
        if self.diagonal or not self.kept:
            return np.ascontiguousarray(self.pairs.T) if self.kept else \
                np.zeros((self.n_models, 0), np.float32)
        D = self.D
        rows, columns = np.triu_indices(D)
        out = np.empty((self.n_models, D, D), np.float32)
        out[:, rows, columns] = self.pairs.T
        out[:, columns, rows] = self.pairs.T
        return out

    @property
    def kept(self) -> bool:
        return self.pairs.shape[0] > 0

    @property
    def n_models(self) -> int:
        return self.pairs.shape[1]

    @property
    def D(self) -> int:
        return len(self.start)

    def set(self, m: int, inverse: np.ndarray) -> None:
        """Model ``m``'s ``A^-1``: ``(D, D)`` (its upper triangle is read) or, diagonal, its
        ``(D,)`` diagonal."""
        if self.diagonal:
            self.pairs[:, m] = inverse
        else:
            self.pairs[:, m] = inverse[np.triu_indices(self.D)]

    def grown(self, n_models: int) -> Widths:
        """With models added up to ``n_models``, their ``A^-1`` all zeros."""
        pairs = np.zeros((self.pairs.shape[0], n_models), np.float32)
        pairs[:, :self.n_models] = self.pairs
        return Widths(pairs, self.start, self.diagonal)

    def select(self, models: np.ndarray) -> Widths:
        return Widths(np.ascontiguousarray(self.pairs[:, models]), self.start, self.diagonal)

    def with_columns(self, extra: int, value: float) -> Widths:
        """``extra`` coded columns added at the end: every model's ``A^-1`` gains ``value`` on
        its diagonal there and zeros elsewhere (each old entry moved to its row in the wider
        layout; an id sent as a value adds a column at nearly every event)."""
        D, n = self.D, self.n_models
        if self.diagonal:
            return Widths(np.concatenate([self.pairs, np.full((extra, n), value, np.float32)]),
                          np.zeros(D + extra, np.int64), True)
        start = _starts(D + extra)
        pairs = np.zeros(((D + extra) * (D + extra + 1) // 2, n), np.float32)
        rows, columns = np.triu_indices(D)
        pairs[start[rows] + columns] = self.pairs
        new = np.arange(D, D + extra)
        pairs[start[new] + new] = value
        return Widths(pairs, start)

    @property
    def nbytes(self) -> int:
        return self.pairs.nbytes + self.start.nbytes


@numba.njit(cache=True, nogil=True, inline="always")
def _row(start, i, j):
    return start[i] + j if i <= j else start[j] + i


@numba.njit(cache=True, nogil=True)
def squared_widths(index, value, nnz, models, pairs, start, diagonal, out):
    """``out[j] = z' A^-1 z`` of model ``models[j]`` (0 where ``models[j] < 0``) for the coded
    row z whose non-zero entries are ``value[:nnz]`` at ``index[:nnz]``. When the candidates
    are consecutive models (the whole inventory), each pair's entries are one vector run."""
    n = models.shape[0]
    out[:n] = 0.0
    first = models[0] if n else 0
    run = first >= 0
    for j in range(1, n):
        if models[j] != first + j:
            run = False
            break
    for p in range(nnz):
        i, v = index[p], value[p]
        for q in range(p, p + 1 if diagonal else nnz):  # (diagonal: entry (i, i) only)
            w = v * value[q] * (1.0 if q == p else 2.0)
            r = _row(start, i, index[q])
            if run:
                block = pairs[r, first:first + n]
                for j in range(n):
                    out[j] += w * block[j]
            else:
                for j in range(n):
                    if models[j] >= 0:
                        out[j] += w * pairs[r, models[j]]


@numba.njit(cache=True, nogil=True)
def update_model(index, value, nnz, m, pairs, start, diagonal):
    """Model ``m``'s ``A^-1`` after one more row z (non-zero entries ``value[:nnz]`` at
    ``index[:nnz]``): ``A^-1 -= u u' / (1 + z'u)``, ``u = A^-1 z`` (Sherman-Morrison); with
    ``diagonal`` the same update of the diagonal matrix, of which only the diagonal is kept."""
    denominator = 1.0
    if diagonal:
        for p in range(nnz):
            denominator += value[p] * value[p] * pairs[index[p], m]
        for p in range(nnz):
            u = pairs[index[p], m] * value[p]
            pairs[index[p], m] -= u * u / denominator
        return
    D = start.shape[0]
    u = np.zeros(D)
    for p in range(nnz):  # column k of A^-1: rows (i, k) above the diagonal, then row k's run
        k, v = index[p], value[p]
        for i in range(k):
            u[i] += pairs[start[i] + k, m] * v
        for i in range(k, D):
            u[i] += pairs[start[k] + i, m] * v
    for p in range(nnz):
        denominator += value[p] * u[index[p]]
    scale = 1.0 / denominator
    for i in range(D):
        ui, r = u[i] * scale, start[i]
        for j in range(i, D):
            pairs[r + j, m] -= ui * u[j]
