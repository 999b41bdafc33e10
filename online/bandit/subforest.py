"""A forest made of some of another forest's trees (what ensemble pruning publishes).

Works on the state of :meth:`BanditForest.to_state`: the nodes, stumps and leaves of the kept
trees are copied and renumbered; everything else (encoder, actions, random generators) is kept.
"""

from __future__ import annotations

import numpy as np

from online.bandit.layout import LEAF, SLOT
from online.bandit.storage import LEAF_KEYS, NODE_ARRAYS, SLOT_KEYS


def select_trees_state(state: dict, trees: list[int]) -> dict:
    """The state of the forest made of ``trees`` (tree indices, in the order given)."""
    old_roots = np.asarray(state["trees"]["roots"])
    n_trees = len(old_roots)
    trees = [int(t) for t in trees]
    if not trees:
        raise ValueError("keep at least one tree")
    if len(set(trees)) != len(trees) or min(trees) < 0 or max(trees) >= n_trees:
        raise ValueError(f"tree indices must be distinct and in [0, {n_trees})")
    new_state = {**state, "params": {**state["params"], "n_trees": len(trees)}}
    trees_part = state["trees"]
    new_state["trees"] = {
        "epsilon": np.asarray(trees_part["epsilon"])[trees].copy(),
        "depth": np.asarray(trees_part["depth"])[trees].copy(),
    }
    storage = state["storage"]
    if len(old_roots) == 0 or len(storage["node_kind"]) == 0:  # still warming up
        new_state["trees"]["roots"] = old_roots.copy()
        return new_state
    node_tree = np.asarray(storage["node_tree"])
    tree_map = np.full(n_trees, -1, np.int64)
    tree_map[trees] = np.arange(len(trees))
    keep = np.flatnonzero(tree_map[node_tree] >= 0)
    # nodes in the order of the kept trees, so that each tree's nodes stay together
    keep = keep[np.argsort(tree_map[node_tree[keep]], kind="stable")]
    node_map = np.full(len(node_tree), -1, np.int64)
    node_map[keep] = np.arange(len(keep))

    new_storage = {name: np.asarray(storage[name])[keep].copy() for name in NODE_ARRAYS}
    child = new_storage["node_child"]
    child[child >= 0] = node_map[child[child >= 0]]
    parent = new_storage["node_parent"]
    parent[parent >= 0] = node_map[parent[parent >= 0]]
    new_storage["node_tree"] = tree_map[new_storage["node_tree"]].astype(np.int32)
    kind = new_storage["node_kind"]
    ref = new_storage["node_ref"]
    for node_kind, prefix in ((SLOT, "slot_"), (LEAF, "leaf_")):
        rows = kind == node_kind
        old_refs = ref[rows].astype(np.int64)
        ref[rows] = np.arange(len(old_refs), dtype=ref.dtype)
        for name in (*SLOT_KEYS, *LEAF_KEYS):
            if name.startswith(prefix) and name in storage:
                new_storage[name] = np.asarray(storage[name])[old_refs].copy()
    new_state["storage"] = new_storage
    new_state["trees"]["roots"] = node_map[old_roots[trees]].astype(np.int32)
    return new_state
