"""MCTS-IS: Monte-Carlo tree search interaction selection with an incremental FDT."""

from __future__ import annotations

import numbers

import numpy as np
from river import base

from online.interactions import search
from online.interactions.extraction import extract, route
from online.interactions.fdt import FDT
from online.interactions.serving import serving_fdt
from online.interactions.vocabulary import Vocabulary

FORMAT = "grove.mcts_is"
VERSION = 1
_PARAMS = (
    "c_p",
    "v",
    "kappa",
    "c_f",
    "lambda_",
    "grace_period",
    "max_depth",
    "max_nodes",
    "max_categories",
    "groups",
    "seed",
)


class MCTSInteractions(base.Classifier, base.SupervisedTransformer, base.Transformer):
    """MCTS-IS: online selection of interactions among categorical predictors.

    N_T FDTs (Def. 1-2) are grown by Monte-Carlo tree search, one per field: the i-th FDT's root
    may only split on field i (Appendix B.3). Each ``learn_one(x, y)`` is one iteration of
    Algorithm 1 in every FDT: *selection* with the policy of eq. (8) among the feature nodes not
    excluded by the estimated screening criterion of eqs. (5)-(6); *backpropagation* of V, B,
    p_hat, mu_hat and s along the selected path, of the weighted errors of eq. (9) into
    sigma_hat, and the extra updates of lines 22-26 under excluded feature nodes; *expansion* of
    the deepest selected node. The current optimal DT of every FDT is extracted with the
    divide-and-conquer recursion of eq. (7); its leaves are the selected interactions.

    ``predict_proba_one`` is a weighted mean of the leaf means mu_hat of the N_T extracted DTs
    (each DT is the least-squares fit of eqs. (2)-(3): its leaf weights are E[y | leaf], eq. 13),
    each DT weighted by the squared error it removes, mu_hat_r (1 - mu_hat_r) - L*_{n_r}.
    ``transform_one`` gives the one-hot leaf interactions, named ``"f1=a & f2=b"`` (fields in
    path order), so that ``MCTSInteractions() | linear_model.LogisticRegression()`` works.

    Parameters
    ----------
    c_p
        C_p of the selection policy, eq. (8). Appendix B.3: 0.5.
    v
        v of eq. (9). Appendix B.3: 20.
    kappa
        kappa of eq. (9). Appendix B.3: 40.
    c_f
        c_F of the screening criterion, eq. (5). B.3 searches {0.05, 0.005, 0.0005}.
    lambda_
        lambda of the screening criterion, eq. (5). B.3 searches {5e-3, 5e-4, 5e-5}.
    grace_period
        A leaf data node is expanded once its V reaches this value, and a feature node is a
        candidate of the eq. (7) extraction once selected this many times. The paper expands at
        every visit (``grace_period=1``); the default 20 = kappa - v is the visit count from which
        eq. (9) trusts the deepest node most (gamma >= 1).
    max_depth
        Largest number of fields in an interaction (None: no limit but the number of fields).
    max_nodes
        Budget of data-node rows for the whole forest; once spent, no more expansions (the
        estimators keep learning). Bounds memory: about 48 bytes per data node plus 48 per
        feature node (250,000 data nodes: 13-20 MB of arrays). On the bench data sets
        (bench/mcts_is/README.md, Table 1, 5 seeds) 250,000 nodes keep the fit within 2-5x
        LightGBM's on 1M rows; 1,000,000 nodes give better leaf features on Kr-vs-kp and
        Splice (LR test log loss 0.017 vs 0.025, 0.081 vs 0.092), not on Tic-tac-toe, and
        take about 6x LightGBM's fit time on Kr-vs-kp and Tic-tac-toe.
    max_categories
        Per field, the first ``max_categories - 1`` values keep their own category and later
        ones share ``"<other>"`` (None: no limit).
    groups
        Appendix B.2: group the raw fields at random (seeded) into this many composite fields.
    seed
        Seed of the random generator (tie-breaks of eq. 8, grouping).

    Choices where the paper is silent or ambiguous
    ----------------------------------------------
    - Eq. (1)'s second index set reads ``pa(n_j) = pa(n_j)``; we read ``pa(n_j) = pa(n_j')`` for
      some kept j' (every sibling of a kept leaf is kept, Remark 2), and ``> lambda`` keeps a
      leaf: this is the reading under which Theorem 4 holds (a feature node is pruned only when
      *all* its child data nodes satisfy eq. 5).
    - The s_{n^d} formula of sec. 3 puts mu_hat under the square root; we use
      ``s = mu_hat * prod p_hat + c_F * sqrt(prod p_hat)``, the estimate of eq. (5)'s left side
      (also what line 25 computes). See ``online.interactions.screening``.
    - Line 22 of Algorithm 1 loops over ``c(n^d') minus l(n^d')``; sec. 3.2 says every excluded
      feature node's child data node gets the update. We apply it at every data node of the
      selected path, root and deepest node included (so a fully pruned node can recover).
    - Algorithm 1 writes the expansion before the selection inside ``Search``; we follow the
      text of sec. 3: selection stops at a leaf (or an l(n^d) = {} node) and only that deepest
      node is expanded, once its V reaches ``grace_period``.
    - s and p_hat are computed from the estimators after this iteration's updates (t + 1).
    - K_i is not known online: categories get codes as they appear, a feature node gets a child
      data node (V = 1, B = 0, s = 1) for every category known when it is created or when a
      later category first reaches it. A field first seen after a data node was expanded is not
      added to that node. A missing field is the category None; at predict time an unknown
      category stops the descent at the data node above it (its mu_hat is used, no leaf).
    - Eq. (7) runs on T_hat^P (Theorem 5): leaf-parent feature nodes use sigma_hat, other leaf
      data nodes the Bernoulli variance mu_hat (1 - mu_hat); feature nodes selected fewer than
      ``grace_period`` times are not candidates (one selection with y = mu_hat = 0 gives
      sigma_hat = 0, which would win every argmin). Ties: the lowest field id.
    - Eq. (8): never-selected feature nodes (V = 0, infinite bonus) first, at random. A tied
      argmin is broken uniformly at random among the tied feature nodes, with one random number
      drawn only when there is a tie (until 2026-11 every scanned feature node drew a
      tie-break key: the same distribution, but other draws for a seed, so other results).
    - ``learn_many(X, y)`` is ``learn_one`` on each row in turn (Algorithm 1 is sequential:
      sample t's path reads what sample t-1 updated); it only saves the Python per-row work.
    - ``to_state(statistics=False)`` (a serving copy, not in the paper) keeps only the extracted
      DTs and the nodes with s > lambda, with their paths and sibling blocks; it predicts and
      lists interactions as the full model does, and refuses to learn.
    - Not in the paper, to bound time and memory: ``grace_period`` (expansion after that many
      visits; 1 = the paper), ``max_nodes`` (no expansion once the data-node table is full),
      ``max_depth``, ``max_categories`` (later values share ``"<other>"``).
    - Prediction: the N_T DTs are fitted separately (eq. 2); we combine their leaf means
      mu_hat = B / V (V starts at 1, sec. 3) weighted by the squared error each DT removes.
    - Eq. (9) weights use gamma^(j - |SN_t|) (the common factor cancels); the root's error is
      never in an L (eq. 9 starts at the first selected data node below n_r).
    - ``interactions()`` follows Appendix B.4: data nodes with s > lambda, a chi-square test of
      the 2x2 table (in the node or not) x (y) built from the estimated support and means,
      Bonferroni correction, ranking by the chi-square statistic.

    Examples
    --------
    >>> import random
    >>> from online import MCTSInteractions
    >>> rng = random.Random(0)
    >>> model = MCTSInteractions(lambda_=0.2, seed=1)
    >>> for _ in range(1000):
    ...     x = {"a": rng.choice("01"), "b": rng.choice("01"), "c": rng.choice("01")}
    ...     model.learn_one(x, int(x["a"] != x["b"]))  # y = a XOR b

    >>> round(model.predict_proba_one({"a": "0", "b": "1", "c": "0"})[True], 2)
    0.99
    >>> sorted(model.transform_one({"a": "0", "b": "1", "c": "0"}))
    ['a=0 & b=1', 'b=1 & a=0', 'c=0']
    >>> model.trees()[0]["leaves"]
    ['a=1 & b=1', 'a=1 & b=0', 'a=0 & b=1', 'a=0 & b=0']
    >>> top = model.interactions(top=1)[0]
    >>> top["rule"], top["mean"]
    ('b=0 & a=1', 1.0)

    The FDT of the root field ``c`` can only split on ``c`` first (Appendix B.3), and deeper
    splits are screened out by lambda (eq. 5): it carries no weight in the prediction.

    References
    ----------
    Identifying interactions among categorical predictors with Monte-Carlo tree search
    (anonymous, under review), ../shared/papers/mcts-is.txt.

    """

    def __init__(
        self,
        c_p: float = 0.5,
        v: float = 20.0,
        kappa: float = 40.0,
        c_f: float = 0.05,
        lambda_: float = 0.005,
        grace_period: int = 20,
        max_depth: int | None = None,
        max_nodes: int = 250_000,
        max_categories: int | None = 64,
        groups: int | None = None,
        seed: int | None = None,
    ):
        if c_p < 0 or v <= 0 or kappa <= 0 or c_f < 0 or lambda_ < 0:
            raise ValueError("c_p, c_f, lambda_ must be >= 0 and v, kappa > 0")
        if max_categories is not None and max_categories < 2:
            raise ValueError("max_categories must be None or >= 2")
        if groups is not None and groups < 1:
            raise ValueError("groups must be None or >= 1")
        if max_nodes < 1 or grace_period < 0 or (max_depth is not None and max_depth < 1):
            raise ValueError("max_nodes must be >= 1, grace_period >= 0 and max_depth None or "
                             f">= 1; got {max_nodes}, {grace_period}, {max_depth}")
        self.c_p = c_p
        self.v = v
        self.kappa = kappa
        self.c_f = c_f
        self.lambda_ = lambda_
        self.grace_period = grace_period
        self.max_depth = max_depth
        self.max_nodes = max_nodes
        self.max_categories = max_categories
        self.groups = groups
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._vocab = Vocabulary(max_categories, groups)
        self._fdt = FDT()
        self._n_learned = 0
        self._extracted = None  # cache of extract(): (best_f, loss_d)
        self._names: dict[int, str] = {}
        self._scratch = None  # work arrays of the compiled search (search.Scratch)
        self._serving = False  # restored from to_state(statistics=False): predicts only

    @property
    def _multiclass(self):
        return False

    @classmethod
    def _unit_test_params(cls):
        yield {"seed": 42, "groups": 3, "max_depth": 2, "max_nodes": 20_000}
        yield {"seed": 3, "grace_period": 5, "max_nodes": 20_000, "max_categories": 8}

    # -- learning ------------------------------------------------------------------------------

    def _params(self) -> dict:
        return {name: getattr(self, name) for name in _PARAMS}

    @staticmethod
    def _target(y) -> float:
        if isinstance(y, (bool, np.bool_)) or (
            isinstance(y, numbers.Real) and y in (0, 1)
        ):
            return float(y)
        raise ValueError(f"MCTSInteractions learns y in {{0, 1}}, got {y!r}")

    def _sync_trees(self, K: np.ndarray) -> None:
        for field in range(len(self._fdt.roots), len(K)):
            self._fdt.add_tree(field, K)

    def _check_learns(self) -> None:
        if self._serving:
            raise RuntimeError(
                "this model was restored without its search statistics "
                "(to_state(statistics=False)): it can predict, not learn"
            )

    def _learn_codes(self, codes: np.ndarray, y: np.ndarray, k_before: np.ndarray) -> None:
        """Algorithm 1 on each row in turn, with the K_i known when that row came: codes are
        given in order of appearance, so after row r, K_i = max(code_i up to r) + 1."""
        k_rows = np.maximum.accumulate(codes + 1, axis=0)
        k_rows[:, : len(k_before)] = np.maximum(k_rows[:, : len(k_before)], k_before)
        self._sync_trees(k_rows[0])
        shape = (len(self._fdt.roots), codes.shape[1])
        if self._scratch is None or self._scratch.shape != shape:
            self._scratch = search.Scratch(*shape)
        search.iterate(
            self._fdt, codes, y, k_rows, self._params(), self._rng, self._scratch
        )
        self._n_learned += len(y)
        self._extracted = None
        self._names.clear()

    def learn_one(self, x: dict, y) -> None:
        """One iteration of Algorithm 1 on (x, y) in each of the N_T FDTs."""
        self._check_learns()
        target = self._target(y)
        k_before = self._vocab.n_categories
        codes = self._vocab.learn_row(x, self._rng)
        self._learn_codes(codes[None, :], np.array([target]), k_before)

    def learn_many(self, X, y) -> None:
        """``learn_one`` on each row of DataFrame ``X`` in turn (the same model, faster)."""
        self._check_learns()
        targets = np.asarray(y, dtype=np.float64).ravel()
        if not np.isin(targets, (0.0, 1.0)).all():
            raise ValueError("MCTSInteractions learns y in {0, 1}")
        if len(targets) == 0:
            return
        k_before = self._vocab.n_categories
        codes = self._vocab.learn_frame(X, self._rng)
        self._learn_codes(codes, targets, k_before)

    # -- the extracted DTs ---------------------------------------------------------------------

    def _best(self) -> np.ndarray:
        if self._extracted is None:
            best_f, loss_d, _ = extract(self._fdt, min_visits=self.grace_period)
            self._extracted = (best_f, loss_d)
        return self._extracted[0]

    def _name(self, node: int) -> str:
        name = self._names.get(node)
        if name is None:
            vocab = self._vocab
            name = " & ".join(
                f"{vocab.fields[i]}={vocab.values[i][j]}"
                for i, j in self._fdt.path_terms(node)
            )
            self._names[node] = name
        return name

    def _route(self, codes: np.ndarray):
        return route(self._fdt, self._best(), codes)

    def _tree_weights(self) -> np.ndarray:
        """Weight of each extracted DT in ``predict_proba_one``: the squared error it removes,
        mu_r (1 - mu_r) - L*_{n_r} (eq. 7), floored at 0; equal weights if all are 0."""
        self._best()
        roots = self._fdt.roots
        mu = self._fdt.mu_hat(roots)
        gain = np.maximum(mu * (1.0 - mu) - self._extracted[1][roots], 0.0)
        return (
            gain / gain.sum()
            if gain.sum() > 0
            else np.full(len(roots), 1.0 / len(roots))
        )

    def _proba(self, nodes: np.ndarray) -> np.ndarray:
        mu = self._fdt.mu_hat(nodes.ravel()).reshape(nodes.shape)
        return np.clip(mu @ self._tree_weights(), 0.0, 1.0)

    def predict_proba_one(self, x: dict, **kwargs) -> dict:
        if len(self._fdt.roots) == 0:
            return {False: 0.5, True: 0.5}
        nodes, _ = self._route(self._vocab.encode_row(x)[None, :])
        p = float(self._proba(nodes)[0])
        return {False: 1.0 - p, True: p}

    def predict_one(self, x: dict, **kwargs) -> bool:
        return self.predict_proba_one(x)[True] > 0.5

    def explain_one(self, x: dict) -> dict:
        """``predict_proba_one``'s probability with, per extracted DT, the leaf reached (its
        conjunction, or None when the DT does not split or an unknown category stopped it),
        the leaf's mean mu_hat and the DT's weight."""
        if len(self._fdt.roots) == 0:
            return {"probability": 0.5, "trees": []}
        nodes, at_leaf = self._route(self._vocab.encode_row(x)[None, :])
        weights = self._tree_weights()
        mu = self._fdt.mu_hat(nodes[0])
        trees = [
            {
                "root": self._vocab.fields[int(field)],
                "leaf": self._name(int(n)) if leaf and n != root else None,
                "mean": float(m),
                "weight": float(w),
            }
            for n, leaf, root, field, m, w in zip(
                nodes[0],
                at_leaf[0],
                self._fdt.roots,
                self._fdt.root_fields,
                mu,
                weights,
            )
        ]
        return {"probability": float(np.clip(mu @ weights, 0.0, 1.0)), "trees": trees}

    def transform_one(self, x: dict) -> dict:
        """One-hot leaf interactions of the extracted DTs (trees that do not split give none)."""
        if len(self._fdt.roots) == 0:
            return {}
        nodes, at_leaf = self._route(self._vocab.encode_row(x)[None, :])
        roots = self._fdt.roots
        return {
            self._name(int(n)): 1.0
            for n, leaf, root in zip(nodes[0], at_leaf[0], roots)
            if leaf and n != root
        }

    def predict_proba_many(self, X):
        import pandas as pd

        if len(self._fdt.roots) == 0:
            p = np.full(len(X), 0.5)
        else:
            nodes, _ = self._route(self._vocab.encode_frame(X))
            p = self._proba(nodes)
        return pd.DataFrame({False: 1.0 - p, True: p}, index=X.index)

    def leaves_many(self, X) -> np.ndarray:
        """Leaf reached in each extracted DT by each row of ``X`` (rows x N_T array of node ids;
        -1 where a tree does not split or an unknown category stopped the descent)."""
        if len(self._fdt.roots) == 0:
            return np.full((len(X), 0), -1, dtype=np.int64)
        nodes, at_leaf = self._route(self._vocab.encode_frame(X))
        return np.where(at_leaf & (nodes != self._fdt.roots[None, :]), nodes, -1)

    def transform_many(self, X):
        """``transform_one`` for every row of ``X`` as a 0/1 DataFrame (one column per leaf)."""
        import pandas as pd

        leaves = self.leaves_many(X)
        cols = sorted({int(n) for n in np.unique(leaves) if n >= 0})
        out = pd.DataFrame(0.0, index=X.index, columns=[self._name(n) for n in cols])
        for k, n in enumerate(cols):
            out.iloc[:, k] = (leaves == n).any(axis=1).astype(float)
        return out

    # -- interactions (Appendix B.4) -----------------------------------------------------------

    def trees(self) -> list[dict]:
        """The extracted DT of each FDT: root field, estimated loss L*_{n_r} (eq. 7), leaves."""
        best = self._best()
        out = []
        for t, root in enumerate(self._fdt.roots.tolist()):
            leaves, stack = [], [root]
            while stack:
                node = stack.pop()
                f = best[node]
                if f < 0:
                    leaves.append(node)
                    continue
                start, count = int(self._fdt.f.cstart[f]), int(self._fdt.f.ccount[f])
                stack.extend(range(start + count - 1, start - 1, -1))
            out.append(
                {
                    "root": self._vocab.fields[int(self._fdt.root_fields[t])],
                    "loss": float(self._extracted[1][root]),
                    "leaves": [self._name(n) for n in leaves if n != root],
                }
            )
        return out

    def interactions(
        self, alpha: float = 0.05, leaves_only: bool = False, top: int | None = None
    ):
        """Selected interactions, ranked by chi-square (Appendix B.4).

        Candidates are the data nodes with s > lambda (or, with ``leaves_only``, the leaves of
        the extracted DTs). Each is tested with a 1-dof chi-square on the 2x2 table (in the
        node or not) x (y = 1 or 0), counts estimated from its tree: N = samples learned, the
        node's estimated support P_hat(S) (eq. 6) and mean, the root's mean. Kept when the
        Bonferroni-corrected p-value is below ``alpha``. One entry per distinct conjunction.
        """
        from scipy.stats import chi2

        fdt = self._fdt
        D = fdt.d
        n = D.n
        if n == 0:
            return []
        best = self._best()
        if leaves_only:
            cand = np.array(
                sorted({int(x) for x in self._leaf_nodes(best)}), dtype=np.int64
            )
        else:
            live = (D.depth[:n] >= 1) & (D.s[:n] > self.lambda_) & (D.V[:n] > 1)
            cand = np.flatnonzero(live)
        if cand.size == 0:
            return []
        support = self._supports()[cand]
        count = D.V[cand] - 1.0  # V starts at 1 (sec. 3)
        mean = np.where(count > 0, D.B[cand] / np.maximum(count, 1.0), 0.0)
        roots = fdt.roots[D.tree[cand]]
        N = D.V[roots] - 1.0
        base_rate = D.B[roots] / np.maximum(N, 1.0)
        a = N * support  # expected in-node count
        pos_in = a * mean
        pos_out = N * base_rate - pos_in
        table = np.stack([pos_in, a - pos_in, pos_out, (N - a) - pos_out], axis=1)
        table = np.maximum(table, 0.0)
        r1, r2 = table[:, 0] + table[:, 1], table[:, 2] + table[:, 3]
        c1, c2 = table[:, 0] + table[:, 2], table[:, 1] + table[:, 3]
        denom = r1 * r2 * c1 * c2
        diff = table[:, 0] * table[:, 3] - table[:, 1] * table[:, 2]
        stat = np.where(denom > 0, N * diff**2 / np.where(denom > 0, denom, 1.0), 0.0)
        p_adj = np.minimum(chi2.sf(stat, 1) * cand.size, 1.0)  # Bonferroni
        order = np.lexsort((cand, -stat))
        keep = order[p_adj[order] < alpha]
        leaf_set = set(self._leaf_nodes(best).tolist())
        out, seen = [], set()
        for k in keep.tolist():
            node = int(cand[k])
            terms = self._fdt.path_terms(node)
            key = frozenset(terms)
            if key in seen:
                continue
            seen.add(key)
            vocab = self._vocab
            out.append(
                {
                    "terms": {vocab.fields[i]: vocab.values[i][j] for i, j in terms},
                    "rule": self._name(node),
                    "support": float(support[k]),
                    "count": float(count[k]),
                    "mean": float(mean[k]),
                    "chi2": float(stat[k]),
                    "p_value": float(p_adj[k]),
                    "tree": vocab.fields[int(fdt.root_fields[D.tree[node]])],
                    "leaf": node in leaf_set,
                }
            )
            if top is not None and len(out) >= top:
                break
        return out

    def _leaf_nodes(self, best: np.ndarray) -> np.ndarray:
        out = []
        stack = [int(r) for r in self._fdt.roots]
        while stack:
            node = stack.pop()
            f = best[node]
            if f < 0:
                if self._fdt.d.parent[node] >= 0:
                    out.append(node)
                continue
            start, count = int(self._fdt.f.cstart[f]), int(self._fdt.f.ccount[f])
            stack.extend(range(start, start + count))
        return np.array(out, dtype=np.int64)

    def _supports(self) -> np.ndarray:
        """Eq. (6) with estimators for every data node: P_hat(S) = prod of p_hat below n_r."""
        D, F = self._fdt.d, self._fdt.f
        n = D.n
        out = np.ones(n)
        depth = D.depth[:n]
        for k in range(1, int(depth.max()) + 1 if n else 0):
            nodes = np.flatnonzero(depth == k)
            f = D.parent[nodes]
            out[nodes] = D.V[nodes] / F.sumV[f] * out[F.parent[f]]
        return out

    # -- size and state ------------------------------------------------------------------------

    @property
    def n_nodes(self) -> dict:
        """Live data nodes, feature nodes, and bytes held by the node arrays."""
        return {
            "data_nodes": self._fdt.n_live_data_nodes,
            "feature_nodes": int(self._fdt.f.n),
            "bytes": int(self._fdt.nbytes),
        }

    def to_state(self, statistics: bool = True) -> dict:
        """Everything needed to continue exactly: numpy arrays and JSON scalars, no pickle.

        With ``statistics=False``, a serving copy: only the extracted DTs and the interaction
        candidates (s > lambda) with their paths (``online.interactions.serving``). The restored
        model predicts, transforms, explains and lists interactions exactly as this one, but
        cannot learn. A grown FDT is mostly search statistics, so this is much smaller.
        """
        rng = self._rng.bit_generator.state
        if statistics and not self._serving:
            fdt = self._fdt.to_state()
        else:
            best = self._best()
            served, best_f, loss_d = serving_fdt(
                self._fdt, best, self._extracted[1], self.lambda_
            )
            fdt = {**served.to_state(), "best_f": best_f, "loss_d": loss_d}
        return {
            "format": FORMAT,
            "version": VERSION,
            "params": self._params(),
            "n_learned": self._n_learned,
            "rng": {
                "bit_generator": rng["bit_generator"],
                "state": str(rng["state"]["state"]),
                "inc": str(rng["state"]["inc"]),
                "has_uint32": int(rng["has_uint32"]),
                "uinteger": int(rng["uinteger"]),
            },
            "vocabulary": self._vocab.to_state(),
            "fdt": fdt,
            "statistics": statistics and not self._serving,
        }

    @classmethod
    def from_state(cls, state: dict) -> MCTSInteractions:
        if state.get("format") != FORMAT or state.get("version") != VERSION:
            raise ValueError(f"not a {FORMAT} v{VERSION} state")
        model = cls(**state["params"])
        rng = state["rng"]
        model._rng.bit_generator.state = {
            "bit_generator": rng["bit_generator"],
            "state": {"state": int(rng["state"]), "inc": int(rng["inc"])},
            "has_uint32": int(rng["has_uint32"]),
            "uinteger": int(rng["uinteger"]),
        }
        model._vocab = Vocabulary.from_state(
            state["vocabulary"], model.max_categories, model.groups
        )
        model._fdt = FDT.from_state(state["fdt"])
        model._n_learned = int(state["n_learned"])
        if not state.get("statistics", True):  # a serving copy: its extraction comes with it
            model._serving = True
            model._extracted = (
                np.asarray(state["fdt"]["best_f"], dtype=np.int64).copy(),
                np.asarray(state["fdt"]["loss_d"], dtype=np.float64).copy(),
            )
        return model
