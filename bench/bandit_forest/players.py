"""Players for the Bandit Forest benchmarks: each plays one policy on chunks of a ``BanditStream``.

A player's ``play(X, labels)`` plays the steps of one chunk in order, one at a time for the
learning policies: decide on the noisy context, get the reward of the chosen action only
(1 when it equals the label), learn from it. It returns the reward of every step.

Players
-------
- ``forest`` / ``tree``: ``online.BanditForest`` through ``decide()`` / ``learn_one()`` with the
  logged probability (the forest applies inverse propensity scoring itself, sec. 5). Bandit
  Tree is one tree without randomization (``n_trees=1``, every variable a split candidate,
  fixed ε and depth), as in the paper's fig. 1.
- ``uniform``: a uniform random draw.
- ``linucb``: river's ``bandit.LinUCBDisjoint`` (``pull`` / ``update``).
- ``vw_eps``: Vowpal Wabbit ``--cb_explore K --epsilon 0.05``; cost = -reward, logged with the
  probability VW gave the played action.
- ``vw_squarecb``: VW ``--cb_explore_adf --squarecb -q sa``: shared namespace ``s`` holds the
  context, each action line holds an action indicator in namespace ``a``; ``-q sa`` crosses them.
- ``reference``: the paper's reference, a random forest of 100 trees not limited by depth,
  trained offline on the whole clean data set with full information (scikit-learn), playing
  greedily on the same noisy stream.

Choices where the paper is silent or ambiguous
----------------------------------------------
- LinUCB gets the active binary variables plus a constant ``bias`` = 1 (zero-valued variables
  do not change a linear model, so leaving them out only saves time); river's defaults
  (alpha = beta = 1) otherwise.
- VW explores with its own probabilities but the draw is ours (numpy, seeded), so that the
  logged probability is the one the action was drawn with; VW gets ``--random_seed`` too.
- The reference forest uses scikit-learn's defaults (``max_features="sqrt"``, bootstrap).
"""

from __future__ import annotations

import numpy as np

from bench.common.streams import Recoded


def _draw(rng: np.random.Generator, pmf) -> int:
    """Index drawn from a probability vector (renormalised: VW's float32 pmf may not sum to 1)."""
    cum = np.cumsum(pmf)
    return min(int(np.searchsorted(cum, rng.random() * cum[-1], side="right")), len(cum) - 1)


class Player:
    """Plays one policy on a stream; ``play`` returns the rewards of one chunk."""

    name = "player"

    def play(self, X: np.ndarray, y: np.ndarray) -> np.ndarray:
        out = np.empty(len(y))
        for i, (row, label) in enumerate(zip(X, y.tolist())):
            out[i] = self.step(row, label)
        return out

    def step(self, row: np.ndarray, label: int) -> float:  # pragma: no cover - abstract
        raise NotImplementedError


class UniformPlayer(Player):
    name = "uniform"

    def __init__(self, data: Recoded, seed: int = 0):
        self.k = len(data.actions)
        self.rng = np.random.default_rng(seed)

    def play(self, X, y):
        return (self.rng.integers(self.k, size=len(y)) == y).astype(float)


class ReferencePlayer(Player):
    """Random forest of 100 trees, full information, no noise, trained on the whole data set."""

    name = "reference"

    def __init__(
        self, data: Recoded, seed: int = 0, n_estimators: int = 100, max_depth: int | None = None
    ):
        from sklearn.ensemble import RandomForestClassifier

        self.model = RandomForestClassifier(
            n_estimators=n_estimators, max_depth=max_depth, random_state=seed, n_jobs=1
        )
        self.model.fit(data.X, data.y)

    def play(self, X, y):
        return (self.model.predict(X) == y).astype(float)


class LinUCBPlayer(Player):
    """river's own ``bandit.LinUCBDisjoint`` (slow: ~250 events/s here)."""

    name = "linucb_river"

    def __init__(self, data: Recoded, seed: int = 0):
        from river import bandit

        self.policy = bandit.LinUCBDisjoint(seed=seed)
        self.arms = list(range(len(data.actions)))
        self.names = np.array(data.feature_names, dtype=object)

    def play(self, X, y):
        out = np.empty(len(y))
        pull, update, arms = self.policy.pull, self.policy.update, self.arms
        for i, (row, label) in enumerate(zip(X, y.tolist())):
            x = dict.fromkeys(self.names[np.flatnonzero(row)].tolist(), 1)
            x["bias"] = 1
            arm = pull(arms, x)
            out[i] = r = 1.0 if arm == label else 0.0
            update(arm, x, r)
        return out


class FastLinUCBPlayer(Player):
    """The maths of river's ``LinUCBDisjoint`` (defaults alpha = beta = 1) on dense numpy arrays.

    river's class runs at ~250 events/s on these streams (one ``BayesianLinearRegression`` per
    arm, a dict -> array conversion and a d x d product per arm per step), too slow for 1M steps
    here. Per arm a (Bishop 3.51, 3.58, 3.59 as river implements them): precision
    P_a = I/alpha + beta * sum x x^T, covariance S_a = P_a^-1 (Sherman-Morrison),
    mean m_a = S_a * beta * sum(y x); UCB_a = m_a.x + sqrt(1/beta + x^T S_a x); ties broken by
    ``random.Random(seed).choice`` as in river. Features an arm has not seen yet are identical to
    features with the prior alone, so one d-dimensional model per arm from the start is the same
    model. ``linucb_river`` runs river's own class to check that the two agree.
    """

    name = "linucb"

    def __init__(self, data: Recoded, seed: int = 0, alpha: float = 1.0, beta: float = 1.0):
        import random

        k, d = len(data.actions), data.X.shape[1] + 1  # + bias
        self.beta = beta
        self.S = np.repeat(np.eye(d)[None] / alpha, k, axis=0)
        self.eta = np.zeros((k, d))
        self.m = np.zeros((k, d))
        self._rng = random.Random(seed)

    def play(self, X, y):
        out = np.empty(len(y))
        S, m, eta, beta, rng = self.S, self.m, self.eta, self.beta, self._rng
        for i, (row, label) in enumerate(zip(X, y.tolist())):
            J = np.append(np.flatnonzero(row), S.shape[1] - 1)  # active variables + bias
            mu = m[:, J].sum(axis=1)
            var = 1.0 / beta + S[:, J][:, :, J].sum(axis=(1, 2))
            ucb = mu + np.sqrt(var)
            best = np.flatnonzero(ucb == ucb.max())
            a = int(best[0]) if len(best) == 1 else rng.choice(best.tolist())
            out[i] = r = 1.0 if a == label else 0.0
            Sa = S[a]
            Su = beta * Sa[:, J].sum(axis=1)  # S_a (beta x)
            Sa -= np.outer(Su, Sa[J].sum(axis=0)) / (1.0 + Su[J].sum())  # Sherman-Morrison
            eta[a, J] += beta * r
            m[a] = Sa @ eta[a]
        return out


def vw_features(row: np.ndarray) -> str:
    """VW text for a binary row: the names ``f<j>`` of its active variables."""
    return " ".join([f"f{j}" for j in np.flatnonzero(row).tolist()])


class VWEpsilonPlayer(Player):
    name = "vw_eps"

    def __init__(self, data: Recoded, seed: int = 0, epsilon: float = 0.05):
        import vowpalwabbit

        self.k = len(data.actions)
        self.args = f"--cb_explore {self.k} --epsilon {epsilon} --random_seed {seed} --quiet"
        self.vw = vowpalwabbit.Workspace(self.args)
        self.rng = np.random.default_rng(seed)

    def play(self, X, y):
        out = np.empty(len(y))
        vw, rng = self.vw, self.rng
        for i, (row, label) in enumerate(zip(X, y.tolist())):
            feats = vw_features(row)
            pmf = vw.predict("| " + feats)
            a = _draw(rng, pmf)
            out[i] = r = 1.0 if a == label else 0.0
            vw.learn(f"{a + 1}:{-r}:{pmf[a]} | {feats}")
        return out


class VWSquareCBPlayer(Player):
    name = "vw_squarecb"

    def __init__(self, data: Recoded, seed: int = 0):
        import vowpalwabbit

        self.k = len(data.actions)
        self.args = f"--cb_explore_adf --squarecb -q sa --random_seed {seed} --quiet"
        self.vw = vowpalwabbit.Workspace(self.args)
        self.rng = np.random.default_rng(seed)
        self.action_lines = [f"|a k{a}" for a in range(self.k)]

    def play(self, X, y):
        out = np.empty(len(y))
        vw, rng, lines = self.vw, self.rng, self.action_lines
        for i, (row, label) in enumerate(zip(X, y.tolist())):
            example = ["shared |s " + vw_features(row), *lines]
            pmf = vw.predict(example)  # one probability per action line, in line order
            a = _draw(rng, pmf)
            out[i] = r = 1.0 if a == label else 0.0
            example[a + 1] = f"0:{-r}:{pmf[a]} {lines[a]}"
            vw.learn(example)
        return out


class ForestPlayer(Player):
    """``online.BanditForest`` with dict contexts, as the service calls it."""

    name = "forest"

    def __init__(self, data: Recoded, seed: int = 0, **params):
        from online import BanditForest

        self.policy = BanditForest(seed=seed, **params)
        self.actions = list(data.actions)
        for a in self.actions:
            self.policy.add_action(a)
        self.index = {a: i for i, a in enumerate(self.actions)}
        self.names = data.feature_names
        # diagnostics, per chunk: [steps, explored steps, reward when explored, reward when voted]
        self.log: list[list[float]] = []

    def contexts(self, X):
        """The policy's input for each row of X: a dict of every variable."""
        names = self.names
        return (dict(zip(names, row)) for row in X.tolist())

    def play(self, X, y):
        out = np.empty(len(y))
        explored = np.zeros(len(y), dtype=bool)
        decide, learn, index = self.policy.decide, self.policy.learn_one, self.index
        for i, (x, label) in enumerate(zip(self.contexts(X), y.tolist())):
            d = decide(x)
            out[i] = r = 1.0 if index[d.action] == label else 0.0
            explored[i] = d.explored
            learn(x, d.action, r, d.probability)
        self.log.append(
            [len(y), int(explored.sum()), float(out[explored].sum()), float(out[~explored].sum())]
        )
        return out


class SparseForestPlayer(ForestPlayer):
    """``ForestPlayer`` with sparse contexts: ``{name: True}`` for the variables a row sets, the
    features an ad server sends for an impression and the input VW gets (``vw_features``). A
    missing key sets no variable, so the policy is the same; the encoder numbers the variables
    in the order they first appear, so the trees (and decisions) differ from the dense input's."""

    name = "forest_sparse"

    def __init__(self, data: Recoded, seed: int = 0, **params):
        super().__init__(data, seed, **params)
        self.name_array = np.array(self.names, dtype=object)

    def contexts(self, X):
        names = self.name_array
        return (dict.fromkeys(names[row].tolist(), True) for row in X.view(bool))  # 0/1 bytes


# Bandit Tree (fig. 1): one tree without randomization; epsilon and depth fixed at the middle of
# the forest's default ranges (epsilon 0.4-0.8, depth 2-6) unless --tree-params says otherwise
TREE_DEFAULTS = {"epsilon": 0.6, "max_depth": 4}
TREE_FIXED = {"n_trees": 1, "split_fraction": 1.0}

PLAYERS = {
    "forest": lambda data, seed, params: ForestPlayer(data, seed, **{"n_trees": 100, **params}),
    "tree": lambda data, seed, params: ForestPlayer(
        data, seed, **{**TREE_DEFAULTS, **params, **TREE_FIXED}
    ),
    "uniform": lambda data, seed, _: UniformPlayer(data, seed),
    "linucb": lambda data, seed, _: FastLinUCBPlayer(data, seed),
    "linucb_river": lambda data, seed, _: LinUCBPlayer(data, seed),
    "vw_eps": lambda data, seed, _: VWEpsilonPlayer(data, seed),
    "vw_squarecb": lambda data, seed, _: VWSquareCBPlayer(data, seed),
    "reference": lambda data, seed, _: ReferencePlayer(data, seed),
    # not in the paper: the same full-information forest with depth <= 6, the forest's default
    # maximal depth, to tell the cost of shallow trees from the cost of bandit feedback
    "reference_d6": lambda data, seed, _: ReferencePlayer(data, seed, max_depth=6),
}
