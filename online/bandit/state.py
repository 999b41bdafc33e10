"""The stored form of a Bandit Forest: numpy arrays and JSON-able metadata, never a pickle.

:class:`ForestState` is the part of :class:`~online.bandit.forest.BanditForest` that exports
and restores it (format ``grove.bandit-forest``, version 1: stored states keep loading).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from online.bandit.encoder import ContextEncoder
from online.bandit.storage import ForestStorage
from online.bandit.subforest import select_trees_state
from online.decision import stored_action_id
from online.policies.base import rng_from_state, rng_state

FORMAT = "grove.bandit-forest"
VERSION = 1


class ForestState:
    """``to_state`` / ``from_state`` (and ``select_trees``) of a BanditForest."""

    def select_trees(self, trees: Sequence[int]):
        """A forest made of the given trees only (e.g. after ensemble pruning), same statistics."""
        return type(self).from_state(select_trees_state(self.to_state(), list(trees)))

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
            "rng": {"learn": rng_state(self._rng_learn), "decide": rng_state(self._rng_decide)},
            "trees": {"roots": self._roots.copy(), "epsilon": self._tree_eps.copy(),
                      "depth": self._tree_depth.copy()},
            "storage": self._store.to_state(self._encoder.n_variables, K, statistics),
            "buffer": [{"x": x, "action": a, "reward": r, "probability": p}
                       for x, a, r, p in self._buffer],
        }

    @classmethod
    def from_state(cls, state: dict):
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
        forest._actions = list(map(stored_action_id, state["actions"]))  # (tuples as lists)
        forest._index = {a: k for k, a in enumerate(forest._actions)}
        forest._store = ForestStorage.from_state(
            state["storage"], np.asarray(state["active"], bool)
        )
        forest._n_learned = int(state["n_learned"])
        forest._rng_learn = rng_from_state(state["rng"]["learn"])
        forest._rng_decide = rng_from_state(state["rng"]["decide"])
        trees = state["trees"]
        forest._roots = np.asarray(trees["roots"], np.int32)
        forest._tree_eps = np.asarray(trees["epsilon"], float)
        forest._tree_depth = np.asarray(trees["depth"], np.int32)
        forest._buffer = [(dict(e["x"]), e["action"], float(e["reward"]), float(e["probability"]))
                          for e in state["buffer"]]
        return forest
