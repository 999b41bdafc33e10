"""Acting with a Bandit Forest: sec. 5's practical version of Algorithm 6 (draw or vote).

:class:`ForestDecisions` is the part of :class:`~online.bandit.forest.BanditForest` that
chooses actions; it changes nothing the forest has learned. The :class:`~online.decision.Decision`
it returns lives in :mod:`online.decision` (shared by every policy).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from online.bandit.decide_kernels import decide_probabilities, greedy_actions
from online.decision import Decision


class ForestDecisions:
    """``decide`` and ``predict_one`` of a BanditForest (its ``_store``, ``_encoder``,
    ``_actions``, ``_rng_decide`` and compiled arrays, ``_kernel_forest()``)."""

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
            xb, self._kernel_forest(), known, self.voting == "all-finished", probs, drawn, order,
            paths)
        # learn_one(x) right after (the usual pair) reuses this encoding if x is unchanged, and
        # the trees' paths for x if nothing was learned in between (the trees are the same); a
        # serving copy (restored without statistics) never learns: nothing to keep
        learns = self._store.has_statistics
        self._encoded = (dict(x), xb, paths, self._n_learned) if complete and learns else None
        rng = self._rng_decide
        explored = share == 1.0 or (share > 0.0 and rng.random() < share)
        if explored:  # uniform among the pool (positions in candidate order)
            j = int(drawn[int(rng.random() * n_pool)])
        else:
            j = winner
        decision = Decision(candidates[j], float(probs[j]), None, explored,
                            _ranking=(candidates, probs, order))
        if learns:
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
        greedy_actions(xb, self._kernel_forest(), allowed, per_tree)
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
        if actions is not None and None in pool:  # (an action learn_one would refuse)
            raise ValueError("an action id must be hashable and not None")
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
