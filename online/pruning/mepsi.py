"""MEPSI: MDL-based ensemble pruning with structural information (Bi, Zhang & Jiang), tree version.

Algorithm 1 of the paper: among ``T`` trees choose ``k`` that minimise

    error(S) - lambda * sum_i ESM(h_{S_i}, h_{S_{i+1:k}})        (the tree form of Eq. (6))

greedily: first the best pair (line 3-12, ``comp = NC(h_i) + NC(h_j) - TED(h_i, h_j)``), then one
tree at a time minimising ``error(S + h) - lambda * ESM(h, S)`` (line 13-25), where

    ESM(h, G) = NC(h) - min_{g in G} TED(g, h)                   (Definition 3.3)

NC(h) is the number of internal nodes, TED the tree edit distance over internal nodes
(Definition 3.2, :mod:`online.pruning.ted`), error the majority-vote 0-1 error of the candidate
sub-ensemble on the labeled set, and ``lambda = C / ESM_avg`` (Appendix C.1) with ``ESM_avg``
estimated by sampling.

Choices where the paper is silent or ambiguous
----------------------------------------------
- ``ESM_avg`` ("the average value of ESM term over all subsets of trees ... estimated by
  sampling", Appendix C.1) is read two ways, chosen by ``esm_avg``:

  * ``"term"`` (default): one ESM(h, G) term of Definition 3.3, averaged over random subsets
    ``G`` (size uniform in 1..k-1) and a tree ``h`` outside ``G``. This is the literal reading:
    Appendix C justifies the scaling by "ESM may be at most as large as the number of tree
    nodes", which bounds one ESM(h, G) (<= NC(h)), and Algorithm 1's objective at each step is
    ``error - lambda * ESM(h, S)``, one term, which the scaling puts on the error's [0, 1]
    scale (each step's ``lambda * ESM(h, S)`` is about ``C``). It also needs few TEDs (about
    k/2 per draw), which matters for unpruned trees.
  * ``"subset"``: the whole structural term of a random ordered k-subset, the sum Algorithm 1
    accumulates, ``NC(h_1) + NC(h_2) - TED(h_1, h_2) + sum_{t>=3} ESM(h_t, {h_1..h_{t-1}})``
    (about k times one term, so about k times less structure weight for the same ``C``; needs
    k(k-1)/2 TEDs per draw). The previous default; the benchmark reports both.

  With Table S3's C (0.5-0.8) both readings let the structural term outweigh the error
  differences between candidates on the paper's data sets (bench/mepsi/README.md).
- Its sign: for large unpruned trees TED(g, h) usually exceeds NC(h), so ESM_avg < 0. Appendix C
  divides by ESM_avg only to bring ESM to the scale of the error, so ``lambda = C / |ESM_avg|``
  (lambda >= 0 as Eq. (3) requires); if ESM_avg is 0, ``lambda = C``.
- The combination: equal weights (``w_i = 1/k``); label predictions are combined by majority
  vote, score predictions (class probabilities) by their mean and Eq. (1). Ties go to the lowest
  class index.
- Ties between candidates keep the first in index order (Algorithm 1 replaces only on ``<``).
- ``objective_history_[t]`` is the surrogate objective of the first ``t + 2`` selected trees:
  ``error(S) - lambda * (comp + sum of the ESM terms added so far)``, the quantity Algorithm 1
  greedily decreases; ``step_objectives_`` holds each step's ``minObj``.
- TED costs are the unit costs of Definition 3.2 unless given.
- The labeled set is whatever the caller passes. The paper prunes on the training data; with
  unpruned trees (which fit their bootstrap sample) the training error of most subsets is
  then near 0 and cannot guide the choice. Out-of-bag scores work as well
  (:func:`~online.pruning.trees.forest_oob_predictions`: a tree's all-zero score row on a
  sample means "no vote"): the error of a sub-ensemble is then taken over the samples at least
  one of its trees votes on (:mod:`online.pruning.voting`), the usual out-of-bag estimate.
- Computing TEDs: exact always (compiled Zhang-Shasha when numba is installed, see
  :mod:`online.pruning.ted`). ``ted_strategy="lazy"`` skips pairs that provably cannot be
  chosen (branch and bound on a TED lower bound); choices equal those of the full matrix.
  Every ``min_{g in G} TED(g, h)`` (Definition 3.3 in the greedy step and in the ``ESM_avg``
  sample) is a bounded minimum: a TED whose lower bound is not below the smallest exact TED
  found so far is not computed (same minimum, same ``ESM_avg``, same samples). ``n_jobs``
  threads compute the TEDs and bounds; the selection does not depend on it.
- The pair step is not given an ordering of the pair: both orders give the same ``comp`` when
  INSERT and REMOVE cost the same; otherwise ``TED(h_i, h_j)`` with ``i < j`` as written.

References
----------
Bi, Zhang & Jiang. MEPSI: An MDL-based Ensemble Pruning Approach with Structural Information.
AAAI 2024. Zhang & Shasha (1989) for TED.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from online.pruning import ted_compiled
from online.pruning.ted import (
    _blocks,
    _use_numba,
    operation_costs,
    postorder_sed_matrix,
    ted_cross,
    ted_matrix,
    ted_pairs,
)
from online.pruning.trees import Tree
from online.pruning.voting import covered, covered_error, encode, votes

__all__ = ["MEPSI", "esm"]


def esm(h: Tree, G, **costs) -> float:
    """ESM(h, G) = NC(h) - min_{g in G} TED(g, h) (Definition 3.3).

    >>> from online.pruning.trees import Tree
    >>> h = Tree.from_children([0, 1, 2], [[1, 2], [], []])
    >>> esm(h, [h])                                   # = NC(h)
    3.0
    >>> esm(h, [Tree.from_children([0], [[]]), h])     # the closest tree counts
    3.0
    """
    G = list(G)
    if not G:
        raise ValueError("G must hold at least one tree")
    return float(h.n_nodes - ted_cross(G, [h], **costs).min())


class MEPSI:
    """Prune a tree ensemble to ``k`` trees with MEPSI's Algorithm 1.

    Parameters
    ----------
    k
        Pruning size (Table S2 uses 20).
    C
        Trade-off after scaling: ``lambda = C / |ESM_avg|`` (Table S3: 0.5 - 0.8).
    n_esm_samples
        Number of random draws that estimate ``ESM_avg`` (Appendix C.1).
    esm_avg
        ``"term"`` (one ESM(h, G), default) or ``"subset"`` (a k-subset's whole structural
        term): what ``ESM_avg`` averages (see module notes).
    ted_strategy
        ``"full"``: all ``T (T - 1) / 2`` TEDs up front; ``"lazy"``: only the TEDs that can change
        a choice of Algorithm 1 (a label-count lower bound rules the others out; same result);
        ``"auto"`` (default): full for small trees, lazy when the full matrix is large.
    insert_cost, remove_cost, update_cost
        Costs of the three TED operations (Definition 3.2 counts each as 1).
    ted_backend
        ``"auto"`` (numba when installed), ``"numba"`` or ``"numpy"``: see
        :mod:`online.pruning.ted` (same distances, different speed).
    n_jobs
        Threads that compute TEDs and their bounds with the compiled backend (scikit-learn's
        convention: -1 = all cores, the default; None = 1). The selection does not depend on it.
    random_state
        Seed (or ``numpy.random.RandomState``) for the ``ESM_avg`` sampling.

    Attributes
    ----------
    selected_ : ndarray of shape (k,)
        Indices of the chosen trees, in the order Algorithm 1 added them.
    objective_history_ : list of float
        Surrogate objective after the pair and after each addition (see module notes).
    step_objectives_ : list of float
        ``minObj`` of the pair step and of each greedy step.
    errors_ : list of float
        Majority-vote error of the selected trees after each step.
    lambda_, esm_avg_ : float
        The trade-off weight used and the sampled ``ESM_avg``.
    distances_ : ndarray of shape (T, T)
        ``TED(trees[i], trees[j])`` where computed, NaN elsewhere (lazy strategy).
    ted_evaluations_ : int
        Number of tree pairs whose TED was computed.

    Examples
    --------
    Three copies of a tree that is always right and two structurally different trees that are
    always wrong: MEPSI keeps the copies.

    >>> import numpy as np
    >>> from online import MEPSI
    >>> from online.pruning.trees import Tree
    >>> good = Tree.from_children([0, 1, 2], [[1, 2], [], []])
    >>> bad = Tree.from_children([5, 6], [[1], []])
    >>> y = np.array([0, 1, 0, 1])
    >>> P = np.array([y, y, 1 - y, y, 1 - y])
    >>> m = MEPSI(k=3, C=0.5, random_state=0).fit([good, good, bad, good, bad], P, y)
    >>> m.selected_.tolist()
    [0, 1, 3]
    >>> m.errors_
    [0.0, 0.0]
    >>> bool(np.all(np.diff(m.objective_history_) < 0))
    True
    """

    def __init__(
        self,
        k: int = 20,
        C: float = 0.75,
        n_esm_samples: int = 200,
        esm_avg: str = "term",
        ted_strategy: str = "auto",
        insert_cost: float = 1.0,
        remove_cost: float = 1.0,
        update_cost: float = 1.0,
        ted_backend: str = "auto",
        n_jobs=-1,
        random_state=None,
    ):
        self.k = k
        self.C = C
        self.n_esm_samples = n_esm_samples
        self.esm_avg = esm_avg
        self.ted_strategy = ted_strategy
        self.insert_cost = insert_cost
        self.remove_cost = remove_cost
        self.update_cost = update_cost
        self.ted_backend = ted_backend
        self.n_jobs = n_jobs
        self.random_state = random_state

    # -----------------------------------------------------------------------------------------
    def fit(self, trees, predictions, y, *, distances=None) -> MEPSI:
        """Select ``k`` of ``trees``.

        ``fit(trees, predictions, y, *, distances=None)``:

        - ``trees``: sequence of ``T`` :class:`~online.pruning.trees.Tree` (internal nodes only).
        - ``predictions``: each tree's predictions on the labeled set, labels of shape ``(T, m)``
          or class scores of shape ``(T, m, n_classes)`` (then ``y`` holds class indices).
        - ``y``: the ``m`` true labels.
        - ``distances``: optional ``(T, T)`` matrix ``TED(trees[i], trees[j])`` (e.g. to try
          several ``C`` on one forest); NaN entries are computed when needed, so an earlier
          fit's ``distances_`` can be passed on. Computed as ``ted_strategy`` says otherwise.
        """
        trees = list(trees)
        T = len(trees)
        if not all(isinstance(t, Tree) for t in trees):
            raise TypeError("trees must be online.pruning.trees.Tree instances")
        if not 2 <= self.k <= T:
            raise ValueError(f"k must be in [2, {T}], got {self.k}")
        if self.esm_avg not in _ESM_AVG:
            raise ValueError(f"esm_avg must be one of {sorted(_ESM_AVG)}")
        if self.C < 0:
            raise ValueError("C must be >= 0")
        costs = operation_costs(self.insert_cost, self.remove_cost, self.update_cost)
        codes, classes = encode(predictions, y)
        if codes.shape[0] != T:
            raise ValueError("predictions must have one row per tree")
        y = np.asarray(y)
        y_codes = y.astype(np.int64) if codes.ndim == 3 else np.searchsorted(classes, y)
        n_classes = len(classes)
        rng = check_random_state(self.random_state)

        nc = np.array([t.n_nodes for t in trees], dtype=np.float64)  # NC(h)
        if distances is not None:
            distances = np.asarray(distances, dtype=np.float64)
            if distances.shape != (T, T):
                raise ValueError("distances must have shape (T, T)")
        if self.ted_strategy not in ("auto", "full", "lazy"):
            raise ValueError("ted_strategy must be 'auto', 'full' or 'lazy'")
        dist = _Distances(
            trees, costs, self.ted_strategy, distances, self.ted_backend, self.n_jobs
        )
        self.n_internal_ = nc

        # Appendix C.1: lambda = C / ESM_avg, ESM_avg estimated by sampling
        self.esm_avg_ = _ESM_AVG[self.esm_avg](
            nc, dist, self.k, self.n_esm_samples, rng
        )
        lam = self.C / abs(self.esm_avg_) if self.esm_avg_ != 0 else float(self.C)
        self.lambda_ = lam

        # Algorithm 1, lines 3-12: the best pair. Pairs are scored in order of a lower bound of
        # their objective (TED >= a label-count bound); exact TEDs are computed until no unscored
        # pair can beat the best one, which gives the pair the full double loop would give.
        pair_err = _pair_errors(codes, y_codes, n_classes)
        iu, ju = np.triu_indices(T, 1)

        def pair_obj(D):
            return pair_err[iu, ju] - lam * (nc[iu] + nc[ju] - D[iu, ju])  # lines 5-6

        bound = pair_obj(dist.lower)
        order = np.argsort(bound, kind="stable")
        best, scored, pos = np.inf, [], 0
        while pos < len(order) and bound[order[pos]] <= best:
            batch = order[pos : pos + _BATCH]
            batch = batch[bound[batch] <= best]
            dist.ensure(iu[batch], ju[batch])
            exact = pair_obj(dist.lower)[batch]
            scored.extend(batch.tolist())
            best = min(best, float(exact.min()))
            pos += _BATCH
            if (
                not dist.compiled
                and np.count_nonzero(bound <= best) > _FULL_SHARE * len(bound)
                and not dist.known.all()
            ):
                # numpy backend: most pairs need their TED, one batched matrix is cheaper
                # (the compiled kernel costs the same per pair either way: no fallback)
                dist.fill()
                scored = list(range(len(bound)))
                best = float(pair_obj(dist.lower).min())
                break
        exact = pair_obj(dist.lower)
        scored = np.array(sorted(scored))
        p = int(
            scored[np.flatnonzero(exact[scored] == best)[0]]
        )  # first minimum in loop order
        i, j = int(iu[p]), int(ju[p])
        comp = nc[i] + nc[j] - dist.lower[i, j]
        selected = [i, j]
        structure = comp
        self.step_objectives_ = [float(exact[p])]
        self.errors_ = [float(pair_err[i, j])]
        self.objective_history_ = [float(pair_err[i, j] - lam * structure)]

        # lines 13-25: greedy additions minimising error - lambda * ESM(h, S), same bounding
        total = votes(codes, n_classes, selected)
        in_s = np.zeros(T, dtype=bool)
        in_s[selected] = True
        while len(selected) < self.k:
            err = _candidate_errors(codes, y_codes, total)

            def cand_obj(err=err):
                esm = nc - dist.lower[selected].min(axis=0)  # Definition 3.3
                obj = err - lam * esm
                obj[in_s] = np.inf
                return obj, esm

            bound = cand_obj()[0]
            order = np.argsort(bound, kind="stable")
            best, scored, pos = np.inf, [], 0
            while pos < len(order) and bound[order[pos]] <= best:
                batch = order[pos : pos + _BATCH]
                batch = batch[(bound[batch] <= best) & ~in_s[batch]]
                if not len(batch):
                    break
                # ESM(h, S) needs only min_{g in S} TED(g, h): TEDs whose bound exceeds the
                # smallest exact one are skipped (exact_min); the others stay lower bounds
                mins = dist.exact_min([np.array(selected)] * len(batch), batch)
                best = min(best, float(np.min(err[batch] - lam * (nc[batch] - mins))))
                scored.extend(batch.tolist())
                pos += _BATCH
            obj, esm = cand_obj()
            scored = np.array(sorted(scored))
            h = int(
                scored[np.flatnonzero(obj[scored] == best)[0]]
            )  # lowest index on ties
            selected.append(h)
            in_s[h] = True
            structure += esm[h]
            total = total + votes(codes, n_classes, [h])
            self.step_objectives_.append(float(obj[h]))
            self.errors_.append(float(err[h]))
            self.objective_history_.append(float(err[h] - lam * structure))
        self.ted_evaluations_ = dist.evaluations
        self.distances_ = np.where(dist.known, dist.lower, np.nan)
        self.selected_ = np.array(selected, dtype=np.int64)
        return self

    # -----------------------------------------------------------------------------------------
    def to_state(self) -> dict:
        """Learned selection as arrays and JSON scalars (no pickle)."""
        return {
            "format": "grove.pruning.mepsi",
            "version": 1,
            # a seed is kept when it is a plain int (a RandomState object is not JSON)
            "params": {
                k: getattr(self, k)
                for k in _PARAMS
                if k != "random_state"
                or self.random_state is None
                or isinstance(self.random_state, int)
            },
            "selected": self.selected_.copy(),
            "objective_history": np.array(self.objective_history_),
            "step_objectives": np.array(self.step_objectives_),
            "errors": np.array(self.errors_),
            "lambda": self.lambda_,
            "esm_avg": self.esm_avg_,
        }

    @classmethod
    def from_state(cls, state: dict) -> MEPSI:
        if state.get("format") != "grove.pruning.mepsi" or state.get("version") != 1:
            raise ValueError("not a grove.pruning.mepsi v1 state")
        m = cls(**state["params"])
        m.selected_ = np.asarray(state["selected"], dtype=np.int64)
        m.objective_history_ = [float(v) for v in state["objective_history"]]
        m.step_objectives_ = [float(v) for v in state["step_objectives"]]
        m.errors_ = [float(v) for v in state["errors"]]
        m.lambda_ = float(state["lambda"])
        m.esm_avg_ = float(state["esm_avg"])
        return m


_PARAMS = (
    "k",
    "C",
    "n_esm_samples",
    "esm_avg",
    "ted_strategy",
    "insert_cost",
    "remove_cost",
    "update_cost",
    "ted_backend",
    "n_jobs",
    "random_state",
)


def _esm_avg_term(nc, dist, k, n_samples, rng) -> float:
    """Mean of one ESM(h, G) (Definition 3.3) over random subsets G and trees h outside G."""
    T = len(nc)
    draws = []
    for _ in range(n_samples):
        size = min(int(rng.randint(1, max(k - 1, 1) + 1)), T - 1)
        members = rng.choice(T, size=size + 1, replace=False)
        draws.append((members[0], members[1:]))
    hs = np.array([h for h, _ in draws], dtype=np.int64)
    mins = dist.exact_min([G for _, G in draws], hs)  # min_{g in G} TED(g, h), exactly
    return float(np.mean(nc[hs] - mins))


def _esm_avg_subset(nc, dist, k, n_samples, rng) -> float:
    """Mean structural term of random ordered k-subsets, accumulated as Algorithm 1 does."""
    T = len(nc)
    vals = []
    subsets = [rng.choice(T, size=k, replace=False) for _ in range(n_samples)]
    dist.ensure([S[0] for S in subsets], [S[1] for S in subsets])
    # each later term needs only min_{g in S[:t]} TED(g, S[t]) (exact_min skips the rest)
    mins = dist.exact_min(
        [S[:t] for S in subsets for t in range(2, k)],
        [S[t] for S in subsets for t in range(2, k)],
    ).reshape(len(subsets), max(k - 2, 0))
    D = dist.lower
    for S, m in zip(subsets, mins):
        total = nc[S[0]] + nc[S[1]] - D[S[0], S[1]]
        for t in range(2, k):  # summed in Algorithm 1's order (same rounding as before)
            total += nc[S[t]] - m[t - 2]
        vals.append(total)
    return float(np.mean(vals))


_ESM_AVG = {"subset": _esm_avg_subset, "term": _esm_avg_term}

#: pairs (or candidates) scored exactly per round of the bounded search
_BATCH = 64
#: numpy backend: the bounded search switches to the whole matrix when this share of pairs
#: remains in play
_FULL_SHARE = 0.25
#: "auto" computes the whole TED matrix up front below this many Zhang-Shasha cells
_FULL_CELLS = 3e8


class _Distances:
    """TED(trees[i], trees[j]) on demand: exact where ``known``, a lower bound elsewhere.

    The bound is the larger of the postorder string edit distance (:func:`postorder_sed_matrix`)
    and a label-count bound: a mapping pairs at most ``M = min(NC(g), NC(h))`` nodes and at most
    ``common`` of them (the multiset intersection of tested features) cost nothing, so
    ``TED(g, h) >= (NC(g) - M) remove + (NC(h) - M) insert
    + max(0, M - common) min(update, insert + remove)``.
    """

    def __init__(self, trees, costs, strategy, distances=None, backend="auto", n_jobs=1):
        self.trees, self.costs, self.backend, self.n_jobs = trees, costs, backend, n_jobs
        self.compiled = _use_numba(backend)
        T = len(trees)
        self.symmetric = costs["insert"] == costs["remove"]
        self.evaluations = 0
        if distances is None and strategy != "lazy":
            cells = sum(len(_blocks(t)["local"]) for t in trees if t.n_nodes) ** 2 / 2
            if strategy == "full" or cells <= _FULL_CELLS:
                distances = ted_matrix(trees, backend=backend, n_jobs=n_jobs, **costs)
                self.evaluations = T * (T - 1) // (2 if self.symmetric else 1)
        if distances is not None and not np.isnan(distances).any():
            self.lower = np.array(distances, dtype=np.float64)
            self.known = np.ones((T, T), dtype=bool)
            return
        n = np.array([t.n_nodes for t in trees], dtype=np.float64)
        n_feat = max((int(t.feature.max()) + 1 for t in trees if t.n_nodes), default=1)
        F = np.stack([np.bincount(t.feature, minlength=n_feat) for t in trees]).astype(
            np.float64
        )
        common = np.stack([np.minimum(F[i], F).sum(axis=1) for i in range(T)])
        M = np.minimum(n[:, None], n[None, :])
        u = min(costs["update"], costs["insert"] + costs["remove"])
        self.lower = (
            (n[:, None] - M) * costs["remove"]
            + (n[None, :] - M) * costs["insert"]
            + np.maximum(0.0, M - common) * u
        )
        # the postorder string edit distance is a (usually much) tighter lower bound
        self.lower = np.maximum(
            self.lower, postorder_sed_matrix(trees, backend=backend, n_jobs=n_jobs, **costs)
        )
        if not all(float(c).is_integer() for c in costs.values()):
            # with fractional costs a bound and the TED add the same costs in other orders, so
            # a computed bound can exceed the computed TED by a few ulps (1e-15 relative) and a
            # skipped TED could have been the minimum: the bounds are lowered by far more than
            # that (integer costs add exactly and keep the bounds as they are)
            self.lower *= 1.0 - 1e-9
        self.known = np.eye(T, dtype=bool)
        np.fill_diagonal(self.lower, 0.0)
        if (
            distances is not None
        ):  # a partial matrix from an earlier fit (NaN = not computed)
            self.known |= ~np.isnan(distances)
            self.lower = np.where(self.known, np.nan_to_num(distances), self.lower)

    def fill(self) -> None:
        """Compute every TED not known yet, batched as in :func:`ted_matrix`."""
        self.evaluations += int((~self.known).sum()) // (2 if self.symmetric else 1)
        self.lower = ted_matrix(
            self.trees, backend=self.backend, n_jobs=self.n_jobs, **self.costs
        )
        self.known[:] = True

    def exact_min(self, groups, hs) -> np.ndarray:
        """``min_{g in groups[q]} TED(g, hs[q])`` for every q, computing as few TEDs as it can.

        Round by round, each q computes the unknown TED of smallest lower bound among those
        whose bound is below its smallest exact TED so far (all q of a round in one batched
        call); a TED whose bound is not below that minimum cannot lower it. Afterwards the
        minimum of ``lower[groups[q], hs[q]]`` is the exact minimum too.
        """
        hs = np.asarray(hs, dtype=np.int64)
        out = np.empty(len(hs))
        todo = list(range(len(hs)))
        while todo:
            I, J, rest = [], [], []
            for q in todo:
                G, h = groups[q], hs[q]
                known = self.known[G, h]
                lo = self.lower[G, h]
                upper = lo[known].min() if known.any() else np.inf
                open_ = np.flatnonzero(~known & (lo < upper))
                if not len(open_):
                    out[q] = upper
                    continue
                I.append(G[open_[np.argmin(lo[open_])]])
                J.append(h)
                rest.append(q)
            if I:
                self.ensure(np.array(I), np.array(J))
            todo = rest
        return out

    def ensure(self, I, J) -> None:
        """Compute the exact TED of every pair (I[p], J[p]) not known yet."""
        I, J = np.asarray(I, dtype=np.int64), np.asarray(J, dtype=np.int64)
        miss = ~self.known[I, J]
        if not miss.any():
            return
        I, J = I[miss], J[miss]
        if self.symmetric:
            I, J = np.minimum(I, J), np.maximum(I, J)
        I, J = np.unique(np.stack([I, J], axis=1), axis=0).T
        vals = ted_pairs(
            self.trees, I, J, backend=self.backend, n_jobs=self.n_jobs, **self.costs
        )
        self.lower[I, J] = vals
        self.known[I, J] = True
        if self.symmetric:
            self.lower[J, I] = vals
            self.known[J, I] = True
        self.evaluations += len(I)


def _pair_errors(codes, y_codes, n_classes) -> np.ndarray:
    """Majority-vote error of every pair ``{h_i, h_j}`` (Algorithm 1, line 5); symmetric."""
    T = codes.shape[0]
    out = np.zeros((T, T))
    if codes.ndim == 3:
        return _pair_errors_scores(codes, y_codes)
    for i in range(T - 1):
        # two votes: agreement wins, a 1-1 tie goes to the lower class index
        pred = np.minimum(codes[i][None, :], codes[i + 1 :])
        out[i, i + 1 :] = np.mean(pred != y_codes[None, :], axis=1)
    return out + out.T


def _pair_errors_scores(scores, y_codes) -> np.ndarray:
    """Pair errors for score predictions, through each tree's distinct score rows.

    A tree gives one of few score vectors (one per leaf), so the pair's vote on a sample depends
    only on (row of h_i, row of h_j): count samples per (row_i, row_j, y) and vote once per
    combination.
    """
    T, m, K = scores.shape
    uniq, inv = [], []
    for t in range(T):
        u, v = _unique_rows(scores[t])
        uniq.append(u)
        inv.append(v)
    L = max(len(u) for u in uniq)
    out = np.zeros((T, T))
    if (
        L * L * K > 4 * m * K or L * L * K * T > 5e7
    ):  # many distinct rows: vote sample by sample
        for i in range(T - 1):
            total = scores[i][None] + scores[i + 1 :]
            wrong = total.argmax(axis=2) != y_codes[None, :]
            out[i, i + 1 :] = covered_error(wrong, covered(total))
        return out + out.T
    U = np.zeros((T, L, K))
    for t in range(T):
        U[t, : len(uniq[t])] = uniq[t]
    inv = np.stack(inv)  # (T, m)
    for i in range(T - 1):
        Li, rest = len(uniq[i]), np.arange(i + 1, T)
        n = len(rest)
        code = (
            (np.arange(n)[:, None] * Li + inv[i][None, :]) * L + inv[rest]
        ) * K + y_codes[None, :]
        counts = np.bincount(code.ravel(), minlength=n * Li * L * K).reshape(
            n, Li, L, K
        )
        total = U[i, :Li][None, :, None, :] + U[rest][:, None, :, :]
        winner = total.argmax(axis=3)  # Eq. (1)
        correct = np.take_along_axis(counts, winner[..., None], axis=3)[..., 0]
        cover = covered(total)  # out-of-bag: rows of zeros do not vote
        n_cov = (counts.sum(axis=3) * cover).sum(axis=(1, 2))
        n_ok = (correct * cover).sum(axis=(1, 2))
        out[i, rest] = np.where(n_cov > 0, (n_cov - n_ok) / np.maximum(n_cov, 1), 1.0)
    return out + out.T


def _unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct rows of ``a`` and each row's index among them (like ``np.unique(axis=0)``, in
    another order, which the pair errors do not depend on): rows are keyed by a hash of their
    bytes, one 1-D sort, and every row is checked against its representative (a collision falls
    back to ``np.unique``). 20x faster on 7,000 x 10 score rows."""
    a = np.ascontiguousarray(a)
    bits = a.view(np.uint64) if a.dtype.itemsize == 8 else a.astype(np.float64).view(np.uint64)
    mult = (
        np.arange(1, bits.shape[1] + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    ) | np.uint64(1)
    key = (bits * mult).sum(axis=1, dtype=np.uint64)  # wraps modulo 2**64
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    if not np.array_equal(a[first][inv], a):  # pragma: no cover - a 64-bit hash collision
        u, v = np.unique(a, axis=0, return_inverse=True)
        return u, v.reshape(-1)
    return a[first], inv


def _candidate_errors(codes, y_codes, total) -> np.ndarray:
    """Error of ``S + h`` for every tree ``h`` given the vote totals of ``S`` (line 17)."""
    if codes.ndim == 3:
        if ted_compiled.AVAILABLE and codes.min() >= 0 and total.min() >= 0:
            # the same numbers without (T, m, K) temporaries (scores >= 0: "voted" = any > 0)
            out = np.empty(codes.shape[0])
            _score_errors(total, codes, np.asarray(y_codes, dtype=np.int64), out)
            return out
        new = total[None] + codes
        return covered_error(new.argmax(axis=2) != y_codes[None, :], covered(new))
    m = total.shape[0]
    best = total.max(axis=1)
    best_idx = total.argmax(axis=1)
    mine = total[np.arange(m)[None, :], codes] + 1.0
    pred = np.where(
        mine > best,
        codes,
        np.where(mine == best, np.minimum(codes, best_idx), best_idx),
    )
    return np.mean(pred != y_codes[None, :], axis=1)


def _score_errors(total, scores, y_codes, out):  # pragma: no cover - compiled
    """``out[h]`` = covered error of the vote ``total + scores[h]`` (Eq. (1), lowest class on
    ties; samples where every score is 0 have no vote), as :func:`_candidate_errors` computes
    it with numpy for non-negative scores: the same sums, the same first maximum, integer
    counts."""
    T, m, K = scores.shape
    for h in range(T):
        wrong = 0
        cover = 0
        for i in range(m):
            best = total[i, 0] + scores[h, i, 0]
            arg = 0
            voted = best > 0
            for k in range(1, K):
                v = total[i, k] + scores[h, i, k]
                voted = voted or v > 0
                if v > best:
                    best, arg = v, k
            if voted:
                cover += 1
                if arg != y_codes[i]:
                    wrong += 1
        out[h] = wrong / cover if cover > 0 else 1.0


if ted_compiled.AVAILABLE:
    import numba

    _score_errors = numba.njit(cache=True, nogil=True)(_score_errors)
