"""BANDIT FOREST: an online random forest of decision stumps for the contextual bandit problem.

Féraud, Allesiardo, Urvoy, Clérot. *Random Forest for the Contextual Bandit Problem.* AISTATS 2016.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence

import numpy as np
from river import bandit
from river import base as river_base

from online.bandit.decisions import ForestDecisions
from online.bandit.encoder import ContextEncoder
from online.bandit.kernels import Events, learn_event, learn_events, radius_table
from online.bandit.layout import Bound, forest_arrays, plain
from online.bandit.paths import ForestPaths, _range
from online.bandit.state import ForestState
from online.bandit.storage import ForestStorage
from online.decision import Decision

__all__ = ["BanditForest", "Decision"]  # Decision lives in online.decision
_NO_PATHS = np.empty(0, np.int64)  # learn_event finds every tree's path itself


class BanditForest(ForestDecisions, ForestPaths, ForestState, bandit.base.ContextualPolicy):
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
      depth-2 problem (tests/online/bandit/test_bandit_forest.py) it converged worse (last 5k of 40k
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
        self._forest_arrays: tuple = ()
        self._radii_for = 0
        seeds = np.random.SeedSequence(seed).spawn(2)
        self._rng_learn = np.random.Generator(np.random.PCG64(seeds[0]))
        self._rng_decide = np.random.Generator(np.random.PCG64(seeds[1]))

    # -- actions -------------------------------------------------------------------------------

    def __repr__(self) -> str:
        # river's bandit policies print a table of each arm's reward statistics, which the
        # forest does not keep (it raised); the class and its parameters instead
        return river_base.Base.__repr__(self)

    @property
    def actions(self) -> list:
        """The actions of the inventory (added, not removed), in the order they were added."""
        active = self._store.active
        return [a for k, a in enumerate(self._actions) if active[k]]

    def add_action(self, action: Hashable) -> None:
        """Put ``action`` in the inventory; it is explored in every path (see the class doc)."""
        if action is None:
            raise ValueError("an action id must be hashable and not None")
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

    # -- learning ------------------------------------------------------------------------------

    def learn_one(self, x: dict, action: Hashable, reward: float, probability: float = 1.0) -> None:
        """Learn that playing ``action`` in context ``x`` gave ``reward``.

        ``probability`` is the propensity with which ``action`` was played (logged by
        :meth:`decide`); the reward is weighted by its inverse. Rewards are expected in [0, 1],
        the range the elimination bounds assume.
        """
        reward, probability = self._feedback(reward, probability)
        if action is None:
            raise ValueError("an action id must be hashable and not None")
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
        try:
            reward = float(reward)
            probability = float(probability)
        except (TypeError, ValueError, OverflowError):
            raise ValueError(f"reward and probability must be numbers, got {reward!r} and "
                             f"{probability!r}") from None
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
        n_ready = learn_event(xb, k, reward, weight, self._kernel_forest(),
                              self._bound(n_active, M), paths, len(paths), self._ready)
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
        events = Events(X, np.array(n_vars, np.int64), np.array(ks, np.int64), np.array(rewards),
                        np.array(weights))
        bound = self._bound(n_active, 0)  # M: each event's own (events.n_vars)
        start = 0
        while start < n:
            start, n_ready = learn_events(tuple(events), start, self._kernel_forest(), bound,
                                          self._ready)
            for node in self._ready[:n_ready].tolist():
                self._resolve(node, int(events.n_vars[start - 1]))

    def _kernel_forest(self) -> tuple:
        """The kernels' Forest as plain tuples, cached until ``store.version`` changes."""
        store = self._store
        if self._arrays_version != store.version:
            self._forest_arrays = plain(forest_arrays(self._roots, self._tree_eps,
                                                      self._tree_depth, store))
            self._arrays_version = store.version
        return self._forest_arrays

    def _bound(self, n_active: int, M: int) -> tuple:
        """The kernels' :class:`~online.bandit.layout.Bound`, as a plain tuple (see plain)."""
        return tuple(Bound(n_active, M, self.delta, self._radii(n_active)))

    def _radii(self, n_active: int) -> np.ndarray:
        """Table of action_radius(t) for t < 65536 at the current number of actions."""
        if self._radii_table is None or self._radii_for != n_active:
            self._radii_table = radius_table(1 << 16, n_active, self.delta, self.n_trees)
            self._radii_for = n_active
        return self._radii_table

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
