"""The trees' paths of a Bandit Forest: growth (NewPath, Algorithm 6 lines 16-20) and reading.

:class:`ForestPaths` is the part of :class:`~online.bandit.forest.BanditForest` that changes
the trees' structure (rare: when a stump has selected its variable, in Python) and reads it
back (readable trees, each tree's vote). It works on the forest's ``_store``
(:class:`~online.bandit.storage.ForestStorage`), ``_roots``, ``_tree_eps``, ``_tree_depth``,
``_rng_learn``, ``_encoder`` and ``_actions``.
"""

from __future__ import annotations

import numpy as np

from online.bandit.decide_kernels import finished_actions, greedy_actions
from online.bandit.layout import LEAF, SLOT, SPLIT


class ForestPaths:
    """Growth and reading of the trees of a :class:`~online.bandit.forest.BanditForest`."""

    # -- growth --------------------------------------------------------------------------------

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
        store.nodes.kind[node] = SLOT
        store.nodes.ref[node] = store.new_slot(chosen)
        return node

    def _resolve(self, node: int, M: int) -> None:
        """Algorithm 6, lines 16-20: the stump of ``node`` has selected its variable."""
        store = self._store
        nodes = store.nodes
        s = int(nodes.ref[node])
        var = int(store.slots.S[s, 0])
        theta = int(nodes.tree[node])
        depth = int(nodes.depth[node])
        if depth < self._tree_depth[theta]:
            used = [var]
            n = node
            while nodes.parent[n] >= 0:
                n = int(nodes.parent[n])
                used.append(int(nodes.var[n]))
            nodes.kind[node] = SPLIT
            nodes.var[node] = var
            store.free_slot(s)
            children = [self._new_path(theta, depth + 1, node, used, M) for _ in range(2)]
            store.nodes.child[node] = children  # (store.nodes: new_path may reallocate)
        else:
            self._make_leaf(node, var, s)
            store.free_slot(s)

    def _make_leaf(self, node: int, var: int, slot: int | None) -> int:
        """A stump at depth D_theta keeps the statistics of its selected variable only."""
        store = self._store
        leaf = store.new_leaf()
        leaves, slots = store.leaves, store.slots
        if slot is None:
            leaves.T[leaf] = 0
            leaves.W[leaf] = 0.0
            leaves.R[leaf] = 0.0
            leaves.A[leaf] = store.active
        else:
            t1, w1, r1 = slots.T1[slot, :, var], slots.W1[slot, :, var], slots.R1[slot, :, var]
            leaves.T[leaf] = [slots.T[slot] - t1, t1]
            leaves.W[leaf] = [slots.W[slot] - w1, w1]
            leaves.R[leaf] = [slots.R[slot] - r1, r1]
            leaves.A[leaf] = slots.A[slot, :, :, var].T
        nodes = store.nodes
        nodes.kind[node] = LEAF
        nodes.var[node] = var
        nodes.ref[node] = leaf
        return node

    # -- reading -------------------------------------------------------------------------------

    @property
    def n_nodes(self) -> int:
        return self._store.n_nodes

    def memory_usage(self) -> int:
        """Bytes held by the forest's arrays (capacity included)."""
        return self._store.nbytes()

    @property
    def variable_names(self) -> list[str]:
        """Readable names of the binary variables (``site=a``, ``age<40``, ...)."""
        return self._encoder.variable_names

    def tree(self, theta: int) -> dict:
        """Readable structure of tree ``theta``: splits on variables, exploring stumps, leaves."""
        if not len(self._roots):
            return {"exploring": True, "warmup": True}
        return self._describe(int(self._roots[theta]))

    def _describe(self, node: int) -> dict:
        store, names = self._store, self._encoder.variable_names
        nodes = store.nodes
        kind = nodes.kind[node]
        if kind == SPLIT:
            return {"variable": names[nodes.var[node]],
                    "children": [self._describe(int(c)) for c in nodes.child[node]]}
        if kind == SLOT:
            s = nodes.ref[node]
            best = store.slots.best_var[s]
            return {"exploring": True,
                    "candidates": [names[i] for i in store.slots.S[s, : store.slots.n_S[s]]],
                    "best_variable": names[best] if best >= 0 else None}
        leaf = nodes.ref[node]
        var = nodes.var[node]
        remaining = [[a for k, a in enumerate(self._actions)
                      if store.leaves.A[leaf, v, k] and store.active[k]] for v in range(2)]
        return {"variable": names[var] if var >= 0 else None, "actions": remaining}

    def tree_votes(self, x: dict) -> list:
        """The action each tree's path would exploit for ``x`` (None where it has none yet)."""
        xb = self._encoder.encode(x)
        if not len(self._roots):
            return [None] * self.n_trees
        allowed = self._store.active.copy()
        out = np.full(self.n_trees, -1, np.int64)
        greedy_actions(xb, self._kernel_forest(), allowed, out)
        return [self._actions[k] if k >= 0 else None for k in out.tolist()]

    def finished_votes(self, x: dict) -> list:
        """The vote of each tree's path for ``x`` if its learning is finished, else None.

        These are the votes :meth:`decide` counts; a path still exploring makes it draw instead.
        """
        if not len(self._roots):
            return [None] * self.n_trees
        out = np.full(self.n_trees, -1, np.int64)
        finished_actions(self._encoder.encode(x), self._kernel_forest(), out)
        return [self._actions[k] if k >= 0 else None for k in out.tolist()]

    def tree_structure(self, theta: int) -> tuple[list[int], list[list[int]]]:
        """Tree ``theta``'s tests: ``(variables, children)`` over its internal nodes, in preorder.

        An internal node is a split, or a stump at maximal depth that tests its selected variable
        (its two values choose among different actions); exploring stumps are leaves.
        ``variables[j]`` indexes :attr:`variable_names`; ``children[j]`` lists node j's
        internal children, left (value 0) before right (value 1).
        """
        nodes = self._store.nodes
        variables: list[int] = []
        children: list[list[int]] = []

        def visit(node: int) -> int | None:
            kind = nodes.kind[node]
            if kind == SLOT or (kind == LEAF and nodes.var[node] < 0):
                return None
            j = len(variables)
            variables.append(int(nodes.var[node]))
            children.append([])
            if kind == SPLIT:
                for child in nodes.child[node].tolist():
                    c = visit(child)
                    if c is not None:
                        children[j].append(c)
            return j

        if len(self._roots):
            visit(int(self._roots[theta]))
        return variables, children


def _range(value, name) -> tuple[float, float]:
    """``(low, high)`` of a number or a pair (epsilon, max_depth)."""
    if isinstance(value, (tuple, list)):
        if len(value) != 2 or value[0] > value[1]:
            raise ValueError(f"{name} must be a number or a (low, high) pair, got {value!r}")
        return value[0], value[1]
    return value, value
