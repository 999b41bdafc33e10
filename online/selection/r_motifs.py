"""R-MOTiFS: recursive Monte Carlo tree search feature selection.

Chaudhry & Lee, "Feature selection for high dimensional data using Monte Carlo tree search"
(MOTiFS), extended recursively in "R-MOTiFS" (see ``../shared/papers/r-motifs.txt``).
Equation numbers below are the R-MOTiFS paper's.
"""

from __future__ import annotations

import math

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.feature_selection import SelectorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data
from threadpoolctl import threadpool_limits  # a scikit-learn dependency

from online.selection.knn_reward import KNNReward

__all__ = ["RMOTiFS", "uct"]

STATE_FORMAT = "grove.r_motifs"
STATE_VERSION = 1


def uct(max_reward: float, parent_visits: int, visits: int, c: float) -> float:
    """Eq. (2): ``max(Q_vj) + C * sqrt(2 ln(N_vi) / N_vj)`` for child ``vj`` of ``vi``.

    >>> round(uct(0.9, parent_visits=10, visits=4, c=0.1), 6)
    1.007298
    """
    return max_reward + c * math.sqrt(2.0 * math.log(parent_visits) / visits)


def _minmax(X):
    low, high = X.min(axis=0), X.max(axis=0)
    span = np.where(high > low, high - low, 1.0)  # a constant column maps to 0
    return (X - low) / span


def _standard(X):
    sd = X.std(axis=0)
    return (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)


# how fit() rescales X before the k-NN reward measures distances ("Load dataset and preprocess")
_SCALINGS = {"minmax": _minmax, "standard": _standard, None: lambda X: X}


class _Tree:
    """Binary feature selection tree (Definition 1) over ``m`` features, in flat lists.

    Node 0 is the root ``∅0``; a node at level ``i - 1`` has the children ``f_i``
    (include feature i, action 1) and ``∅_i`` (exclude it, action 0). Level ``m`` is terminal.
    Each node keeps its visit count ``N`` and its maximum backed-up reward ``max(Q)``.
    """

    def __init__(self, m: int):
        self.m = m
        self.parent = [-1]
        self.level = [0]
        self.action = [-1]
        self.children = [[-1, -1]]  # [exclude child, include child]
        self.visits = [0]
        self.reward = [-math.inf]

    def add_child(self, node: int, action: int) -> int:
        child = len(self.parent)
        self.parent.append(node)
        self.level.append(self.level[node] + 1)
        self.action.append(action)
        self.children.append([-1, -1])
        self.visits.append(0)
        self.reward.append(-math.inf)
        self.children[node][action] = child
        return child


class RMOTiFS(SelectorMixin, BaseEstimator):
    """Recursive MCTS feature selection (R-MOTiFS) with a validated k-NN reward.

    Each recursion builds a binary feature selection tree (Definition 1) over its input
    features with ``n_simulations`` MCTS simulations (Algorithm 1: tree policy with the UCT
    of eq. (2), uniform random default policy, max-reward backup). The best subset found is
    the next recursion's input while its accuracy improves (Section 3.1). The reward of a
    subset (eq. 3) is the accuracy of k-NN on it, measured by leave-one-out (default) over the
    rows given to ``fit``: the paper's "training and validation set" (the outer test fold is
    never seen). ``recursive=False`` runs one tree: MOTiFS.

    Parameters
    ----------
    n_simulations : int
        S, MCTS simulations per recursion (paper: 1000).
    c : float
        C, the exploration constant ("scaling factor") of eq. (2) (paper: 0.1).
    n_neighbors : int
        k of the k-NN reward (paper: 5).
    validation : str
        How the reward validates k-NN on the rows given to ``fit`` (see ``KNNReward``):
        "loo" (default, leave-one-out), "kfold:K", "kfold:KxR" (R repetitions),
        "holdout:P" or "resub" (training accuracy, each row among its own neighbours). The
        paper does not say; see the Choices below for why "loo".
    recursive : bool
        Recurse on the best subset while accuracy improves (R-MOTiFS) or stop after one tree
        (MOTiFS).
    max_recursions : int or None
        Cap on the number of trees; None follows the paper (until accuracy stops improving).
    on_tie : {"continue", "stop"}
        When a tree's best subset only ties the optimal accuracy: "continue" (Section 3.1's
        base condition ``Acc(F_best^j) < Acc(F_best^i)``) takes it if it is smaller and
        recurses; "stop" (Algorithm 1's "greater than") ends the search.
    baseline : {None, "all-features"}
        What the first tree's best subset must beat to be taken: None (default) takes it
        always; "all-features" (Section 3.1 read literally: F_best^0 must improve on F_0 = F)
        keeps all features when it does not.
    distance_ties : {"index", "share"}
        k-NN rows tied at the k-th nearest distance: "index" (default) puts the lower row
        index first, as a stable sort would; "share" lets every tied row vote with an equal
        share of the places left (``KNNReward``).
    scaling : {"minmax", "standard", None}
        How X is rescaled (on the rows given to ``fit``) before k-NN distances are measured.
    max_validation_samples : int or None
        If set and there are more rows, the leave-one-out accuracy is averaged over this many
        rows drawn at random once per fit (neighbours are still searched among all rows). None
        (default) scores every row, as the paper does; set it only to bound the cost on large
        data.
    progress : callable or None
        ``progress(fraction, message)`` is called as the search goes (fraction in [0, 1],
        reaching 1.0 at the end). Raising from it cancels ``fit`` cooperatively: the
        exception propagates and the estimator stays unfitted.
    random_state : int, numpy Generator or None
        Seed of the tree policy's and default policy's random choices.

    Attributes
    ----------
    selected_features_ : ndarray of int
        Column indices of the optimal subset, ascending.
    support_ : ndarray of bool
        Mask of the selected columns.
    accuracy_ : float
        Reward (validated k-NN accuracy on the fit data, eq. 3) of the selection.
    all_features_accuracy_ : float
        The same reward with every feature.
    fsr_ : float
        Feature selection ratio, eq. (4): ``accuracy_ / len(selected_features_)``.
    history_ : list of dict
        One entry per recursion (tree): ``recursion``, ``n_input_features``, ``subset`` (the
        tree's best subset, column indices), ``accuracy`` (its reward) and ``accepted``
        (whether it became the optimal subset and fed the next recursion).
    n_evaluations_, n_cache_hits_ : int
        Reward computations and repeated subsets answered from the cache.

    Choices where the paper is silent or ambiguous
    ----------------------------------------------
    - Validation of the reward. The paper says only that 9 folds are "the training and
      validation set" (Section 4.2) and that the reward is "the accuracy of the classifier"
      (eq. 3). The default is leave-one-out k-NN accuracy on the rows given to ``fit``;
      k-NN with Euclidean distance, uniform votes, vote ties to the smallest class (as
      scikit-learn). It was chosen by a rule fixed in advance, on data no Table 3 test fold
      contains (bench/r_motifs/validation.py): inside the training folds, select on 2/3 and
      score the selection on the other 1/3; another validation would replace leave-one-out
      only if better by more than one paired standard error. None was: over 40 splits of
      Sonar, Ionosphere, SPECT and WDBC, "kfold:5" (-0.006), "kfold:5x3" (-0.006) and
      "holdout:0.3" (-0.023) all scored lower (bench/r_motifs/README.md). All of them
      overfit the search alike (on Sonar the chosen subset's reward is 0.11 to 0.25 above
      its held-out accuracy, leave-one-out 0.12): the bias comes from taking the maximum over
      thousands of subsets scored on the same few rows, not from leave-one-out.
    - Preprocessing ("Load dataset and preprocess"): min-max scaling to [0, 1] on the fit
      rows; ``transform`` only selects columns and never rescales.
    - Definition 1 writes ``0 < i < n``; the tree here has one level per feature, ``1..n``,
      so that every feature is decided and the leaves are at level n.
    - ``optimalReward`` of Algorithm 1 is never initialised in the paper; here it starts at
      -inf, so the first tree's best subset (the MOTiFS answer) is always taken, even when
      all features score higher, and later trees must beat it. (Starting at Acc(F) instead
      returned all 30 WDBC features in a trial fold, unlike the paper's 12.6.)
    - Ties: Section 3.1 stops on ``Acc(F_best^j) < Acc(F_best^i)`` (a tie continues),
      Algorithm 1 continues on "greater than" (a tie stops). The default follows Section 3.1
      (``on_tie="continue"``), accepting a tying subset only if it is strictly smaller, which
      guarantees termination; ties are frequent (LOO accuracy moves in steps of 1/n) and on
      three WDBC folds the strict rule stopped at 15, 16 and 18 features where tying
      subsets of 8, 13 and 8 were found. ``on_tie="stop"`` is Algorithm 1 literally; by the
      same rule as the validation it did not earn the switch (held-out accuracy within one
      standard error of the default, +0.001 ± 0.002, with 11.2 features instead of 9.2).
    - ``baseline="all-features"`` (Section 3.1 literally: the first tree's best must beat
      all features) never changed a selection in those 40 splits; the default takes the
      first tree's best always.
    - ``maxReward`` of UCTSEARCH starts at -inf, so the first simulation's subset is the best
      until beaten (strictly: the first subset reaching the maximum is kept).
    - EXPAND picks the untried action uniformly at random; BESTCHILD breaks ties in eq. (2)
      uniformly at random; the default policy includes each remaining feature with
      probability 1/2 ("uniformly at random" over the two actions).
    - A new node's ``max(Q)`` is set by its first backup (it is always backed up at once).
    - The empty subset has reward 0.
    - Features keep their column order along the tree's levels in every recursion.
    - Exact ties in distance at the k-th neighbour go to the lower row index (``KNNReward``);
      the Gram path's rounding can order exactly tied rows differently from the direct path.
    - The search runs with BLAS / OpenMP limited to one thread (threadpoolctl, installed with
      scikit-learn): its matrices are small, and on busy cores extra threads made it 5x slower.
    - ``max_validation_samples`` (off by default) is not in the paper: a cost bound for
      large data that scores a random subset of rows.
    - Progress fraction: the number of recursions is unknown in advance, so the fraction is
      ``1 - 2 ** -(r + s / S)`` after ``r`` finished recursions and ``s`` simulations of the
      current one (each recursion is assumed to halve what is left), then 1.0 at the end.

    Examples
    --------
    >>> import numpy as np
    >>> from online import RMOTiFS
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(120, 8))
    >>> y = (X[:, 1] + X[:, 5] > 0).astype(int)
    >>> selector = RMOTiFS(random_state=0).fit(X, y)
    >>> selector.selected_features_
    array([1, 5])
    >>> selector.transform(X).shape
    (120, 2)
    >>> selector.accuracy_ > selector.all_features_accuracy_
    True
    >>> [(h["recursion"], h["n_input_features"], h["accepted"]) for h in selector.history_]
    [(0, 8, True), (1, 3, True), (2, 2, False)]

    References
    ----------
    Chaudhry, M. U., Yasir, M., Asghar, M. N., Lee, J.-H. (2020). Monte Carlo Tree Search-Based
    Recursive Algorithm for Feature Selection in High-Dimensional Datasets. Entropy 22(10).
    """

    def __init__(self, n_simulations=1000, c=0.1, n_neighbors=5, validation="loo",
                 recursive=True, max_recursions=None, on_tie="continue", baseline=None,
                 scaling="minmax", max_validation_samples=None, progress=None,
                 random_state=None, distance_ties="index"):
        self.n_simulations = n_simulations
        self.c = c
        self.n_neighbors = n_neighbors
        self.validation = validation
        self.recursive = recursive
        self.max_recursions = max_recursions
        self.on_tie = on_tie
        self.baseline = baseline
        self.distance_ties = distance_ties
        self.scaling = scaling
        self.max_validation_samples = max_validation_samples
        self.progress = progress
        self.random_state = random_state

    # -- scikit-learn API ---------------------------------------------------------------
    def fit(self, X, y):
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self._check_params()
        rng = np.random.default_rng(self.random_state)
        d = X.shape[1]
        reward = self._make_reward(X, y, rng)

        # Algorithm 1, R-MOTiFS(featuresList); the first tree's best is always taken (see Choices)
        features = np.arange(d)
        all_reward = reward(np.ones(d, dtype=bool))
        optimal_reward = all_reward if self.baseline == "all-features" else -math.inf
        optimal = features
        history = []
        recursion = 0
        while True:
            # one BLAS/OpenMP thread: each reward's matrices are small, and threads fighting
            # over busy cores made rewards 5x slower here (bench/r_motifs/README.md)
            with threadpool_limits(limits=1):
                max_reward, best = self._uct_search(features, reward, rng, recursion, d)
            # base condition (Section 3.1): stop when Acc(F_best^j) < Acc(F_best^i); on a tie
            # go on only with a strictly smaller subset (else the next tree is the same one)
            accepted = max_reward > optimal_reward or (
                self.on_tie == "continue" and max_reward == optimal_reward
                and len(best) < len(optimal))
            history.append({"recursion": recursion, "n_input_features": len(features),
                            "subset": best, "accuracy": max_reward, "accepted": bool(accepted)})
            if not self.recursive:  # MOTiFS: the one tree's best subset
                optimal_reward, optimal = max_reward, best
                break
            if not accepted:
                break
            optimal_reward, optimal = max_reward, best
            recursion += 1
            if self.max_recursions is not None and recursion >= self.max_recursions:
                break
            features = best
        self._report(1.0, f"done: {len(optimal)} of {d} features, accuracy {optimal_reward:.4f}")

        support = np.zeros(d, dtype=bool)
        support[optimal] = True
        self.support_ = support
        self.selected_features_ = np.flatnonzero(support)
        self.accuracy_ = float(optimal_reward)
        self.all_features_accuracy_ = float(all_reward)
        self.fsr_ = self.accuracy_ / max(len(self.selected_features_), 1)  # eq. (4)
        self.history_ = history
        self.n_evaluations_ = reward.n_evaluations
        self.n_cache_hits_ = reward.n_cache_hits
        return self

    def _make_reward(self, X, y, rng):
        """The reward of eq. (3) on the fit rows: validated k-NN accuracy of a column mask,
        cached (``KNNReward``). A separate method so that a benchmark can measure another
        reading of eq. (3) with the same search (bench/r_motifs/leak.py)."""
        n = X.shape[0]
        queries = None
        if self.max_validation_samples is not None and n > self.max_validation_samples:
            queries = np.sort(rng.choice(n, self.max_validation_samples, replace=False))
        return KNNReward(_SCALINGS[self.scaling](X), y, n_neighbors=self.n_neighbors,
                         validation=self.validation, queries=queries,
                         distance_ties=self.distance_ties, random_state=rng)

    def _get_support_mask(self):
        check_is_fitted(self, "support_")
        return self.support_

    # -- Algorithm 1 ----------------------------------------------------------------------
    def _uct_search(self, features, reward, rng, recursion, d):
        """UCTSEARCH over a tree on ``features``: S simulations; returns (maxReward, subset)."""
        m = len(features)
        tree = _Tree(m)
        max_reward, best = -math.inf, features[:0]
        S = self.n_simulations
        every = max(1, S // 20)
        mask = np.zeros(d, dtype=bool)
        for s in range(S):
            if s % every == 0:
                self._report(1.0 - 2.0 ** -(recursion + s / S),
                             f"recursion {recursion + 1}: simulation {s}/{S} on {m} features, "
                             f"best accuracy {max(max_reward, 0.0):.4f}")
            front, decisions = self._tree_policy(tree, rng)
            # DEFAULTPOLICY: the remaining features, each included with probability 1/2
            chosen = np.concatenate([np.array(decisions, dtype=bool),
                                     rng.integers(0, 2, m - len(decisions)).astype(bool)])
            subset = features[chosen]
            mask[:] = False
            mask[subset] = True
            q = reward(mask)  # eq. (3)
            self._backup(tree, front, q)
            if q > max_reward:
                max_reward, best = q, subset
        return max_reward, best

    def _tree_policy(self, tree, rng):
        """TREEPOLICY: descend by BESTCHILD until a node with an untried action, EXPAND it."""
        node, decisions = 0, []
        while tree.level[node] < tree.m:
            untried = [a for a in (1, 0) if tree.children[node][a] < 0]
            if untried:  # EXPAND
                action = untried[0] if len(untried) == 1 else untried[int(rng.integers(2))]
                decisions.append(action)
                return tree.add_child(node, action), decisions
            node = self._best_child(tree, node, rng)
            decisions.append(tree.action[node])
        return node, decisions

    def _best_child(self, tree, node, rng):
        """BESTCHILD: the child with the largest UCT of eq. (2) (max reward, not mean)."""
        n_parent = tree.visits[node]
        exclude, include = tree.children[node]
        u0 = uct(tree.reward[exclude], n_parent, tree.visits[exclude], self.c)
        u1 = uct(tree.reward[include], n_parent, tree.visits[include], self.c)
        if u0 == u1:
            return include if rng.random() < 0.5 else exclude
        return include if u1 > u0 else exclude

    @staticmethod
    def _backup(tree, node, q):
        """BACKUP: visits + 1 and max(Q) along the path to the root."""
        while node >= 0:
            tree.visits[node] += 1
            tree.reward[node] = max(tree.reward[node], q)
            node = tree.parent[node]

    def _report(self, fraction, message):
        if self.progress is not None:
            self.progress(float(fraction), message)

    def _check_params(self):
        if not (isinstance(self.n_simulations, (int, np.integer)) and self.n_simulations >= 1):
            raise ValueError(f"n_simulations must be a positive int, got {self.n_simulations!r}")
        if not self.c > 0:  # eq. (2) requires C > 0
            raise ValueError(f"c must be > 0, got {self.c!r}")
        if self.baseline not in (None, "all-features"):
            raise ValueError(f"baseline must be None or 'all-features', got {self.baseline!r}")
        if self.on_tie not in ("continue", "stop"):
            raise ValueError(f"on_tie must be 'continue' or 'stop', got {self.on_tie!r}")
        if self.distance_ties not in ("index", "share"):
            raise ValueError(
                f"distance_ties must be 'index' or 'share', got {self.distance_ties!r}"
            )
        if self.scaling not in _SCALINGS:
            raise ValueError(f"scaling must be one of {list(_SCALINGS)}, got {self.scaling!r}")
        if self.max_recursions is not None and self.max_recursions < 1:
            raise ValueError(f"max_recursions must be >= 1 or None, got {self.max_recursions!r}")
        if self.progress is not None and not callable(self.progress):
            raise ValueError("progress must be callable(fraction, message) or None")

    # -- state export -----------------------------------------------------------------------
    _STATE_PARAMS = ("n_simulations", "c", "n_neighbors", "validation", "recursive",
                     "max_recursions", "on_tie", "baseline", "distance_ties", "scaling",
                     "max_validation_samples")

    def to_state(self) -> dict:
        """Fitted selection as numpy arrays and JSON scalars (no pickle)."""
        check_is_fitted(self, "support_")
        params = {name: getattr(self, name) for name in self._STATE_PARAMS}
        if isinstance(self.random_state, (int, np.integer)) or self.random_state is None:
            params["random_state"] = None if self.random_state is None else int(self.random_state)
        lengths = [len(h["subset"]) for h in self.history_]
        state = {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "params": params,
            "n_features_in": int(self.n_features_in_),
            "support": self.support_.copy(),
            "accuracy": self.accuracy_,
            "all_features_accuracy": self.all_features_accuracy_,
            "n_evaluations": int(self.n_evaluations_),
            "n_cache_hits": int(self.n_cache_hits_),
            "history": {
                "n_input_features": np.array([h["n_input_features"] for h in self.history_]),
                "accuracy": np.array([h["accuracy"] for h in self.history_], dtype=np.float64),
                "accepted": np.array([h["accepted"] for h in self.history_], dtype=bool),
                "subset_lengths": np.array(lengths, dtype=np.int64),
                "subsets": np.concatenate([np.asarray(h["subset"], dtype=np.int64)
                                           for h in self.history_]),
            },
        }
        if hasattr(self, "feature_names_in_"):
            state["feature_names_in"] = np.asarray(self.feature_names_in_, dtype=str)
        return state

    @classmethod
    def from_state(cls, state: dict) -> RMOTiFS:
        """Restore what ``to_state`` exported."""
        if state.get("format") != STATE_FORMAT or state.get("version") != STATE_VERSION:
            raise ValueError(f"not an {STATE_FORMAT} v{STATE_VERSION} state: "
                             f"{state.get('format')!r} v{state.get('version')!r}")
        self = cls(**state["params"])
        self.n_features_in_ = int(state["n_features_in"])
        if "feature_names_in" in state:
            self.feature_names_in_ = np.asarray(state["feature_names_in"], dtype=object)
        self.support_ = np.asarray(state["support"], dtype=bool).copy()
        self.selected_features_ = np.flatnonzero(self.support_)
        self.accuracy_ = float(state["accuracy"])
        self.all_features_accuracy_ = float(state["all_features_accuracy"])
        self.fsr_ = self.accuracy_ / max(len(self.selected_features_), 1)
        self.n_evaluations_ = int(state["n_evaluations"])
        self.n_cache_hits_ = int(state["n_cache_hits"])
        h = state["history"]
        bounds = np.cumsum(np.concatenate([[0], h["subset_lengths"]]))
        self.history_ = [
            {"recursion": i, "n_input_features": int(h["n_input_features"][i]),
             "subset": np.asarray(h["subsets"][bounds[i]:bounds[i + 1]], dtype=np.int64),
             "accuracy": float(h["accuracy"][i]), "accepted": bool(h["accepted"][i])}
            for i in range(len(h["accuracy"]))
        ]
        return self
