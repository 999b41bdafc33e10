"""BANDIT FOREST: an online random forest of decision stumps for the contextual bandit problem.

Féraud, Allesiardo, Urvoy, Clérot. *Random Forest for the Contextual Bandit Problem.* AISTATS 2016.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence

import numpy as np
from river import bandit

from online.bandit.encoder import ContextEncoder
from online.bandit.kernels import (
    LEAF,
    SLOT,
    SPLIT,
    decide_probabilities,
    finished_actions,
    greedy_actions,
    learn_event,
    learn_events,
    radius_table,
)
from online.bandit.storage import ForestStorage
from online.bandit.subforest import select_trees_state
from online.decision import Decision

__all__ = ["BanditForest", "Decision"]  # Decision lives in online.decision

FORMAT = "grove.bandit-forest"
VERSION = 1
_NO_PATHS = np.empty(0, np.int64)  # learn_event finds every tree's path itself


class BanditForest(bandit.base.ContextualPolicy):
    """BANDIT FOREST (Féraud et al., 2016): L randomized trees of decision stumps, learned online.

    Each tree is grown by stacking DECISION STUMPs (Algorithm 4). A stump explores its candidate
    variables and the actions together: after each round it eliminates the variables whose
    estimated reward ``mu^i = sum_v max_k mu^i_{k,v}`` is too far below the best one (VE,
    eq. (3)), and, for every variable i and value v, the actions too far below the best one (AE,
    eq. (4)). When one variable is left and the tree's maximal depth ``D_theta`` is not reached,
    the stump is split on it into two new paths (Algorithm 6, NewPath); at depth ``D_theta`` it
    keeps eliminating the actions of its variable's two values. A tree is randomized by theta: at
    each node, the candidate split variables are a random ``split_fraction`` of the variables not
    yet used on the path, and each tree draws its ``epsilon`` and ``D_theta`` from the given
    ranges.

    Acting follows sec. 5's practical version of Algorithm 6: the paths still exploring draw
    uniformly from the union of their remaining actions, the paths whose learning is finished
    (one action left) vote, and the reward of the played action is weighted by the inverse of
    its probability (inverse propensity scoring). With ``voting="all-finished"`` the forest votes
    only when every tree's path is finished (Algorithm 6, line 5) and draws otherwise. With the
    default ``voting="mixture"``, the draw happens with probability (number of exploring
    paths) / L and the vote with probability (number of finished paths) / L: the two rules agree
    when all paths explore or all are finished, and in between the context's region is exploited
    as soon as most of its paths are done (the paper's "localized explore then exploit"), instead
    of waiting for the last of L trees to reach its maximal depth. Either way the probability of
    every action is exact, so the logged propensities are right.

    Contexts are dicts of numbers, strings, bools or None, turned into binary variables by a
    :class:`~online.bandit.encoder.ContextEncoder` (numbers: ``n_bins`` equal-frequency bins;
    strings: one variable per value; see there for missing keys and unseen values). The first
    ``warmup`` events are played uniformly at random, as every root stump would, and kept: then
    the numeric bins are learned from them, the trees are created, and those events are
    replayed into the trees, so nothing is lost.

    Parameters
    ----------
    n_trees
        L, the number of trees (1 with ``split_fraction=1`` and fixed ``epsilon``/``max_depth``
        gives BANDIT TREE).
    delta
        δ, the probability of failure in the elimination bounds (3) and (4).
    epsilon
        ε, the approximation tolerance of eqs. (3)-(4): a number, or a ``(low, high)`` range
        from which each tree draws its own value uniformly (the paper uses 0.4-0.8).
    max_depth
        D, the maximal depth of a tree (the root stump is depth 1): an int, or a ``(low, high)``
        range from which each tree draws its own ``D_theta``. The paper uses 10-18 over 10
        million events; a path at depth D needs about 2^D times a stump's sample complexity
        before it votes, so the default, 2-6, suits streams of about a million events (see
        bench/README.md for both).
    split_fraction
        Fraction of the remaining variables a node may split on (θ's random subsets; 0.8 in the
        paper).
    n_bins
        Equal-frequency bins of a numeric feature (5 in the paper).
    warmup
        Events played uniformly before the trees are built (see above); also the number of
        values a numeric feature first seen later needs before its bins exist.
    voting
        ``"mixture"`` (default) or ``"all-finished"`` (the paper's Algorithm 6): see above.
    ips
        How the reward of the played action is divided by its probability p (sec. 5):
        ``"self-normalized"`` (default) or ``"plain"``, see "IPS" below.
    seed
        Seed of the random generators: same seed and same calls give the same decisions.

    Choices where the paper is silent or ambiguous
    ----------------------------------------------
    * **IPS (sec. 5).** "The obtained reward is divided by the probability to draw the played
      action." With ``ips="self-normalized"`` (default) rewards are weighted by w = 1/p and
      every mean is self-normalised: mu = sum(w y) / sum(w) over the plays of the action, an
      estimate of the mean reward on [0, 1], the range the radii of eqs. (3)-(4) assume.
      With ``ips="plain"`` y/p enters the paper's running means as written (VE line 4, whose
      denominator is the count t_k): mu = sum(y / p) / t_k. Those means are about 1/P(k is
      played) times the [0, 1] ones (about K while the draw is uniform), so against the
      unscaled radii and ε elimination follows the (amplified) gaps sooner: gap-sensitive, but
      the radius is then no longer a valid confidence bound for y/p (range [0, 1/p]), so δ
      loses its meaning. Both coincide when every p is 1. On the benchmark streams plain IPS
      learned faster where rewards are rare (Letter, 300k steps: 0.195 vs 0.101 average
      reward; Shuttle and Adult unchanged, bench/bandit_forest/README.md), but on a clean
      depth-2 problem (tests/online/test_bandit_forest.py) it converged worse (last 5k of 40k
      events: 0.61 vs 0.80): under the mixture vote the voted action is played with p near 1
      and the others with small p, so their y/p means are inflated and exploring stumps keep
      favouring rarely played actions. Hence self-normalised by default.
    * **Rounds.** "If k = LastAction(A)" becomes: a stump runs VE and AE after every
      ``n_actions`` plays of its path. A leaf runs AE on its cell after every play (it is cheap).
    * **Counts in the bounds.** Eq. (3) uses t = min_k t_{c,k} over the actions (the estimate of
      mu^i involves all of them). Eq. (4) compares k' and k with r(t_{k'}) + r(t_k), where
      2 r(t) is the right-hand side of (4): the same as (4) when the counts are equal, as they
      are under round-robin. K is the number of actions in the inventory, M the number of binary
      variables.
    * **Eliminated everywhere.** An exploring stump draws from the actions still remaining for
      some (variable, value): the case sec. 3.4 mentions but leaves out ("eliminated for all
      values of all variables") is handled.
    * **Randomization.** ε and D_θ are drawn per tree (uniform on the range; D inclusive); the
      candidate subset of a node has round(split_fraction * |V_c|) variables (at least 1). A
      node with no variable left is a leaf playing ACTION SELECTION alone.
    * **Voting.** The paper votes only once every path is finished, and its sec. 5 says the
      regret falls gradually because frequent paths "already vote for their best actions"
      while unlikely ones explore; with 100 trees of depth 10-18 the strict rule rarely votes
      within a million events, hence the mixture (see above) as the default. Ties go to the
      candidate listed first; a vote for an excluded action is dropped.
    * **Action inventory.** A new action (or one put back) re-enters every remaining-action set,
      so finished paths explore it against their best action; removing an action takes it out
      everywhere, and a cell left with none starts over with the whole inventory. An action
      passed to :meth:`decide` that the forest has never learned about counts as exploring.
    * **Variables that appear later** (new categories, new features) join the candidate sets of
      paths created after they appear; existing stumps keep the variables they started with
      (their statistics for a newcomer would be incomplete).

    Examples
    --------
    Learn on a stream where the best ad depends on the page's section:

    >>> import random
    >>> rng = random.Random(0)
    >>> forest = BanditForest(n_trees=10, max_depth=2, epsilon=0.5, warmup=50, seed=1)
    >>> best = {"sport": "ad-a", "news": "ad-b", "cars": "ad-c"}
    >>> for _ in range(10_000):
    ...     x = {"section": rng.choice(list(best)), "hour": rng.randrange(24)}
    ...     d = forest.decide(x, actions=["ad-a", "ad-b", "ad-c"])
    ...     reward = float(rng.random() < (0.7 if d.action == best[x["section"]] else 0.2))
    ...     forest.learn_one(x, d.action, reward, d.probability)
    >>> forest.predict_one({"section": "news", "hour": 9})
    'ad-b'
    >>> d = forest.decide({"section": "cars", "hour": 20})
    >>> d.action, d.probability
    ('ad-c', 1.0)

    State is plain arrays and JSON-able metadata; a restored forest decides the same:

    >>> clone = BanditForest.from_state(forest.to_state())
    >>> x = {"section": "sport", "hour": 3}
    >>> clone.decide(x) == forest.decide(x)
    True

    References
    ----------
    Féraud, R., Allesiardo, R., Urvoy, T., Clérot, F. Random Forest for the Contextual Bandit
    Problem. AISTATS 2016, JMLR W&CP 51.
    """

    def __init__(
        self,
        n_trees: int = 100,
        delta: float = 0.05,
        epsilon: float | Sequence[float] = (0.4, 0.8),
        max_depth: int | Sequence[int] = (2, 6),
        split_fraction: float = 0.8,
        n_bins: int = 5,
        warmup: int = 200,
        voting: str = "mixture",
        ips: str = "self-normalized",
        seed: int | None = None,
    ):
        super().__init__(burn_in=0)
        if n_trees < 1:
            raise ValueError(f"n_trees must be at least 1, got {n_trees}")
        if not 0.0 < delta <= 1.0:
            raise ValueError(f"delta must be in (0, 1], got {delta}")
        if not 0.0 < split_fraction <= 1.0:
            raise ValueError(f"split_fraction must be in (0, 1], got {split_fraction}")
        eps_low, eps_high = _range(epsilon, "epsilon")
        if not 0.0 <= eps_low <= eps_high <= 1.0:
            raise ValueError(f"epsilon must be within [0, 1], got {epsilon}")
        depth_low, depth_high = _range(max_depth, "max_depth")
        if not (1 <= depth_low <= depth_high and float(depth_low).is_integer()
                and float(depth_high).is_integer()):
            raise ValueError(f"max_depth must be whole numbers >= 1, got {max_depth}")
        self.n_trees = n_trees
        self.delta = delta
        self.epsilon = epsilon
        self.max_depth = max_depth
        self.split_fraction = split_fraction
        self.n_bins = n_bins
        if voting not in ("mixture", "all-finished"):
            raise ValueError(f"voting must be 'mixture' or 'all-finished', got {voting!r}")
        if ips not in ("self-normalized", "plain"):
            raise ValueError(f"ips must be 'self-normalized' or 'plain', got {ips!r}")
        self.warmup = warmup
        self.voting = voting
        self.ips = ips
        self.seed = seed

        self._encoder = ContextEncoder(n_bins=n_bins, warmup=warmup)
        self._actions: list = []  # action index -> action id
        self._index: dict = {}  # action id -> action index
        self._store = ForestStorage()
        self._roots = np.zeros(0, np.int32)
        self._tree_eps = np.zeros(0)
        self._tree_depth = np.zeros(0, np.int32)
        self._buffer: list[tuple[dict, Hashable, float, float]] = []
        self._n_learned = 0
        self._ready = np.zeros(n_trees, np.int32)
        self._last_decision: Decision | None = None
        self._encoded: tuple[dict, np.ndarray] | None = None  # last decide's context, encoded
        self._radii_table: np.ndarray | None = None
        self._inventory: tuple[list, np.ndarray] | None = None  # cached active actions
        self._arrays_version = -1  # storage version the cached kernel arguments belong to
        self._radii_for = 0
        seeds = np.random.SeedSequence(seed).spawn(2)
        self._rng_learn = np.random.Generator(np.random.PCG64(seeds[0]))
        self._rng_decide = np.random.Generator(np.random.PCG64(seeds[1]))

    # -- actions -------------------------------------------------------------------------------

    @property
    def actions(self) -> list:
        """The actions of the inventory (added, not removed), in the order they were added."""
        active = self._store.active
        return [a for k, a in enumerate(self._actions) if active[k]]

    def add_action(self, action: Hashable) -> None:
        """Put ``action`` in the inventory; it is explored in every path (see the class doc)."""
        k = self._index.get(action)
        store = self._store
        if k is None:
            k = len(self._actions)
            self._actions.append(action)
            self._index[action] = k
            store.reserve_capacity(store.var_cap, k + 1)
        elif store.active[k]:
            return
        store.active[k] = True
        store.reopen_action(k)
        self._inventory = None

    def remove_action(self, action: Hashable) -> None:
        """Take ``action`` out of the inventory (its statistics are kept if it comes back)."""
        k = self._index.get(action)
        if k is None or not self._store.active[k]:
            raise KeyError(f"action {action!r} is not in the inventory")
        self._store.active[k] = False
        self._store.refill_emptied()
        self._inventory = None

    def reseed(self, seed: int | None) -> None:
        """Restart the generator of :meth:`decide` from ``seed`` (learning is not affected).

        A service running several copies of one forest (API replicas) gives each its own
        stream of exploration draws this way.
        """
        self._rng_decide = np.random.Generator(np.random.PCG64(seed))

    # -- acting --------------------------------------------------------------------------------

    def decide(self, x: dict, actions: Iterable | None = None, excluded: Iterable = ()) -> Decision:
        """Choose an action for context ``x`` among ``actions`` (default: the inventory).

        Does not change what the forest has learned (only its random generator moves on).
        """
        xb, complete = self._encoder.encode_known(x)
        candidates, known = self._candidates(actions, excluded)
        n = len(candidates)
        # the kernel's outputs: new arrays per call (API replicas decide from several threads)
        probs, drawn, order = np.empty(n), np.empty(n, np.int64), np.empty(n, np.int64)
        paths = np.empty(len(self._roots), np.int64)
        share, winner, n_pool = decide_probabilities(
            xb, *self._decide_arrays(), known, self.voting == "all-finished", probs, drawn, order,
            paths)
        # learn_one(x) right after (the usual pair) reuses this encoding if x is unchanged, and
        # the trees' paths for x if nothing was learned in between (the trees are the same)
        self._encoded = (dict(x), xb, paths, self._n_learned) if complete else None
        rng = self._rng_decide
        explored = share == 1.0 or (share > 0.0 and rng.random() < share)
        if explored:  # uniform among the pool (positions in candidate order)
            j = int(drawn[int(rng.random() * n_pool)])
        else:
            j = winner
        decision = Decision(candidates[j], float(probs[j]), None, explored,
                            _ranking=(candidates, probs, order))
        self._last_decision = decision
        return decision

    def predict_one(self, x: dict, actions: Iterable | None = None, excluded: Iterable = ()):
        """The action the forest would exploit: each tree's path votes for its best estimate."""
        xb = self._encoder.encode(x)
        candidates, known = self._candidates(actions, excluded)
        store = self._store
        if not len(self._roots):
            return self._warmup_best(candidates)
        allowed = np.zeros(store.act_cap, bool)
        allowed[known[known >= 0]] = True
        per_tree = np.full(len(self._roots), -1, np.int64)
        greedy_actions(xb, self._roots, store.node_kind, store.node_var, store.node_child,
                       store.node_ref, store.slot_T, store.slot_W, store.slot_Rt, store.slot_T1,
                       store.slot_W1, store.slot_R1, store.slot_A, store.slot_best, store.slot_vars,
                       store.leaf_T,
                       store.leaf_W, store.leaf_R, store.leaf_A, store.active, allowed, per_tree)
        votes = np.bincount(per_tree[per_tree >= 0], minlength=store.act_cap)
        counts = np.where(known >= 0, votes[known], 0)
        return candidates[int(np.argmax(counts))]

    def _candidates(self, actions, excluded) -> tuple[list, np.ndarray]:
        """Candidate actions, and their indices (-1: not in the inventory, i.e. never learned)."""
        if actions is None and not excluded:
            candidates, known = self._active_inventory()
        else:
            excluded = set(excluded)
            pool = self.actions if actions is None else dict.fromkeys(actions)
            candidates = [a for a in pool if a not in excluded]
            active, index = self._store.active, self._index
            known = np.array([k if k is not None and active[k] else -1
                              for k in map(index.get, candidates)], np.int64)
        if not candidates:
            raise ValueError("no action to choose from: the list is empty or all are excluded")
        return candidates, known

    def _active_inventory(self) -> tuple[list, np.ndarray]:
        if self._inventory is None:
            active = self._store.active
            ks = [k for k in range(len(self._actions)) if active[k]]
            self._inventory = ([self._actions[k] for k in ks], np.array(ks, np.int64))
        return self._inventory

    def _warmup_best(self, candidates: list):
        totals: dict = {}
        for _, action, reward, _ in self._buffer:
            s, n = totals.get(action, (0.0, 0))
            totals[action] = (s + reward, n + 1)
        return max(candidates, key=lambda a: totals[a][0] / totals[a][1] if a in totals else -1)

    # -- learning ------------------------------------------------------------------------------

    def learn_one(self, x: dict, action: Hashable, reward: float, probability: float = 1.0) -> None:
        """Learn that playing ``action`` in context ``x`` gave ``reward``.

        ``probability`` is the propensity with which ``action`` was played (logged by
        :meth:`decide`); the reward is weighted by its inverse. Rewards are expected in [0, 1],
        the range the elimination bounds assume.
        """
        reward, probability = self._feedback(reward, probability)
        encoded = self._encoded
        paths = None
        if (encoded is not None and len(encoded[1]) == self._encoder.n_variables
                and x == encoded[0]):
            # decided on this very context, whose features were all known: learning it would
            # not change the coding, and its encoding is the same; with no event learned since,
            # the trees and so the nodes of x's paths are the same too
            xb = encoded[1]
            if encoded[3] == self._n_learned:
                paths = encoded[2]
        else:
            xb = self._encoder.learn_encode(x)
        if action not in self._index:
            self.add_action(action)
        self._n_learned += 1
        if not len(self._roots):
            self._buffer.append((dict(x), action, reward, probability))
            if len(self._buffer) >= self.warmup:
                self._grow_trees()
            return
        self._learn(xb, self._index[action], *self._weighted(reward, probability), paths)

    def learn_many(self, events: Iterable[tuple[dict, Hashable, float, float]]) -> int:
        """:meth:`learn_one` for each ``(x, action, reward, probability)``, in order.

        The forest ends exactly as after the same calls to :meth:`learn_one` (also when an event
        is rejected: the events before it are learned, then the error is raised), with less
        work per event: the events are encoded first and given to the trees in one compiled
        call that only returns to Python when a stump has selected its variable. Meant for a
        trainer that reads rewards in batches. Returns the number of events learned.
        """
        pending: list = []  # (encoding, number of variables, action index, reward, weight)
        learned = 0
        try:
            for x, action, reward, probability in events:
                reward, probability = self._feedback(reward, probability)
                if not len(self._roots) or action not in self._index:
                    # warm-up or a new action: the one-event path (the pending events first)
                    self._learn_pending(pending)
                    self.learn_one(x, action, reward, probability)
                else:
                    xb = self._encoder.learn_encode(x)
                    self._n_learned += 1
                    pending.append((xb, len(xb), self._index[action],
                                    *self._weighted(reward, probability)))
                    if len(pending) >= 1024:
                        self._learn_pending(pending)
                learned += 1
        finally:
            self._learn_pending(pending)
        return learned

    def _weighted(self, reward: float, probability: float) -> tuple[float, float]:
        """(y, w) for the kernels, which add w * y to the reward sums and w to the weight sums
        that divide them: IPS either self-normalised (y, 1/p) or plain (y/p, 1), see "IPS"."""
        if self.ips == "plain":
            return reward / probability, 1.0
        return reward, 1.0 / probability

    def _feedback(self, reward, probability) -> tuple[float, float]:
        """Checked reward and probability of a learning event."""
        reward = float(reward)
        probability = float(probability)
        if not math.isfinite(reward):
            raise ValueError(f"reward must be a finite number, got {reward}")
        if not 0.0 < probability <= 1.0:
            raise ValueError(f"probability must be in (0, 1], got {probability}")
        if not self._store.has_statistics:
            raise RuntimeError("this forest was restored without its statistics: it can decide "
                               "but not learn")
        return reward, probability

    def _learn(self, xb: np.ndarray, k: int, reward: float, weight: float,
               paths: np.ndarray | None = None) -> None:
        """One event into the trees; ``paths``: the nodes of x's paths if known (see decide)."""
        n_active = len(self._active_inventory()[0])
        if n_active == 0:
            return
        M = self._encoder.n_variables
        if paths is None:
            paths = _NO_PATHS
        n_ready = learn_event(xb, k, reward, weight, *self._learn_arrays(), n_active, M,
                              self.delta, self._radii(n_active), self._ready, paths, len(paths))
        if n_ready:
            for node in self._ready[:n_ready].tolist():
                self._resolve(node, M)

    def _learn_pending(self, pending: list) -> None:
        """Give the encoded events of :meth:`learn_many` to the trees (and empty the list).

        Each event keeps the number of variables the encoder had when it was learned: a path
        created after it draws its candidates among those, as with :meth:`learn_one`.
        """
        if not pending:
            return
        n_active = len(self._active_inventory()[0])
        n = len(pending)
        if n_active == 0:
            pending.clear()
            return
        xbs, n_vars, ks, rewards, weights = zip(*pending)
        pending.clear()
        X = np.zeros((n, max(n_vars)), np.int8)  # zeros past an event's variables: not set
        for j, xb in enumerate(xbs):
            X[j, : len(xb)] = xb
        n_vars = np.array(n_vars, np.int64)
        ks = np.array(ks, np.int64)
        rewards = np.array(rewards)
        weights = np.array(weights)
        radii = self._radii(n_active)
        start = 0
        while start < n:
            start, n_ready = learn_events(X, n_vars, ks, rewards, weights, start,
                                          *self._learn_arrays(), n_active, self.delta, radii,
                                          self._ready)
            for node in self._ready[:n_ready].tolist():
                self._resolve(node, int(n_vars[start - 1]))

    def _refresh_arrays(self) -> None:
        """Kernel arguments, cached until the storage reallocates (numba call overhead)."""
        store = self._store
        self._learn_args = (
            self._roots, store.node_kind, store.node_var, store.node_child, store.node_ref,
            self._tree_eps, self._tree_depth, store.slot_vars, store.slot_nvars, store.slot_in,
            store.slot_T, store.slot_W, store.slot_Rt, store.slot_T1, store.slot_W1,
            store.slot_R1, store.slot_A,
            store.slot_union, store.slot_n, store.slot_best, store.leaf_T, store.leaf_W,
            store.leaf_R, store.leaf_A, store.active)
        self._decide_args = (
            self._roots, store.node_kind, store.node_var, store.node_child, store.node_ref,
            store.slot_union, store.leaf_A, store.active)
        self._arrays_version = store.version

    def _learn_arrays(self) -> tuple:
        if self._arrays_version != self._store.version:
            self._refresh_arrays()
        return self._learn_args

    def _decide_arrays(self) -> tuple:
        if self._arrays_version != self._store.version:
            self._refresh_arrays()
        return self._decide_args

    def _radii(self, n_active: int) -> np.ndarray:
        """Table of action_radius(t) for t < 65536 at the current number of actions."""
        if self._radii_table is None or self._radii_for != n_active:
            self._radii_table = radius_table(1 << 16, n_active, self.delta, self.n_trees)
            self._radii_for = n_active
        return self._radii_table

    def _grow_trees(self) -> None:
        """End of the warm-up: learn the bins, create the L root stumps, replay the events."""
        self._encoder.freeze()
        L = self.n_trees
        eps_low, eps_high = _range(self.epsilon, "epsilon")
        depth_low, depth_high = _range(self.max_depth, "max_depth")
        self._tree_eps = self._rng_learn.uniform(eps_low, eps_high, L)
        self._tree_depth = self._rng_learn.integers(depth_low, depth_high + 1, L).astype(np.int32)
        M = self._encoder.n_variables
        self._roots = np.array([self._new_path(theta, 1, -1, [], M) for theta in range(L)],
                               np.int32)
        self._store.version += 1  # the kernels' arguments changed
        buffer, self._buffer = self._buffer, []
        for x, action, reward, probability in buffer:
            self._learn(self._encoder.encode(x), self._index[action],
                        *self._weighted(reward, probability))

    def _new_path(self, theta: int, depth: int, parent: int, used: list[int], M: int) -> int:
        """NewPath (Algorithm 6): a stump over a random subset S_c of the unused variables
        (of the first ``M``: the variables the encoder had at the event that made the path)."""
        store = self._store
        node = store.new_node(theta, depth, parent)
        available = np.setdiff1d(np.arange(M, dtype=np.int32), used)
        if len(available) == 0:
            return self._make_leaf(node, -1, None)
        size = max(1, int(round(self.split_fraction * len(available))))
        chosen = np.sort(self._rng_learn.choice(available, size, replace=False)).astype(np.int32)
        store.reserve_capacity(M, len(self._actions))
        store.node_kind[node] = SLOT
        store.node_ref[node] = store.new_slot(chosen)
        return node

    def _resolve(self, node: int, M: int) -> None:
        """Algorithm 6, lines 16-20: the stump of ``node`` has selected its variable."""
        store = self._store
        s = int(store.node_ref[node])
        var = int(store.slot_vars[s, 0])
        theta = int(store.node_tree[node])
        depth = int(store.node_depth[node])
        if depth < self._tree_depth[theta]:
            used = [var]
            n = node
            while store.node_parent[n] >= 0:
                n = int(store.node_parent[n])
                used.append(int(store.node_var[n]))
            store.node_kind[node] = SPLIT
            store.node_var[node] = var
            store.free_slot(s)
            children = [self._new_path(theta, depth + 1, node, used, M) for _ in range(2)]
            store.node_child[node] = children
        else:
            self._make_leaf(node, var, s)
            store.free_slot(s)

    def _make_leaf(self, node: int, var: int, slot: int | None) -> int:
        """A stump at depth D_theta keeps the statistics of its selected variable only."""
        store = self._store
        leaf = store.new_leaf()
        if slot is None:
            store.leaf_T[leaf] = 0
            store.leaf_W[leaf] = 0.0
            store.leaf_R[leaf] = 0.0
            store.leaf_A[leaf] = store.active
        else:
            t1, w1 = store.slot_T1[slot, :, var], store.slot_W1[slot, :, var]
            r1 = store.slot_R1[slot, :, var]
            store.leaf_T[leaf] = [store.slot_T[slot] - t1, t1]
            store.leaf_W[leaf] = [store.slot_W[slot] - w1, w1]
            store.leaf_R[leaf] = [store.slot_Rt[slot] - r1, r1]
            store.leaf_A[leaf] = store.slot_A[slot, :, :, var].T
        store.node_kind[node] = LEAF
        store.node_var[node] = var
        store.node_ref[node] = leaf
        return node

    # -- river's ContextualPolicy ----------------------------------------------------------------

    def _pull(self, arm_ids, context):
        return self.decide(context or {}, actions=arm_ids).action

    def update(self, arm_id, context, *reward_args, **reward_kwargs):
        """river's update: learns with the propensity of the last decision (1 if unknown)."""
        super().update(arm_id, context, *reward_args, **reward_kwargs)
        last = self._last_decision
        probability = (last.probabilities.get(arm_id) if last is not None else None) or 1.0
        self.learn_one(context or {}, arm_id, reward_args[0], probability)

    @classmethod
    def _unit_test_params(cls):
        yield {"n_trees": 5, "max_depth": 3, "warmup": 20, "seed": 42}

    # -- introspection -------------------------------------------------------------------------

    @property
    def n_learned(self) -> int:
        """Number of events learned (including the warm-up ones)."""
        return self._n_learned

    @property
    def n_nodes(self) -> int:
        return self._store.n_nodes

    def memory_usage(self) -> int:
        """Bytes held by the forest's arrays (capacity included)."""
        return self._store.nbytes()

    def tree(self, theta: int) -> dict:
        """Readable structure of tree ``theta``: splits on variables, exploring stumps, leaves."""
        if not len(self._roots):
            return {"exploring": True, "warmup": True}
        return self._describe(int(self._roots[theta]))

    def _describe(self, node: int) -> dict:
        store, names = self._store, self._encoder.variable_names
        kind = store.node_kind[node]
        if kind == SPLIT:
            return {"variable": names[store.node_var[node]],
                    "children": [self._describe(int(c)) for c in store.node_child[node]]}
        if kind == SLOT:
            s = store.node_ref[node]
            best = store.slot_best[s]
            return {"exploring": True,
                    "candidates": [names[i] for i in store.slot_vars[s, : store.slot_nvars[s]]],
                    "best_variable": names[best] if best >= 0 else None}
        leaf = store.node_ref[node]
        var = store.node_var[node]
        remaining = [[a for k, a in enumerate(self._actions)
                      if store.leaf_A[leaf, v, k] and store.active[k]] for v in range(2)]
        return {"variable": names[var] if var >= 0 else None, "actions": remaining}

    def tree_votes(self, x: dict) -> list:
        """The action each tree's path would exploit for ``x`` (None where it has none yet)."""
        xb = self._encoder.encode(x)
        if not len(self._roots):
            return [None] * self.n_trees
        store = self._store
        allowed = store.active.copy()
        out = np.full(self.n_trees, -1, np.int64)
        greedy_actions(xb, self._roots, store.node_kind, store.node_var, store.node_child,
                       store.node_ref, store.slot_T, store.slot_W, store.slot_Rt, store.slot_T1,
                       store.slot_W1, store.slot_R1, store.slot_A, store.slot_best, store.slot_vars,
                       store.leaf_T,
                       store.leaf_W, store.leaf_R, store.leaf_A, store.active, allowed, out)
        return [self._actions[k] if k >= 0 else None for k in out.tolist()]

    def finished_votes(self, x: dict) -> list:
        """The vote of each tree's path for ``x`` if its learning is finished, else None.

        These are the votes :meth:`decide` counts; a path still exploring makes it draw instead.
        """
        if not len(self._roots):
            return [None] * self.n_trees
        store = self._store
        out = np.full(self.n_trees, -1, np.int64)
        finished_actions(self._encoder.encode(x), self._roots, store.node_kind, store.node_var,
                         store.node_child, store.node_ref, store.leaf_A, store.active, out)
        return [self._actions[k] if k >= 0 else None for k in out.tolist()]

    def tree_structure(self, theta: int) -> tuple[list[int], list[list[int]]]:
        """Tree ``theta``'s tests: ``(variables, children)`` over its internal nodes, in preorder.

        An internal node is a split, or a stump at maximal depth that tests its selected variable
        (its two values choose among different actions); exploring stumps are leaves.
        ``variables[j]`` indexes :attr:`variable_names`; ``children[j]`` lists node j's
        internal children, left (value 0) before right (value 1).
        """
        store = self._store
        variables: list[int] = []
        children: list[list[int]] = []

        def visit(node: int) -> int | None:
            kind = store.node_kind[node]
            if kind == SLOT or (kind == LEAF and store.node_var[node] < 0):
                return None
            j = len(variables)
            variables.append(int(store.node_var[node]))
            children.append([])
            if kind == SPLIT:
                for child in store.node_child[node].tolist():
                    c = visit(child)
                    if c is not None:
                        children[j].append(c)
            return j

        if len(self._roots):
            visit(int(self._roots[theta]))
        return variables, children

    @property
    def variable_names(self) -> list[str]:
        """Readable names of the binary variables (``site=a``, ``age<40``, ...)."""
        return self._encoder.variable_names

    def select_trees(self, trees: Sequence[int]) -> BanditForest:
        """A forest made of the given trees only (e.g. after ensemble pruning), same statistics."""
        return type(self).from_state(select_trees_state(self.to_state(), list(trees)))

    # -- state -----------------------------------------------------------------------------------

    def to_state(self, statistics: bool = True) -> dict:
        """Everything needed to restore the forest: numpy arrays and JSON-able metadata.

        With ``statistics=False`` the counts and sums of the exploring stumps are left out: the
        restored forest decides exactly as this one, but cannot learn (a small serving copy).
        """
        params = {name: getattr(self, name) for name in (
            "n_trees", "delta", "epsilon", "max_depth", "split_fraction", "n_bins", "warmup",
            "voting", "ips", "seed")}
        for name in ("epsilon", "max_depth"):
            if isinstance(params[name], (tuple, list)):
                params[name] = list(params[name])
        K = len(self._actions)
        return {
            "format": FORMAT,
            "version": VERSION,
            "params": params,
            "encoder": self._encoder.to_state(),
            "actions": list(self._actions),
            "active": self._store.active[:K].copy(),
            "n_learned": self._n_learned,
            "rng": {"learn": _rng_state(self._rng_learn), "decide": _rng_state(self._rng_decide)},
            "trees": {"roots": self._roots.copy(), "epsilon": self._tree_eps.copy(),
                      "depth": self._tree_depth.copy()},
            "storage": self._store.to_state(self._encoder.n_variables, K, statistics),
            "buffer": [{"x": x, "action": a, "reward": r, "probability": p}
                       for x, a, r, p in self._buffer],
        }

    @classmethod
    def from_state(cls, state: dict) -> BanditForest:
        if state.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT} state (format={state.get('format')!r})")
        if state.get("version") != VERSION:
            raise ValueError(f"unsupported {FORMAT} state version {state.get('version')!r}")
        params = dict(state["params"])
        for name in ("epsilon", "max_depth"):
            if isinstance(params[name], list):
                params[name] = tuple(params[name])
        forest = cls(**params)
        forest._encoder = ContextEncoder.from_state(state["encoder"])
        forest._actions = list(state["actions"])
        forest._index = {a: k for k, a in enumerate(forest._actions)}
        forest._store = ForestStorage.from_state(
            state["storage"], np.asarray(state["active"], bool)
        )
        forest._n_learned = int(state["n_learned"])
        forest._rng_learn = _rng_from(state["rng"]["learn"])
        forest._rng_decide = _rng_from(state["rng"]["decide"])
        trees = state["trees"]
        forest._roots = np.asarray(trees["roots"], np.int32)
        forest._tree_eps = np.asarray(trees["epsilon"], float)
        forest._tree_depth = np.asarray(trees["depth"], np.int32)
        forest._buffer = [(dict(e["x"]), e["action"], float(e["reward"]), float(e["probability"]))
                          for e in state["buffer"]]
        return forest


def _range(value, name) -> tuple[float, float]:
    if isinstance(value, (tuple, list)):
        if len(value) != 2 or value[0] > value[1]:
            raise ValueError(f"{name} must be a number or a (low, high) pair, got {value!r}")
        return value[0], value[1]
    return value, value


def _rng_state(rng: np.random.Generator) -> dict:
    """PCG64 state with its 128-bit integers as strings (JSON and msgpack safe)."""
    s = rng.bit_generator.state
    return {"state": str(s["state"]["state"]), "inc": str(s["state"]["inc"]),
            "has_uint32": int(s["has_uint32"]), "uinteger": int(s["uinteger"])}


def _rng_from(state: dict) -> np.random.Generator:
    bitgen = np.random.PCG64()
    bitgen.state = {"bit_generator": "PCG64",
                    "state": {"state": int(state["state"]), "inc": int(state["inc"])},
                    "has_uint32": int(state["has_uint32"]), "uinteger": int(state["uinteger"])}
    return np.random.Generator(bitgen)
