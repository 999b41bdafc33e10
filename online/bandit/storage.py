"""The flat, growable arrays that hold every tree of a Bandit Forest.

Nodes of all trees share one pool; each exploring stump owns a *slot* of statistics
(O(|V| * 2 * K) numbers, the memory the paper states for a path); a stump at maximal depth keeps
only the statistics of its selected variable in a *leaf*. Capacities grow by doubling; freed
slots are reused. See :mod:`online.bandit.kernels` for what each array means.
"""

from __future__ import annotations

import numpy as np

from online.bandit.kernels import SLOT

NODE_ARRAYS = {  # name -> (dtype, trailing shape)
    "node_kind": (np.int8, ()),
    "node_var": (np.int32, ()),
    "node_child": (np.int32, (2,)),
    "node_ref": (np.int32, ()),
    "node_depth": (np.int32, ()),
    "node_parent": (np.int32, ()),
    "node_tree": (np.int32, ()),
}


class ForestStorage:
    """Arrays of nodes, slots and leaves, with room for ``n_vars`` variables and ``n_actions``."""

    def __init__(self, n_vars: int = 8, n_actions: int = 2):
        self.var_cap = max(8, n_vars)
        self.act_cap = max(2, n_actions)
        self.n_nodes = 0
        self.n_slots = 0  # high-water mark; free slots are listed in free_slots
        self.n_leaves = 0
        self.free_slots: list[int] = []
        self.has_statistics = True
        self.version = 0  # bumped whenever an array is reallocated
        for name, (dtype, shape) in NODE_ARRAYS.items():
            setattr(self, name, np.full((16, *shape), -1, dtype=dtype))
        self.active = np.zeros(self.act_cap, bool)
        self._alloc_slots(16, self.var_cap, self.act_cap)
        self._alloc_leaves(16, self.act_cap)

    # -- allocation ----------------------------------------------------------------------------

    def _alloc_slots(self, cap: int, M: int, K: int) -> None:
        self.slot_vars = np.zeros((cap, M), np.int32)
        self.slot_nvars = np.zeros(cap, np.int32)
        self.slot_in = np.zeros((cap, M), bool)
        self.slot_T = np.zeros((cap, K), np.int64)
        self.slot_W = np.zeros((cap, K))
        self.slot_Rt = np.zeros((cap, K))
        self.slot_T1 = np.zeros((cap, K, M), np.int32)
        self.slot_W1 = np.zeros((cap, K, M))
        self.slot_R1 = np.zeros((cap, K, M))
        self.slot_A = np.zeros((cap, K, 2, M), bool)  # [s, k, v, i]: variables innermost
        self.slot_union = np.zeros((cap, K), bool)
        self.slot_n = np.zeros(cap, np.int64)
        self.slot_best = np.full(cap, -1, np.int32)

    def _alloc_leaves(self, cap: int, K: int) -> None:
        self.leaf_T = np.zeros((cap, 2, K), np.int64)
        self.leaf_W = np.zeros((cap, 2, K))
        self.leaf_R = np.zeros((cap, 2, K))
        self.leaf_A = np.zeros((cap, 2, K), bool)

    SLOT_ARRAYS = ("slot_vars", "slot_nvars", "slot_in", "slot_T", "slot_W", "slot_Rt", "slot_T1",
                   "slot_W1", "slot_R1", "slot_A", "slot_union", "slot_n", "slot_best")
    LEAF_ARRAYS = ("leaf_T", "leaf_W", "leaf_R", "leaf_A")

    def _regrow(self, names, rows: int, M: int, K: int) -> None:
        """Reallocate the named arrays to ``rows`` rows and capacities M, K, keeping the data."""
        old = {name: getattr(self, name) for name in names}
        self.version += 1
        if names is self.SLOT_ARRAYS:
            self._alloc_slots(rows, M, K)
        else:
            self._alloc_leaves(rows, K)
        for name, array in old.items():
            new = getattr(self, name)
            new[tuple(slice(0, n) for n in array.shape)] = array

    def reserve_nodes(self, extra: int) -> None:
        need = self.n_nodes + extra
        cap = len(self.node_kind)
        if need <= cap:
            return
        cap = max(need, 2 * cap)
        self.version += 1
        for name, (dtype, shape) in NODE_ARRAYS.items():
            old = getattr(self, name)
            new = np.full((cap, *shape), -1, dtype=dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def reserve_capacity(self, n_vars: int, n_actions: int) -> None:
        """Make room for ``n_vars`` variables and ``n_actions`` actions in every slot and leaf."""
        if n_vars <= self.var_cap and n_actions <= self.act_cap:
            return
        M = self.var_cap if n_vars <= self.var_cap else max(n_vars, 2 * self.var_cap)
        K = self.act_cap if n_actions <= self.act_cap else max(n_actions, 2 * self.act_cap)
        self._regrow(self.SLOT_ARRAYS, len(self.slot_n), M, K)
        if K != self.act_cap:
            self._regrow(self.LEAF_ARRAYS, len(self.leaf_T), M, K)
            active = np.zeros(K, bool)
            active[: len(self.active)] = self.active
            self.active = active
            self.version += 1
        self.var_cap, self.act_cap = M, K

    def new_node(self, tree: int, depth: int, parent: int) -> int:
        self.reserve_nodes(1)
        n = self.n_nodes
        self.n_nodes += 1
        self.node_tree[n], self.node_depth[n], self.node_parent[n] = tree, depth, parent
        self.node_child[n] = -1
        self.node_var[n] = -1
        return n

    def new_slot(self, variables: np.ndarray) -> int:
        """NewPath's initialisation (Algorithm 6): zero counts and means, A_{c,i,v} = A."""
        if self.free_slots:
            s = self.free_slots.pop()
        else:
            if self.n_slots == len(self.slot_n):
                self._regrow(self.SLOT_ARRAYS, 2 * self.n_slots, self.var_cap, self.act_cap)
            s = self.n_slots
            self.n_slots += 1
        self.slot_vars[s, : len(variables)] = variables
        self.slot_nvars[s] = len(variables)
        self.slot_in[s] = False
        self.slot_in[s, variables] = True
        self.slot_T[s] = 0
        self.slot_W[s] = 0.0
        self.slot_Rt[s] = 0.0
        self.slot_T1[s] = 0
        self.slot_W1[s] = 0.0
        self.slot_R1[s] = 0.0
        self.slot_A[s] = False
        self.slot_A[s][:, :, variables] = self.active[:, None, None]
        self.slot_union[s] = self.active
        self.slot_n[s] = 0
        self.slot_best[s] = -1
        return s

    def free_slot(self, s: int) -> None:
        self.slot_nvars[s] = 0
        self.slot_in[s] = False
        self.free_slots.append(s)

    def new_leaf(self) -> int:
        if self.n_leaves == len(self.leaf_T):
            self._regrow(self.LEAF_ARRAYS, 2 * self.n_leaves, self.var_cap, self.act_cap)
        l = self.n_leaves
        self.n_leaves += 1
        return l

    # -- actions -------------------------------------------------------------------------------

    def reopen_action(self, k: int) -> None:
        """Action k (new, or back in the inventory) is put back in every A_{c,i,v} of every path."""
        live = self.live_slots()
        for s in live:
            self.slot_A[s, k][:, self.slot_vars[s, : self.slot_nvars[s]]] = True
        self.slot_union[live, k] = True
        self.leaf_A[: self.n_leaves, :, k] = True

    def refill_emptied(self) -> None:
        """After a removal: a cell whose remaining actions were all removed starts over with A."""
        act = self.active
        leaf_A = self.leaf_A[: self.n_leaves]
        empty = ~(leaf_A & act).any(axis=-1)
        leaf_A[empty] = act
        for s in self.live_slots():
            vars_ = self.slot_vars[s, : self.slot_nvars[s]]
            cells = self.slot_A[s][:, :, vars_].transpose(2, 1, 0)  # [i, v, k]
            empty = ~(cells & act).any(axis=-1)
            cells[empty] = act
            self.slot_A[s][:, :, vars_] = cells.transpose(2, 1, 0)
            self.slot_union[s] = cells.any(axis=(0, 1))

    def live_slots(self) -> np.ndarray:
        nodes = np.flatnonzero(self.node_kind[: self.n_nodes] == SLOT)
        return self.node_ref[nodes]

    # -- memory ----------------------------------------------------------------------------------

    def nbytes(self) -> int:
        names = [*NODE_ARRAYS, *self.SLOT_ARRAYS, *self.LEAF_ARRAYS]
        return int(sum(getattr(self, name).nbytes for name in names))

    # -- state -----------------------------------------------------------------------------------

    def to_state(self, n_vars: int, n_actions: int, statistics: bool = True) -> dict:
        """Compact copy: live slots only, renumbered; capacities trimmed to what is used.

        With ``statistics=False`` the counts and sums are left out: enough to decide
        (``paths_status``), not to learn.
        """
        n = self.n_nodes
        kind = self.node_kind[:n].copy()
        ref = self.node_ref[:n].copy()
        slot_nodes = np.flatnonzero(kind == SLOT)
        live = ref[slot_nodes]
        ref[slot_nodes] = np.arange(len(live), dtype=np.int32)
        M, K = n_vars, n_actions
        state = {name: getattr(self, name)[:n].copy() for name in NODE_ARRAYS}
        state["node_ref"] = ref
        state["slot_nvars"] = self.slot_nvars[live].copy()
        state["slot_vars"] = self.slot_vars[live, :M].copy()
        state["slot_in"] = self.slot_in[live, :M].copy()
        state["slot_union"] = self.slot_union[live, :K].copy()
        # the state keeps the layout [s, i, v, k] (format version 1)
        state["slot_A"] = self.slot_A[live, :K, :, :M].transpose(0, 3, 2, 1).copy()
        state["slot_best"] = self.slot_best[live].copy()
        state["leaf_A"] = self.leaf_A[: self.n_leaves, :, :K].copy()
        if statistics:
            state["slot_T"] = self.slot_T[live, :K].copy()
            state["slot_W"] = self.slot_W[live, :K].copy()
            state["slot_Rt"] = self.slot_Rt[live, :K].copy()
            state["slot_T1"] = self.slot_T1[live, :K, :M].copy()
            state["slot_W1"] = self.slot_W1[live, :K, :M].copy()
            state["slot_R1"] = self.slot_R1[live, :K, :M].copy()
            state["slot_n"] = self.slot_n[live].copy()
            state["leaf_T"] = self.leaf_T[: self.n_leaves, :, :K].copy()
            state["leaf_W"] = self.leaf_W[: self.n_leaves, :, :K].copy()
            state["leaf_R"] = self.leaf_R[: self.n_leaves, :, :K].copy()
        return state

    @classmethod
    def from_state(cls, state: dict, active: np.ndarray) -> ForestStorage:
        n_vars = np.asarray(state["slot_vars"]).shape[1]
        store = cls(n_vars, len(active))
        store.active[: len(active)] = active
        n = len(state["node_kind"])
        store.reserve_nodes(n)
        store.n_nodes = n
        for name, (dtype, _) in NODE_ARRAYS.items():
            getattr(store, name)[:n] = np.asarray(state[name], dtype=dtype)
        store.n_slots, store.n_leaves = len(state["slot_nvars"]), len(state["leaf_A"])
        store._alloc_slots(max(16, store.n_slots), store.var_cap, store.act_cap)
        store._alloc_leaves(max(16, store.n_leaves), store.act_cap)
        for name in cls.SLOT_ARRAYS + cls.LEAF_ARRAYS:
            if name in state:
                target = getattr(store, name)
                source = np.asarray(state[name], dtype=target.dtype)
                if name == "slot_A":  # [s, i, v, k] in the state
                    source = source.transpose(0, 3, 2, 1)
                target[tuple(slice(0, d) for d in source.shape)] = source
        store.has_statistics = "slot_T" in state
        return store
