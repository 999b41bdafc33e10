"""The flat, growable arrays that hold every tree of a Bandit Forest.

Nodes of all trees share one pool; each exploring stump owns a *slot* of statistics
(O(|V| * 2 * K) numbers, the memory the paper states for a path); a stump at maximal depth keeps
only the statistics of its selected variable in a *leaf*. Capacities grow by doubling; freed
slots are reused. The arrays are held as the NamedTuples of :mod:`online.bandit.layout` (see
there for what each array means), rebuilt here whenever one is reallocated; the stored state
keeps its own names (``STATE_KEYS``), unchanged since format version 1.
"""

from __future__ import annotations

import numpy as np

from online.bandit.layout import SLOT, Leaves, Nodes, Slots

NODE_ARRAYS = {  # state key -> (dtype, trailing shape); the field of Nodes is the key's tail
    "node_kind": (np.int8, ()),
    "node_var": (np.int32, ()),
    "node_child": (np.int32, (2,)),
    "node_ref": (np.int32, ()),
    "node_depth": (np.int32, ()),
    "node_parent": (np.int32, ()),
    "node_tree": (np.int32, ()),
}
#: state key (format version 1) -> field of Slots
SLOT_KEYS = {"slot_vars": "S", "slot_nvars": "n_S", "slot_in": "in_S", "slot_T": "T",
             "slot_W": "W", "slot_Rt": "R", "slot_T1": "T1", "slot_W1": "W1", "slot_R1": "R1",
             "slot_A": "A", "slot_union": "union", "slot_n": "plays", "slot_best": "best_var"}
#: state key -> field of Leaves
LEAF_KEYS = {"leaf_T": "T", "leaf_W": "W", "leaf_R": "R", "leaf_A": "A"}


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
        self.nodes = Nodes(*(np.full((16, *shape), -1, dtype=dtype)
                             for dtype, shape in NODE_ARRAYS.values()))
        self.active = np.zeros(self.act_cap, bool)
        self._alloc_slots(16, self.var_cap, self.act_cap)
        self._alloc_leaves(16, self.act_cap)

    # -- allocation ----------------------------------------------------------------------------

    def _alloc_slots(self, cap: int, M: int, K: int) -> None:
        self.slots = Slots(
            S=np.zeros((cap, M), np.int32),
            n_S=np.zeros(cap, np.int32),
            in_S=np.zeros((cap, M), bool),
            T=np.zeros((cap, K), np.int64),
            W=np.zeros((cap, K)),
            R=np.zeros((cap, K)),
            T1=np.zeros((cap, K, M), np.int32),
            W1=np.zeros((cap, K, M)),
            R1=np.zeros((cap, K, M)),
            A=np.zeros((cap, K, 2, M), bool),  # [s, k, v, i]: variables innermost
            union=np.zeros((cap, K), bool),
            plays=np.zeros(cap, np.int64),
            best_var=np.full(cap, -1, np.int32),
        )

    def _alloc_leaves(self, cap: int, K: int) -> None:
        self.leaves = Leaves(T=np.zeros((cap, 2, K), np.int64), W=np.zeros((cap, 2, K)),
                             R=np.zeros((cap, 2, K)), A=np.zeros((cap, 2, K), bool))

    def _regrow(self, which: str, rows: int, M: int, K: int) -> None:
        """Reallocate ``"slots"`` or ``"leaves"`` to ``rows`` rows and capacities M, K, keeping
        the data."""
        old = getattr(self, which)
        self.version += 1
        if which == "slots":
            self._alloc_slots(rows, M, K)
        else:
            self._alloc_leaves(rows, K)
        for new, array in zip(getattr(self, which), old):
            new[tuple(slice(0, n) for n in array.shape)] = array

    def reserve_nodes(self, extra: int) -> None:
        need = self.n_nodes + extra
        cap = len(self.nodes.kind)
        if need <= cap:
            return
        cap = max(need, 2 * cap)
        self.version += 1
        grown = []
        for old, (dtype, shape) in zip(self.nodes, NODE_ARRAYS.values()):
            new = np.full((cap, *shape), -1, dtype=dtype)
            new[: len(old)] = old
            grown.append(new)
        self.nodes = Nodes(*grown)

    def reserve_capacity(self, n_vars: int, n_actions: int) -> None:
        """Make room for ``n_vars`` variables and ``n_actions`` actions in every slot and leaf."""
        if n_vars <= self.var_cap and n_actions <= self.act_cap:
            return
        M = self.var_cap if n_vars <= self.var_cap else max(n_vars, 2 * self.var_cap)
        K = self.act_cap if n_actions <= self.act_cap else max(n_actions, 2 * self.act_cap)
        self._regrow("slots", len(self.slots.plays), M, K)
        if K != self.act_cap:
            self._regrow("leaves", len(self.leaves.T), M, K)
            active = np.zeros(K, bool)
            active[: len(self.active)] = self.active
            self.active = active
            self.version += 1
        self.var_cap, self.act_cap = M, K

    def new_node(self, tree: int, depth: int, parent: int) -> int:
        self.reserve_nodes(1)
        n = self.n_nodes
        self.n_nodes += 1
        nodes = self.nodes
        nodes.tree[n], nodes.depth[n], nodes.parent[n] = tree, depth, parent
        nodes.child[n] = -1
        nodes.var[n] = -1
        return n

    def new_slot(self, variables: np.ndarray) -> int:
        """NewPath's initialisation (Algorithm 6): zero counts and means, A_{c,i,v} = A."""
        if self.free_slots:
            s = self.free_slots.pop()
        else:
            if self.n_slots == len(self.slots.plays):
                self._regrow("slots", 2 * self.n_slots, self.var_cap, self.act_cap)
            s = self.n_slots
            self.n_slots += 1
        slots = self.slots
        slots.S[s, : len(variables)] = variables
        slots.n_S[s] = len(variables)
        slots.in_S[s] = False
        slots.in_S[s, variables] = True
        slots.T[s] = 0
        slots.W[s] = 0.0
        slots.R[s] = 0.0
        slots.T1[s] = 0
        slots.W1[s] = 0.0
        slots.R1[s] = 0.0
        slots.A[s] = False
        slots.A[s][:, :, variables] = self.active[:, None, None]
        slots.union[s] = self.active
        slots.plays[s] = 0
        slots.best_var[s] = -1
        return s

    def free_slot(self, s: int) -> None:
        self.slots.n_S[s] = 0
        self.slots.in_S[s] = False
        self.free_slots.append(s)

    def new_leaf(self) -> int:
        if self.n_leaves == len(self.leaves.T):
            self._regrow("leaves", 2 * self.n_leaves, self.var_cap, self.act_cap)
        l = self.n_leaves
        self.n_leaves += 1
        return l

    # -- actions -------------------------------------------------------------------------------

    def reopen_action(self, k: int) -> None:
        """Action k (new, or back in the inventory) is put back in every A_{c,i,v} of every path."""
        live = self.live_slots()
        slots = self.slots
        for s in live:
            slots.A[s, k][:, slots.S[s, : slots.n_S[s]]] = True
        slots.union[live, k] = True
        self.leaves.A[: self.n_leaves, :, k] = True

    def refill_emptied(self) -> None:
        """After a removal: a cell whose remaining actions were all removed starts over with A."""
        act = self.active
        leaf_A = self.leaves.A[: self.n_leaves]
        empty = ~(leaf_A & act).any(axis=-1)
        leaf_A[empty] = act
        slots = self.slots
        for s in self.live_slots():
            S = slots.S[s, : slots.n_S[s]]
            cells = slots.A[s][:, :, S].transpose(2, 1, 0)  # [i, v, k]
            empty = ~(cells & act).any(axis=-1)
            cells[empty] = act
            slots.A[s][:, :, S] = cells.transpose(2, 1, 0)
            slots.union[s] = cells.any(axis=(0, 1))

    def live_slots(self) -> np.ndarray:
        nodes = np.flatnonzero(self.nodes.kind[: self.n_nodes] == SLOT)
        return self.nodes.ref[nodes]

    # -- memory ----------------------------------------------------------------------------------

    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in (*self.nodes, *self.slots, *self.leaves)))

    # -- state -----------------------------------------------------------------------------------

    def to_state(self, n_vars: int, n_actions: int, statistics: bool = True) -> dict:
        """Compact copy: live slots only, renumbered; capacities trimmed to what is used.

        With ``statistics=False`` the counts and sums are left out: enough to decide
        (``paths_status``), not to learn.
        """
        n = self.n_nodes
        nodes, slots, leaves = self.nodes, self.slots, self.leaves
        kind = nodes.kind[:n].copy()
        ref = nodes.ref[:n].copy()
        slot_nodes = np.flatnonzero(kind == SLOT)
        live = ref[slot_nodes]
        ref[slot_nodes] = np.arange(len(live), dtype=np.int32)
        M, K = n_vars, n_actions
        state = {key: array[:n].copy() for key, array in zip(NODE_ARRAYS, nodes)}
        state["node_ref"] = ref
        state["slot_nvars"] = slots.n_S[live].copy()
        state["slot_vars"] = slots.S[live, :M].copy()
        state["slot_in"] = slots.in_S[live, :M].copy()
        state["slot_union"] = slots.union[live, :K].copy()
        # the state keeps the layout [s, i, v, k] (format version 1)
        state["slot_A"] = slots.A[live, :K, :, :M].transpose(0, 3, 2, 1).copy()
        state["slot_best"] = slots.best_var[live].copy()
        state["leaf_A"] = leaves.A[: self.n_leaves, :, :K].copy()
        if statistics:
            state["slot_T"] = slots.T[live, :K].copy()
            state["slot_W"] = slots.W[live, :K].copy()
            state["slot_Rt"] = slots.R[live, :K].copy()
            state["slot_T1"] = slots.T1[live, :K, :M].copy()
            state["slot_W1"] = slots.W1[live, :K, :M].copy()
            state["slot_R1"] = slots.R1[live, :K, :M].copy()
            state["slot_n"] = slots.plays[live].copy()
            state["leaf_T"] = leaves.T[: self.n_leaves, :, :K].copy()
            state["leaf_W"] = leaves.W[: self.n_leaves, :, :K].copy()
            state["leaf_R"] = leaves.R[: self.n_leaves, :, :K].copy()
        return state

    @classmethod
    def from_state(cls, state: dict, active: np.ndarray) -> ForestStorage:
        n_vars = np.asarray(state["slot_vars"]).shape[1]
        store = cls(n_vars, len(active))
        store.active[: len(active)] = active
        n = len(state["node_kind"])
        store.reserve_nodes(n)
        store.n_nodes = n
        for target, (key, (dtype, _)) in zip(store.nodes, NODE_ARRAYS.items()):
            target[:n] = np.asarray(state[key], dtype=dtype)
        store.n_slots, store.n_leaves = len(state["slot_nvars"]), len(state["leaf_A"])
        store._alloc_slots(max(16, store.n_slots), store.var_cap, store.act_cap)
        store._alloc_leaves(max(16, store.n_leaves), store.act_cap)
        for keys, arrays in ((SLOT_KEYS, store.slots), (LEAF_KEYS, store.leaves)):
            for key, field in keys.items():
                if key in state:
                    target = getattr(arrays, field)
                    source = np.asarray(state[key], dtype=target.dtype)
                    if key == "slot_A":  # [s, i, v, k] in the state
                        source = source.transpose(0, 3, 2, 1)
                    target[tuple(slice(0, d) for d in source.shape)] = source
        store.has_statistics = "slot_T" in state
        return store
