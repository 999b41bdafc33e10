"""A ridge regression with its bias unpenalised, fitted once for a whole grid of penalties,
with each penalty's leave-one-out error in closed form.

With the columns centred (``C = Z - mean``), the ridge's fitted values are a linear smoother
``fit = H r``, ``H = 11'/n + C (C'C + l2 I)^-1 C'``, and the leave-one-out residual of row i is
exactly ``(r_i - fit_i) / (1 - H_ii)`` (Allen's PRESS, 1974; Golub, Heath & Wahba, 1979). From
one eigendecomposition ``C'C = V diag(s) V'`` and ``Q = C V``, every penalty of a grid costs
``O(n D)`` more: ``fit - mean(r) = Q (b / (s + l2))`` with ``b = Q' (r - mean(r))``, and
``H_ii = 1/n + sum_j Q_ij^2 / (s_j + l2)``.

>>> rng = np.random.default_rng(0)
>>> Z = rng.normal(size=(50, 3))
>>> r = Z @ [1.0, 0.0, -1.0] + 0.1 * rng.normal(size=50)
>>> fit, errors = CentredRidge.fit(Z, r, (0.1, 100.0))
>>> errors.sum(axis=0).round(2).tolist()  # squared leave-one-out errors for each penalty
[0.5, 44.25]
>>> fit.weights(0.1).round(2).tolist()  # [bias, w]
[0.0, 1.0, 0.0, -1.0]

The closed form is the refit without the row:

>>> i, rest = 7, np.arange(50) != 7
>>> alone = CentredRidge.fit(Z[rest], r[rest], ())[0].weights(0.1)
>>> loo = (r[i] - alone[0] - Z[i] @ alone[1:]) ** 2
>>> H = 1 / 50 + (Z[i] - Z.mean(0)) @ np.linalg.solve(fit.gram + 0.1 * np.eye(3), Z[i] - Z.mean(0))
>>> full = fit.weights(0.1)
>>> bool(np.isclose(loo, ((r[i] - full[0] - Z[i] @ full[1:]) / (1 - H)) ** 2))
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["CentredRidge", "PENALTIES", "choose_penalty"]

# the tree-ensemble policy's default: 10 (chosen on held-out streams) unless the stream's own
# events show another of 0.1 to 1,000 (steps of sqrt(10)) better
PENALTIES = (10.0, 0.1, 0.316, 1.0, 3.162, 31.623, 100.0, 316.228, 1000.0)
SIGNIFICANCE = 2.0  # standard errors of the paired difference (choose_penalty)


@dataclass
class CentredRidge:
    """What the ridge of ``r`` on ``Z`` (a bias unpenalised) needs for any penalty."""

    n: int
    mean: np.ndarray  # (D,) the columns' means
    rbar: float  # the mean of r
    vectors: np.ndarray  # (D, r) V, C'C's eigenvectors (r < D: those of its span, _eigen)
    values: np.ndarray  # (r,) s, C'C's eigenvalues (>= 0)
    projected: np.ndarray  # (r,) b = V' C' (r - rbar)
    # (D, D) C'C of the centred columns, when the fit formed it (n >= D); else see ``gram``
    formed: np.ndarray | None = None

    @property
    def gram(self) -> np.ndarray:
        """``C'C``: formed by the fit with at least as many rows as columns, else ``V diag(s)
        V'`` (its only non-zero eigenpairs), made when asked (by LinUCB's widths and
        :meth:`normal_matrix`; the penalty's choice, the weights and the base's own ``A^-1``
        never ask: n D^2 of work a refit of a wide context does not need)."""
        if self.formed is None:
            self.formed = (self.vectors * self.values) @ self.vectors.T
        return self.formed

    @classmethod
    def fit(cls, Z: np.ndarray, r: np.ndarray,
            grid: Sequence[float]) -> tuple[CentredRidge, np.ndarray]:
        """The fit, and each row's squared leave-one-out error for each penalty in ``grid``,
        ``(n, len(grid))`` (no rows for fewer than 2, where leaving one out leaves nothing to
        fit)."""
        n = len(r)
        mean = Z.mean(axis=0)
        C = Z - mean
        rbar = float(r.mean())
        gram = C.T @ C if n >= Z.shape[1] else None
        values, vectors = _eigen(C, gram)
        centred = r - rbar
        projected = vectors.T @ (C.T @ centred)  # O(n D): Q = C V only where the grid is scored
        errors = np.zeros((0, len(grid)))
        if n >= 2 and len(grid):
            Q = C @ vectors
            shrink = 1.0 / (values[:, None] + np.asarray(grid, np.float64)[None, :])  # (D, G)
            residuals = centred[:, None] - Q @ (projected[:, None] * shrink)
            leverage = 1.0 / n + (Q * Q) @ shrink
            errors = (residuals / np.maximum(1.0 - leverage, 1e-12)) ** 2
        return cls(n, mean, rbar, vectors, values, projected, gram), errors

    def weights(self, l2: float) -> np.ndarray:
        """``[bias, w]`` minimising ``|r - bias - Z w|^2 + l2 |w|^2``."""
        w = self.vectors @ (self.projected / (self.values + l2))
        return np.concatenate([[self.rbar - float(w @ self.mean)], w])

    def inverse(self, l2: float, bias_penalised: bool) -> np.ndarray:
        """The inverse of :meth:`normal_matrix`, from the centred Gram matrix: by blocks, the
        bias's entry ``a = n (+ l2)`` and the Schur complement ``S = C'C + l2 I + (n p / (n +
        p)) m m'`` (m the columns' means, p the bias's penalty: the term is 0 unbiased), which
        is ``A``'s lower block less ``n^2 m m' / a`` computed without the difference. Forming
        ``A`` and inverting it lost that difference where a column is large and nearly
        constant: a price of 1e6 in every row made ``n m m'`` ~1e15 times the penalty, and
        ``np.linalg.inv`` raised LinAlgError ("Singular matrix") on a matrix that is not."""
        n, m = self.n, self.mean
        p = l2 if bias_penalised else 0.0
        a = n + p
        if p == 0.0 and self.vectors.shape[1] < len(m):  # (see _eigen) 1 / l2 off V's span
            S_inv = (self.vectors * (1.0 / (self.values + l2) - 1.0 / l2)) @ self.vectors.T
            S_inv[np.diag_indices_from(S_inv)] += 1.0 / l2
        elif p == 0.0:  # S = V diag(1 / (s + l2)) V' from the decomposition at hand
            S_inv = (self.vectors / (self.values + l2)) @ self.vectors.T
        else:
            S = self.gram + (n * p / a) * np.outer(m, m)
            S[np.diag_indices_from(S)] += l2
            S_inv = np.linalg.inv(S)
        g = S_inv @ (n * m / a)
        out = np.empty((len(m) + 1, len(m) + 1))
        out[0, 0] = 1.0 / a + (n * m / a) @ g
        out[0, 1:] = out[1:, 0] = -g
        out[1:, 1:] = S_inv
        return out

    def normal_matrix(self, l2: float, bias_penalised: bool) -> np.ndarray:
        """``[1, Z]'[1, Z] + l2 P`` (P the identity, less its bias entry unless
        ``bias_penalised``), from the centred one: no pass over the rows."""
        D = len(self.mean)
        A = np.empty((D + 1, D + 1))
        A[0, 0] = self.n + (l2 if bias_penalised else 0.0)
        A[0, 1:] = A[1:, 0] = self.n * self.mean
        A[1:, 1:] = self.gram + self.n * np.outer(self.mean, self.mean)
        A[np.arange(1, D + 1), np.arange(1, D + 1)] += l2
        return A


def _eigen(C: np.ndarray, gram: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``C'C``'s eigenvalues ``s`` (>= 0) and eigenvectors ``V`` (columns), all that the fit
    reads of it (``gram``: ``C'C``, formed by the caller when n >= D). With fewer rows than
    columns (an action's first events, a context of many
    features), ``C'C`` is of rank n - 1 at most, and its non-zero eigenpairs come from the
    n x n ``C C' = U diag(s) U'``: ``V = C' U diag(s)^-1/2``. That costs n^3 instead of D^3.
    ``V`` is then D x r, and the directions off its span have eigenvalue 0: ``C`` is 0 there,
    so the weights and the leave-one-out errors read nothing of them, and ``inverse`` adds
    their ``1 / l2``. On ``usps`` (933 coded columns, 10 actions) every refit of the first
    9k events took this way; its first 5k events' eigendecompositions took 14.1 of 28.5 CPU s.

    >>> C = np.array([[1.0, 0.0, 2.0], [-1.0, 0.0, -2.0]])  # 2 rows, 3 columns
    >>> s, V = _eigen(C, None)  # (C'C is only formed with n >= D)
    >>> s.round(6).tolist(), V.shape, bool(np.allclose(C.T @ C @ V, V * s))
    ([10.0], (3, 1), True)
    """
    n, D = C.shape
    if n >= D:
        values, vectors = np.linalg.eigh(gram)
        return np.maximum(values, 0.0), vectors  # rounding can make a zero eigenvalue negative
    values, U = np.linalg.eigh(C @ C.T)
    # the numerical rank's bound (numpy's matrix_rank): the rest is 0 up to rounding
    kept = values > values.max(initial=0.0) * max(n, D) * np.finfo(np.float64).eps
    values = values[kept]
    return values, (C.T @ U[:, kept]) / np.sqrt(values)


def choose_penalty(errors: np.ndarray, significance: float = SIGNIFICANCE) -> int:
    """The index of the penalty to use, given rows' squared leave-one-out errors ``(n, G)``:
    0 (the default) unless some others' mean errors are lower by more than ``significance``
    standard errors of the paired differences with the default's; then the lowest of those.
    A few dozen rows rarely show a difference that large, so the first fits keep the default
    (a choice from them would follow their noise).

    >>> rows = np.array([[1.0, 0.5, 2.0], [1.0, 0.6, 2.0], [1.0, 0.4, 2.0], [1.0, 0.5, 0.1]])
    >>> choose_penalty(rows), choose_penalty(rows[:, [0, 2]]), choose_penalty(rows[:1])
    (1, 0, 0)
    """
    n = len(errors)
    if n < 2:
        return 0
    differences = errors - errors[:, :1]
    mean = differences.mean(axis=0)
    error = differences.std(axis=0, ddof=1) / np.sqrt(n)
    better = mean < -significance * error
    if not better.any():
        return 0
    return int(np.argmin(np.where(better, errors.sum(axis=0), np.inf)))
