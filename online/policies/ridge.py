"""The linear base of the tree-ensemble policy's oracle: one ridge regression per action.

Each action's reward is regressed on a linear coding of the encoded context: number columns as
they are (NaN, missing, as 0), category-code columns one-hot (at each fit, the ``MAX_CODES``
codes of a column seen last in the window; a missing or uncoded code is all zeros), and a bias.
Fitted on the window's events of the action at each refit (a closed-form solve per action, like
the trees a pure function of the window: no sufficient statistics to downdate as events leave
the window).

Which codes: the ones seen last, because traffic changes. A campaign, an article, a product
sent as a category's value (``{"campaign": "summer-sale"}``) runs for a while and ends, and the
values that matter now are the ones being sent now. Coding a column's first ``MAX_CODES``
values, as this base did until the twentieth session, coded the first 64 campaigns of a stream
for ever: on ``bench/policies/late_keys.py --as-value`` (20 live campaigns, a new one every 200
events) the default policy earned 0.74 over its first 6,000 events and 0.15-0.27 from 30,000
on. On a stream whose values do not change, the values seen last include the frequent ones
(a value seen every few hundred events is seen last within a few hundred); a rare value seen
last by chance has few events, so its weight is shrunk by the penalty anyway.

The penalty is on the raw columns, as LinUCB's (``l2 |w|^2``, the bias not penalised: the
columns are centred over the action's events, so the bias is the action's mean reward minus
the centred part). For 0/1 variables this shrinks a rare variable (set in few of the action's
events) more than a common one, which is what the first fits, on a few dozen events per
action, need: a ridge on standardised columns (every column's variance 1, so rare variables
barely penalised) lost 0.02-0.07 reward at 1k steps on every held-out stream against trees
alone, the raw penalty did not (figures in the policy's docstring). A number on a large scale
(a price in dollars) is penalised little, as in LinUCB; past ``LARGEST_CODED`` (2^20) a number
column is divided by the power of 2 that brings the fit's largest value of it down to 2^20
(``scales``, chosen at each fit from the window: the fit is a pure function of the window, so
nothing needs re-expressing), as LinUCB's columns are and for the same reason: values from 1e-300
to 1e30 in one column made the fit's normal matrix singular to float64 (``LinAlgError`` in a
refit). Between fits a row with a number past twice its column's scale times 2^20 is left to
the next fit, which scales the column for it (and so is a model's first row,
:meth:`learn_first`).
The penalty is one for all the models, given or chosen at each fit from a grid by the models'
leave-one-out errors in closed form (:mod:`~online.policies.ridge_loo`): how much to shrink
depends on how noisy the stream's rewards are, which only its own events say.
Predicting for one context among several actions is one compiled loop over the candidates
(:func:`linear_scores`), no Python per action.

Each model also keeps what its prediction's uncertainty needs: LinUCB's width
``sqrt(z' A^-1 z)`` of the coded row z, with ``A = Z'Z + l2 I`` over the action's coded rows
(Li et al. 2010, Algorithm 1; the bias is penalised here, as in LinUCB: the width only scales
the policy's optimism). ``A`` takes each learned row at once (:func:`width_update`), as
LinUCB's does at every play, not only at the refits. Stored as ``A^-1`` (float32: a width
needs no more; laid out pair by pair, every model's entry (i, j) adjacent, as a decision reads
them: :mod:`~online.policies.widths`) for every model
while ``n_models * D^2`` stays under ``FULL_COVARIANCE_FLOATS`` (4 MB: 26 actions up to D =
200, 1,000 actions up to D = 32), else
only its diagonal (the width then ignores the columns' correlations: it is exact for one set
variable, and a bound of the same order for a few). :func:`linear_widths` reads the coded row's
non-zero entries only: ``nnz^2`` per candidate.

Between refits each model learns every new event of its action at once, by recursive least
squares (:meth:`RidgeBase.update`, :func:`ridge_update`): the same ridge (the bias unpenalised:
``A = Z'Z + l2 P``, P the identity less its bias entry, whose solution is the centred one the
refit computes) with one row more, in ``D x nnz + D^2`` operations from ``A^-1`` (float64, kept
per model at the refit under the same ``FULL_COVARIANCE_FLOATS`` bound; above it the models
wait for the next refit). A model without events at the refit (an action new since) starts at
its first event from the ridge on that one row (:meth:`RidgeBase.learn_first`: ``A = z z' + l2
P`` is invertible with one row) and carries on the same way. Rows are only added: the events
that left the window since the refit leave the model at the next refit. A number column or a
category's value that the fit did not code (new since, or not among a column's last
``MAX_CODES``) gets its own coded column at its first event (:meth:`RidgeBase.extend`): zero in
every earlier row, so every model's ``A`` gains ``l2`` on its diagonal there and nothing else,
and ``A^-1`` gains ``1 / l2`` (exact, as LinUCB adds its columns). Without it a campaign that
started after a refit was learned by nothing until the next one, which with a full window is
25,000 events away (a campaign of the bench above lives 4,000). The coded row may grow while
``n_models * D^2`` stays under ``FULL_COVARIANCE_FLOATS``; past it, the next fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np

from online.policies.features import LARGEST_CODED, checked_scales, column_scales
from online.policies.ridge_loo import CentredRidge, choose_penalty
from online.policies.widths import Widths, squared_widths, update_model

__all__ = ["RidgeBase", "MAX_CODES"]

FORMAT = "grove.ridge-base"
# 2: the widths' covariances (a version-1 state loads with zero widths); 3: the models' A^-1 for
# their updates between refits (a version-1 or -2 state's models wait for the next refit); 4:
# the fit's penalty, ``l2`` (0 when read from an older state); 5: each model's ``events`` (an
# older state: the models with an A^-1 have events); 6: the number columns' ``scales`` (an
# older state: all 1, what it was fitted with); 7: any codes of a column coded (``code_values``)
# and the coded row's order (``slots``: columns added between fits go at its end)
VERSION = 7
MAX_CODES = 64  # one-hot columns per category-code column (bounds the d^3 solve)
FULL_COVARIANCE_FLOATS = 1 << 20  # above: each model keeps only the diagonal of A^-1
# the largest |coded number| a model learns between fits (twice LARGEST_CODED: the fit's scales
# come from the window's float32 rows, where 2^20 + 0.01 is 2^20); past it, the next fit
UPDATE_BOUND = 2.0 * LARGEST_CODED


@dataclass
class RidgeBase:
    """``n_models`` linear models over the coding ``[1, x[numbers], onehot(x[codes])]``, each
    coded entry at its ``slots`` index of the coded row (the bias at 0).

    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [1.0, 2.0], [0.0, np.nan]] * 50)
    >>> r = X[:, 0] * 0.5 + 0.25
    >>> base = RidgeBase.fit(X, np.zeros(200, np.int32), r, 1, ["number", "code"], l2=1e-6)
    >>> base.predict(np.array([1.0, 2.0]), np.array([0, -1])).round(3).tolist()
    [0.75, 0.0]
    >>> base.predict(np.array([0.0, np.nan]), np.array([0])).round(3).tolist()
    [0.25]
    >>> wide = RidgeBase.fit(X, np.zeros(200, np.int32), r, 1, ["number", "code"], l2=1.0)
    >>> wide.widths(np.array([1.0, 2.0]), np.array([0, -1])).round(3).tolist()  # ~1 / sqrt(50)
    [0.141, 0.0]

    Adding a row by :meth:`update` gives the refit on all the rows:

    >>> wide.update(np.array([1.0, 2.0]), 0, 3.0)
    >>> X2, r2 = np.vstack([X, [[1.0, 2.0]]]), np.append(r, 3.0)
    >>> refit = RidgeBase.fit(X2, np.zeros(201, np.int32), r2, 1, ["number", "code"], l2=1.0)
    >>> bool(np.allclose(wide.weights, refit.weights, atol=1e-12))
    True
    """

    numbers: np.ndarray  # int64: columns of x read as numbers
    codes: np.ndarray  # int64: category-code columns, one-hot
    n_codes: np.ndarray  # int64 per code column: codes with a one-hot column
    weights: np.ndarray  # float64 (n_models, D), D = 1 + len(numbers) + n_codes.sum(): bias first
    # float32 A^-1 of each model (or its diagonal) for the widths, pair by pair (``Widths``;
    # none kept: a version-1 state); :attr:`covariance` is the same, model by model
    width_inverse: Widths | None = None
    # float64 (n_models, C, C), C >= D: the fit's A^-1 (bias unpenalised) that :meth:`update`
    # carries on, in its first D rows and columns (extend grows into the rest, zeros, without a
    # copy), all zeros for a model without events; (n_models, 0, 0): no updates between refits
    inverse: np.ndarray | None = None
    l2: float = 0.0  # the fit's penalty (chosen by leave-one-out error from a grid); 0: no fit
    # int64 per model: the rows it has learned, at the fit and since (what a copy without the
    # A^-1, a serving copy, knows of which models have events)
    events: np.ndarray | None = None
    # float64 per number column: the power of 2 its values are divided by in the coding (1 up to
    # LARGEST_CODED; see the module's docstring)
    scales: np.ndarray | None = None
    # int64, sum(n_codes): each code column's coded codes, ascending (None: 0..n_codes-1, as
    # before version 7)
    code_values: np.ndarray | None = None
    # int64, len(numbers) + sum(n_codes): the index in a coded row of each number column, then
    # of each coded code (in code_values' order); None: 1, 2, ..., D - 1 (before version 7)
    slots: np.ndarray | None = None

    def __post_init__(self):
        if self.scales is None:
            self.scales = np.ones(len(self.numbers))
        if self.code_values is None:
            self.code_values = np.concatenate(
                [np.zeros(0, np.int64)] + [np.arange(n, dtype=np.int64)
                                           for n in self.n_codes.tolist()])
        if self.slots is None:
            self.slots = np.arange(1, 1 + len(self.numbers) + len(self.code_values),
                                   dtype=np.int64)
        if self.width_inverse is None:
            self.width_inverse = Widths.none(len(self.weights))
        if self.inverse is None:
            self.inverse = np.zeros((len(self.weights), 0, 0))
        if self.events is None:  # (a state before version 5: a model with A^-1 has events)
            self.events = (self.inverse[:, 0, 0] != 0.0).astype(np.int64) \
                if self.inverse.shape[1] else np.zeros(len(self.weights), np.int64)
        self._index()

    def _index(self) -> None:
        # where each code column's coded codes start in code_values (kept for the decide path)
        self.code_start = np.concatenate(
            [[0], np.cumsum(self.n_codes)[:-1]]).astype(np.int64)[: len(self.codes)]
        # every column the coding reads (numbers and codes): what extend looks past
        self.n_read = int(max(self.numbers.max(initial=-1), self.codes.max(initial=-1))) + 1

    @property
    def _coding(self) -> tuple:
        """What the kernels read to code a row: (numbers, scales, codes, code_start, n_codes,
        code_values, slots)."""
        return (self.numbers, self.scales, self.codes, self.code_start, self.n_codes,
                self.code_values, self.slots)

    @property
    def n_models(self) -> int:
        return len(self.weights)

    @property
    def covariance(self) -> np.ndarray:
        """The widths' ``A^-1`` model by model (a copy): float32 ``(n_models, D, D)``, or the
        diagonals ``(n_models, D)``; ``(n_models, 0)`` for none."""
        return self.width_inverse.matrices()

    @classmethod
    def empty(cls, n_models: int = 0) -> RidgeBase:
        """``n_models`` models predicting 0 (what a state of version 1 had: no linear base)."""
        z = np.zeros(0, np.int64)
        return cls(z, z.copy(), z.copy(), np.zeros((n_models, 1)))

    def design(self, X: np.ndarray) -> np.ndarray:
        """The coded rows (float64, bias column first) of the encoded rows ``X``."""
        n, d = X.shape
        Z = np.zeros((n, self.weights.shape[1]))
        Z[:, 0] = 1.0
        for i, c in enumerate(self.numbers.tolist()):
            if c < d:
                Z[:, self.slots[i]] = np.nan_to_num(X[:, c], nan=0.0) / self.scales[i]
        for i, c in enumerate(self.codes.tolist()):
            start, m = self.code_start[i], self.n_codes[i]
            if c < d and m:
                coded = self.code_values[start:start + m]
                v = np.nan_to_num(X[:, c], nan=-1.0)
                at = np.minimum(np.searchsorted(coded, v), m - 1)
                rows = np.flatnonzero(coded[at] == v)  # (-1, missing: no code)
                Z[rows, self.slots[len(self.numbers) + start + at[rows]]] = 1.0
        return Z

    def predict(self, x: np.ndarray, models: np.ndarray) -> np.ndarray:
        """Prediction of each model in ``models`` (indices; -1 predicts 0) for one vector."""
        out = np.zeros(len(models))
        linear_scores(x, models, self._coding, self.weights, out)
        return out

    def widths(self, x: np.ndarray, models: np.ndarray) -> np.ndarray:
        """LinUCB's width ``sqrt(z' A^-1 z)`` of each model in ``models`` for one vector (0 for
        -1, and for every model of a version-1 state)."""
        out = np.zeros(len(models))
        w = self.width_inverse
        if w.kept:
            linear_widths(x, models, self._coding, w.pairs, w.start, w.diagonal, out)
        return out

    def kernel_arrays(self) -> tuple:
        """What a compiled caller passes on to :func:`upper_scores` or :func:`linear_scores`:
        (coding, weights, pairs, start, diagonal); ``pairs`` has no rows when no widths are
        kept. Made anew at each call: learning may replace the arrays."""
        w = self.width_inverse
        return self._coding, self.weights, w.pairs, w.start, w.diagonal

    def has_events(self, models: np.ndarray) -> np.ndarray:
        """Per model of ``models`` (-1: none): whether it has learned an event, at the fit or
        since."""
        out = np.zeros(len(models), np.bool_)
        mine = models >= 0
        out[mine] = self.events[models[mine]] > 0
        return out

    def learn_first(self, x: np.ndarray, model: int, target: float) -> bool:
        """Start model ``model`` (grown into if it is past the models held) from its first row:
        the ridge on that one row, as a fit would give it (the bias unpenalised: ``A = z z' + l2
        P`` is invertible with one row), from which :meth:`update` carries on. False, and
        nothing changed, without updates kept, past ``FULL_COVARIANCE_FLOATS`` (the bound a fit
        keeps ``A^-1`` under: the model waits for the next fit), with no penalty on a coding
        wider than the bias (one row cannot fit it), or for a model that has events already.

        >>> X = np.array([[0.0], [1.0]] * 20)
        >>> base = RidgeBase.fit(X, np.zeros(40, np.int32), X[:, 0], 1, ["number"], l2=1.0)
        >>> base.learn_first(np.array([1.0]), 1, 1.0), base.n_models
        (True, 2)
        >>> base.predict(np.array([1.0]), np.array([1])).tolist()  # the one row, bias free
        [1.0]
        >>> base.has_events(np.array([0, 1, -1])).tolist()
        [True, True, False]
        """
        D = self.weights.shape[1]
        if not self.inverse.shape[1] or (self.l2 <= 0 and D > 1):
            return False
        if model >= self.n_models:
            room = FULL_COVARIANCE_FLOATS // (D * D)  # the fit's bound on the A^-1 kept
            if model >= room:
                return False
            self._grow(min(room, max(model + 1, 2 * self.n_models)))
        elif self.inverse[model, 0, 0] != 0.0:
            return False
        z = self.design(np.asarray(x, np.float64)[None])[0]
        if np.abs(z).max() > UPDATE_BOUND:  # (as update: left to the next fit)
            return False
        penalty = np.full(D, self.l2)
        penalty[0] = 0.0
        inverse = np.linalg.inv(np.outer(z, z) + np.diag(penalty))
        self.inverse[model, :D, :D] = inverse
        self.weights[model] = inverse @ z * target
        self.events[model] = 1
        if self.width_inverse.kept:  # LinUCB's A, the bias penalised
            penalty[0] = self.l2 if self.l2 > 0 else 1.0
            covariance = np.linalg.inv(np.outer(z, z) + np.diag(penalty))
            self.width_inverse.set(model, np.diag(covariance) if self.width_inverse.diagonal
                                   else (covariance + covariance.T) / 2.0)
        return True

    def _grow(self, n_models: int) -> None:
        """``n_models`` models, the new ones without events (zero weights and ``A^-1``)."""
        extra = n_models - self.n_models

        def grown(array):
            return np.concatenate([array, np.zeros((extra, *array.shape[1:]), array.dtype)])

        self.weights, self.inverse, self.events = (
            grown(a) for a in (self.weights, self.inverse, self.events))
        self.width_inverse = self.width_inverse.grown(n_models)

    def extend(self, x: np.ndarray, kinds: list[str]) -> bool:
        """Give the number columns and the codes of ``x`` that the coding does not read a
        coded column each, zero in every row learned so far (``kinds``: the encoder's column
        kinds, for columns new since the fit). Every model's ``A^-1`` gains ``1 / l2`` on its
        diagonal there (the ridge of its rows with the column added: exact), its weight 0. Only
        for a base whose models learn between fits, and while ``n_models * D^2`` stays under
        ``FULL_COVARIANCE_FLOATS``. Whether the coding grew.

        >>> X = np.array([[0.0, 1.0], [0.0, 0.0]] * 20)
        >>> base = RidgeBase.fit(X, np.zeros(40, np.int32), X[:, 1], 1, ["code", "number"],
        ...                      l2=1.0)
        >>> base.extend(np.array([2.0, 1.0, 5.0]), ["code", "number", "number"])  # code 2, col 2
        True
        >>> base.update(np.array([2.0, 1.0, 5.0]), 0, 3.0)

        The same as a fit on every row (the earlier ones without the new column):

        >>> X2 = np.vstack([np.column_stack([X, np.full(40, np.nan)]), [[2.0, 1.0, 5.0]]])
        >>> refit = RidgeBase.fit(X2, np.zeros(41, np.int32), np.append(X[:, 1], 3.0), 1,
        ...                       ["code", "number", "number"], l2=1.0)
        >>> x = np.array([2.0, 0.0, 5.0])
        >>> base.predict(x, np.array([0])).round(6).tolist(), refit.predict(x, np.array([0])
        ...                                                                 ).round(6).tolist()
        ([2.014667], [2.014667])
        """
        if not self.inverse.shape[1] or self.l2 <= 0 or (
                len(x) <= self.n_read and not len(self.codes)):  # (nothing new to look for)
            return False
        numbers = [j for j in range(self.n_read, len(x))
                   if kinds[j] != "code" and not np.isnan(x[j])]
        codes = [j for j in range(self.n_read, len(x)) if kinds[j] == "code"]
        new_codes = uncoded_codes(x, self._coding)[0]
        if not (numbers or codes or len(new_codes)):
            return False
        grown = len(numbers) + len(new_codes) + sum(
            1 for j in codes if not np.isnan(x[j]) and x[j] >= 0)
        D = self.weights.shape[1] + grown
        if self.n_models * D * D > FULL_COVARIANCE_FLOATS:
            return False
        slot = self.weights.shape[1]
        n_numbers = len(self.numbers)
        # numbers first (their slots after the code slots' block is shifted), then codes
        number_slots = np.arange(slot, slot + len(numbers), dtype=np.int64)
        slot += len(numbers)
        magnitudes = np.abs(x[numbers]) if numbers else np.zeros(0)
        self.numbers = np.concatenate([self.numbers, np.array(numbers, np.int64)])
        self.scales = np.concatenate([self.scales, column_scales(magnitudes)])
        self.slots = np.concatenate([self.slots[:n_numbers], number_slots,
                                     self.slots[n_numbers:]])
        self.codes = np.concatenate([self.codes, np.array(codes, np.int64)])
        self.n_codes = np.concatenate([self.n_codes, np.zeros(len(codes), np.int64)])
        self._index()
        wanted = [(i, int(v)) for i, v in zip(*uncoded_codes(x, self._coding))]
        for i, v in wanted:
            start, m = self.code_start[i], self.n_codes[i]
            at = start + int(np.searchsorted(self.code_values[start:start + m], v))
            self.code_values = np.insert(self.code_values, at, v)
            self.slots = np.insert(self.slots, len(self.numbers) + at, slot)
            slot += 1
            self.n_codes[i] += 1
            self._index()
        self._add_columns(slot - self.weights.shape[1])
        return True

    def _add_columns(self, extra: int) -> None:
        """``extra`` coded columns at the end of the row: weight 0, ``A^-1``'s diagonal 1 / l2
        for the models with events (the others' stays all zeros), the widths' too."""
        K, D = self.weights.shape
        self.weights = np.concatenate([self.weights, np.zeros((K, extra))], axis=1)
        C = self.inverse.shape[1]
        if D + extra > C:  # room for more at once: an id sent as a value grows it every event
            C = max(D + extra, min(2 * C, int(np.sqrt(FULL_COVARIANCE_FLOATS / max(K, 1)))))
            inverse = np.zeros((K, C, C))
            inverse[:, :D, :D] = self.inverse[:, :D, :D]
            self.inverse = inverse
        fitted = self.inverse[:, 0, 0] != 0.0
        new = np.arange(D, D + extra)
        self.inverse[np.ix_(fitted, new, new)] = np.eye(extra) / self.l2
        if self.width_inverse.kept:
            self.width_inverse = self.width_inverse.with_columns(extra, 1.0 / self.l2)

    def update(self, x: np.ndarray, model: int, target: float, widths: bool = True) -> None:
        """Add one row (the encoded vector ``x`` and its ``target``) to model ``model`` in place:
        its weights become the ridge fit on its rows so far plus this one, and with ``widths``
        its width's ``A^-1`` takes the row too (:func:`width_update`; without, it is left as it
        is, for a caller that will not read the widths before the next fit makes them anew).
        Nothing happens to a model without an ``A^-1`` (no events at the fit, or no updates
        kept)."""
        if self.inverse.shape[1] and 0 <= model < len(self.weights) and \
                self.inverse[model, 0, 0] != 0.0:
            learned = ridge_update(x, model, target, self._coding, self.weights, self.inverse)
            self.events[model] += learned
            w = self.width_inverse
            if learned and widths and w.kept:
                width_update(x, model, self._coding, w.pairs, w.start, w.diagonal)

    @classmethod
    def fit(cls, X: np.ndarray, actions: np.ndarray, rewards: np.ndarray, n_actions: int,
            kinds: list[str], l2: float, widths: bool = True) -> RidgeBase:
        """One ridge regression per action index on its rows of ``X`` (``kinds``: the encoder's
        ``column_kinds``); an action without events gets zero weights. ``widths``: also keep
        what :meth:`widths` needs (each model's ``A^-1``; without, every width is 0)."""
        return cls.fit_predict(X, actions, rewards, n_actions, kinds, l2, widths)[0]

    @classmethod
    def fit_predict(cls, X: np.ndarray, actions: np.ndarray, rewards: np.ndarray,
                    n_actions: int, kinds: list[str], l2: float | Sequence[float],
                    widths: bool = True,
                    chooses: np.ndarray | None = None) -> tuple[RidgeBase, np.ndarray]:
        """:meth:`fit`, and each row's prediction by its action's model (what the trees boosted
        from the base start from: the coded rows are made once, here). ``l2``: the penalty, or
        a grid of them, the first kept unless the leave-one-out errors of the models in
        ``chooses`` (a mask over the action indices; None: all) show another better
        (:func:`~online.policies.ridge_loo.choose_penalty`)."""
        kinds = list(kinds)[: X.shape[1]]
        numbers = np.array([j for j, k in enumerate(kinds) if k != "code"], np.int64)
        codes = np.array([j for j, k in enumerate(kinds) if k == "code"], np.int64)
        chosen = [last_seen(X[:, c], MAX_CODES) for c in codes.tolist()]
        n_codes = np.array([len(v) for v in chosen], np.int64)
        largest = np.nanmax(np.abs(X[:, numbers]), axis=0, initial=0.0) if len(X) else \
            np.zeros(len(numbers))
        grid = (float(l2),) if np.isscalar(l2) else tuple(float(v) for v in l2)
        base = cls(numbers, codes, n_codes, np.zeros((n_actions, 1 + len(numbers) +
                                                      int(n_codes.sum()))), l2=grid[0],
                   scales=column_scales(np.asarray(largest, np.float64)),
                   code_values=np.concatenate([np.zeros(0, np.int64), *chosen]))
        base.n_read = max(base.n_read, len(kinds))  # (every column of the fit: coded or not)
        in_sample = np.zeros(len(X))
        if not len(X):
            return base, in_sample
        Z = base.design(X)
        fits, members, errors = {}, {}, [np.zeros((0, len(grid)))]
        for k in np.unique(actions).tolist():
            members[k] = rows = np.flatnonzero(actions == k)
            scored = len(grid) > 1 and (chooses is None or bool(chooses[k]))
            fits[k], e = CentredRidge.fit(Z[rows, 1:], rewards[rows], grid if scored else ())
            if scored:
                errors.append(e)
        base.l2 = l2 = grid[choose_penalty(np.concatenate(errors)) if len(grid) > 1 else 0]
        D = Z.shape[1]
        full = n_actions * D * D <= FULL_COVARIANCE_FLOATS
        if widths:
            eye = np.eye(D) / l2
            covariance = np.repeat(eye[None] if full else np.diag(eye)[None], n_actions,
                                   0).astype(np.float32)
        if full:
            base.inverse = np.zeros((n_actions, D, D))
        for k, fit in fits.items():
            base.weights[k] = fit.weights(l2)
            rows = members[k]
            base.events[k] = len(rows)
            in_sample[rows] = Z[rows] @ base.weights[k]
            if widths:  # LinUCB's A, the bias penalised
                inverse = fit.inverse(l2, bias_penalised=True)
                # (exactly symmetric: the widths read one triangle)
                covariance[k] = (inverse + inverse.T) / 2.0 if full else np.diag(inverse)
            if full:  # the ridge's own A, the bias not penalised: what update carries on
                base.inverse[k] = fit.inverse(l2, bias_penalised=False)
        if widths:
            base.width_inverse = Widths.from_matrices(covariance)
        return base, in_sample

    def select(self, models: np.ndarray) -> RidgeBase:
        """The given models (indices ascending), renumbered 0, 1, ... in that order."""
        base = RidgeBase(self.numbers, self.codes, self.n_codes, self.weights[models],
                         self.width_inverse.select(models), self.inverse[models], self.l2,
                         self.events[models], self.scales, self.code_values, self.slots)
        base.n_read = self.n_read
        return base

    def nbytes(self) -> int:
        return self.weights.nbytes + self.width_inverse.nbytes + self.inverse.nbytes + 8 * (
            3 * len(self.codes) + 3 * len(self.numbers) + 2 * len(self.code_values))

    def to_state(self, inverse: bool = True) -> dict:
        """Arrays and metadata; ``inverse=False`` leaves out what only :meth:`update` reads (a
        copy that decides as this one and waits for refits)."""
        D = self.weights.shape[1]
        return {"format": FORMAT, "version": VERSION, "numbers": self.numbers.copy(),
                "codes": self.codes.copy(), "n_codes": self.n_codes.copy(),
                "weights": self.weights.copy(), "covariance": self.covariance.copy(),
                "inverse": self.inverse[:, :D, :D].copy() if inverse else
                np.zeros((len(self.weights), 0, 0)), "l2": self.l2,
                "events": self.events.copy(), "scales": self.scales.copy(),
                "code_values": self.code_values.copy(), "slots": self.slots.copy(),
                "n_read": self.n_read}

    @classmethod
    def from_state(cls, state: dict) -> RidgeBase:
        """Versions 1 (no widths), 2 (no updates between refits), 3 (no ``l2``), 4 (no
        ``events``), 5 (no ``scales``), 6 (codes 0..n-1 in order) and 7 are read."""
        if state.get("format") != FORMAT or state.get("version") not in range(1, VERSION + 1):
            raise ValueError(f"not a {FORMAT} state of version 1 to {VERSION}: "
                             f"{state.get('format')!r} {state.get('version')!r}")
        weights = np.asarray(state["weights"], np.float64).reshape(
            -1, 1 + len(state["numbers"]) + int(np.sum(state["n_codes"]))).copy()
        covariance = np.asarray(state["covariance"], np.float32).copy() \
            if "covariance" in state else None
        if covariance is not None and covariance.shape[1] and (
                covariance.shape[:2] != weights.shape
                or covariance.shape[2:] not in ((), weights.shape[1:])):
            raise ValueError(f"covariance of shape {covariance.shape} for weights of shape "
                             f"{weights.shape}")
        inverse = np.asarray(state["inverse"], np.float64).copy() if "inverse" in state else None
        if inverse is not None and inverse.size == 0:  # none kept (JSON drops the empty axes)
            inverse = None
        if inverse is not None and inverse.shape[1:] != weights.shape[1:] * 2:
            raise ValueError(f"inverse of shape {inverse.shape} for weights of shape "
                             f"{weights.shape}")
        if inverse is not None and len(inverse) != len(weights):
            raise ValueError(f"{len(inverse)} inverses for {len(weights)} models")
        n_codes = np.asarray(state["n_codes"], np.int64).copy()
        coding = [None, None]
        if "slots" in state:
            coding = [np.asarray(state[name], np.int64).reshape(-1).copy()
                      for name in ("code_values", "slots")]
            D = weights.shape[1]
            starts = np.cumsum(n_codes) - n_codes
            ascending = all((np.diff(coding[0][a:a + m]) > 0).all()
                            for a, m in zip(starts.tolist(), n_codes.tolist()))
            if len(coding[0]) != n_codes.sum() or len(coding[1]) != D - 1 or \
                    sorted(coding[1].tolist()) != list(range(1, D)) or not ascending:
                raise ValueError(f"code_values (ascending per column) and slots (1..D-1) do "
                                 f"not fit weights of shape {weights.shape}")
        base = cls(np.asarray(state["numbers"], np.int64).copy(),
                   np.asarray(state["codes"], np.int64).copy(),
                   n_codes, weights,
                   None if covariance is None else Widths.from_matrices(
                       covariance if covariance.shape[1] else
                       np.zeros((len(weights), 0), np.float32)), inverse,
                   float(state.get("l2", 0.0)),
                   np.asarray(state["events"], np.int64).reshape(len(weights)).copy()
                   if "events" in state else None,
                   checked_scales(state["scales"], len(state["numbers"]))
                   if "scales" in state else None, *coding)
        base.n_read = max(base.n_read, int(state.get("n_read", 0)))
        return base


def last_seen(values: np.ndarray, most: int) -> np.ndarray:
    """The codes in ``values`` (a code column of the window, oldest row first; NaN: missing),
    at most ``most`` of them, those seen last; ascending.

    >>> last_seen(np.array([0, 1, 2, 1, np.nan, 3, 1]), 3).tolist()
    [1, 2, 3]
    """
    present = values[~np.isnan(values) & (values >= 0)].astype(np.int64)[::-1]
    codes, first = np.unique(present, return_index=True)  # first in reverse: seen last
    return np.sort(codes[np.argsort(first, kind="stable")[:most]])


@numba.njit(cache=True, nogil=True)
def linear_scores(x, models, coding, weights, out):
    """``out[j] = weights[models[j]] . coding(x)`` (0 where ``models[j] < 0``); ``coding``:
    ``RidgeBase._coding``."""
    index = np.empty(1 + coding[0].shape[0] + coding[2].shape[0], np.int64)
    value = np.empty(index.shape[0])
    nnz = coded_entries(x, coding, index, value)  # (coded once for every model)
    for j in range(models.shape[0]):
        m = models[j]
        if m < 0:
            out[j] = 0.0
            continue
        s = 0.0
        for p in range(nnz):
            s += weights[m, index[p]] * value[p]
        out[j] = s


@numba.njit(cache=True, nogil=True)
def code_slot(v, i, coding):
    """The coded-row index of code ``v`` of code column ``i`` (-1: not coded)."""
    numbers, _, _, code_start, n_codes, code_values, slots = coding
    lo, hi = code_start[i], code_start[i] + n_codes[i]
    if not v >= 0:  # (NaN: missing)
        return -1
    while lo < hi:  # binary search in the column's ascending codes
        mid = (lo + hi) // 2
        if code_values[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    if lo < code_start[i] + n_codes[i] and code_values[lo] == v:
        return slots[numbers.shape[0] + lo]
    return -1


@numba.njit(cache=True, nogil=True)
def uncoded_codes(x, coding):
    """(code column indices, codes): the codes of ``x`` that their column does not code."""
    codes = coding[2]
    columns = np.empty(codes.shape[0], np.int64)
    values = np.empty(codes.shape[0], np.int64)
    n = 0
    for i in range(codes.shape[0]):
        c = codes[i]
        if c < x.shape[0] and x[c] >= 0 and code_slot(x[c], i, coding) < 0:
            columns[n], values[n] = i, int(x[c])
            n += 1
    return columns[:n], values[:n]


@numba.njit(cache=True, nogil=True)
def coded_entries(x, coding, index, value):
    """Write the coded row of ``x``'s non-zero entries (the bias first) into ``index`` and
    ``value`` (each at least ``1 + len(numbers) + len(codes)`` long); return their count."""
    numbers, scales, codes = coding[0], coding[1], coding[2]
    slots = coding[6]
    d = x.shape[0]
    index[0], value[0] = 0, 1.0  # the bias
    nnz = 1
    for i in range(numbers.shape[0]):
        c = numbers[i]
        if c < d and not np.isnan(x[c]) and x[c] != 0.0:
            index[nnz], value[nnz] = slots[i], x[c] / scales[i]
            nnz += 1
    for i in range(codes.shape[0]):
        c = codes[i]
        if c < d:
            slot = code_slot(x[c], i, coding)
            if slot >= 0:
                index[nnz], value[nnz] = slot, 1.0
                nnz += 1
    return nnz


@numba.njit(cache=True, nogil=True)
def linear_widths(x, models, coding, pairs, start, diagonal, out):
    """``out[j] = sqrt(z' A^-1 z)`` of model ``models[j]`` for the coded row z of ``x`` (0 where
    ``models[j] < 0``); ``pairs, start, diagonal``: ``Widths``. Reads z's non-zero entries
    only."""
    index = np.empty(1 + coding[0].shape[0] + coding[2].shape[0], np.int64)
    value = np.empty(index.shape[0])
    nnz = coded_entries(x, coding, index, value)
    squared_widths(index, value, nnz, models, pairs, start, diagonal, out)
    for j in range(models.shape[0]):
        out[j] = np.sqrt(max(out[j], 0.0))


@numba.njit(cache=True, nogil=True)
def upper_scores(x, models, coding, weights, pairs, start, diagonal, bonus, out):
    """``out[j] = weights[models[j]] . z + bonus * sqrt(z' A^-1 z)`` (0 where ``models[j] <
    0``): :func:`linear_scores` plus ``bonus`` times :func:`linear_widths`, z coded once."""
    index = np.empty(1 + coding[0].shape[0] + coding[2].shape[0], np.int64)
    value = np.empty(index.shape[0])
    nnz = coded_entries(x, coding, index, value)
    squared_widths(index, value, nnz, models, pairs, start, diagonal, out)
    for j in range(models.shape[0]):
        m = models[j]
        if m < 0:
            out[j] = 0.0
            continue
        s = 0.0
        for p in range(nnz):
            s += weights[m, index[p]] * value[p]
        out[j] = s + bonus * np.sqrt(max(out[j], 0.0))


@numba.njit(cache=True, nogil=True)
def width_update(x, m, coding, pairs, start, diagonal):
    """LinUCB's ``A^-1`` of model ``m`` after one more row, the coded row z of ``x``:
    ``A^-1 -= u u' / (1 + z'u)``, ``u = A^-1 z`` (Sherman-Morrison, Li et al. 2010's ``A_a +=
    x x'`` at every play), so that a width shrinks as its action is played and not only at the
    next refit (:func:`~online.policies.widths.update_model`)."""
    index = np.empty(1 + coding[0].shape[0] + coding[2].shape[0], np.int64)
    value = np.empty(index.shape[0])
    nnz = coded_entries(x, coding, index, value)
    update_model(index, value, nnz, m, pairs, start, diagonal)


@numba.njit(cache=True, nogil=True)
def ridge_update(x, m, target, coding, weights, inverse):
    """Recursive least squares: model ``m``'s ``weights`` and ``inverse`` (``A^-1``) after one
    more row, the coded row z of ``x`` with ``target``: ``u = A^-1 z``, ``w += u (target - z'w) /
    (1 + z'u)``, ``A^-1 -= u u' / (1 + z'u)`` (Sherman-Morrison). Returns whether the row was
    learned: a model whose ``A^-1`` is all zeros (no events at its fit) is left as it is, and so
    is every model for a row with a coded number past ``UPDATE_BOUND`` (past any of its column
    at the fit: the next fit, which scales the column for it, learns it)."""
    if inverse[m, 0, 0] == 0.0:
        return False
    D = weights.shape[1]
    index = np.empty(1 + coding[0].shape[0] + coding[2].shape[0], np.int64)
    value = np.empty(index.shape[0])
    nnz = coded_entries(x, coding, index, value)
    for p in range(nnz):
        if abs(value[p]) > UPDATE_BOUND:
            return False
    u = np.zeros(D)
    for p in range(nnz):  # A^-1 is symmetric: its rows are its columns
        row, v = index[p], value[p]
        for i in range(D):
            u[i] += inverse[m, row, i] * v
    denominator, error = 1.0, target
    for p in range(nnz):
        denominator += value[p] * u[index[p]]
        error -= value[p] * weights[m, index[p]]
    if not denominator >= 1.0:  # (>= 1 exactly: below, rounding has eaten it; the refit learns
        return False  # the row)
    step = error / denominator
    for i in range(D):
        weights[m, i] += u[i] * step
        ui = u[i] / denominator
        for j in range(D):
            inverse[m, i, j] -= ui * u[j]
    return True
