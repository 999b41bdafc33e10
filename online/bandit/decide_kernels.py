"""Compiled acting of Bandit Forest: each tree's path votes or draws (Algorithm 6, lines 4-6,
with sec. 5's draw), and the per-tree readings behind ``tree_votes`` / ``finished_votes``.

The entry points (:func:`decide_probabilities`, :func:`greedy_actions`,
:func:`finished_actions`) take the forest as :func:`~online.bandit.layout.plain` tuples or as a
:class:`~online.bandit.layout.Forest`; they change nothing the forest has learned.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from online.bandit.kernels import find_path
from online.bandit.layout import SLOT, as_forest

__all__ = ["decide_probabilities", "finished_actions", "greedy_actions"]


# Reading a field of a NamedTuple (``forest.nodes``, ``slots.A``) counts a reference to each
# array it holds, in and out: the kernels read them once, before their loops over the trees, and
# give the small per-tree helpers the arrays themselves.


@njit(cache=True)
def leaf_vote(leaf_A, l, v, active):
    """The one action left in cell (l, v) of the leaves (the path's learning is finished), or -1."""
    last = -1
    for k in range(active.shape[0]):
        if leaf_A[l, v, k] and active[k]:
            if last >= 0:
                return -1
            last = k
    return last


@njit(cache=True)
def paths_status(x, forest, explore, votes, paths):
    """Algorithm 6, lines 4-6 with sec. 5's draw: returns the number of paths still exploring.

    ``explore[k]`` is set for the remaining actions of the exploring paths; ``votes[k]`` counts
    the finished paths (one remaining action) voting for k; ``paths[theta]`` is the node of
    tree theta's path (for :func:`~online.bandit.kernels.learn_event`).
    """
    roots, active = forest.roots, forest.active
    nodes = forest.nodes
    kind, child, var, ref = nodes.kind, nodes.child, nodes.var, nodes.ref
    union, leaf_A = forest.slots.union, forest.leaves.A
    K = active.shape[0]
    exploring = 0
    for theta in range(roots.shape[0]):
        node = find_path(x, roots[theta], kind, child, var)
        paths[theta] = node
        if kind[node] == SLOT:
            s = ref[node]
            exploring += 1
            for k in range(K):
                if union[s, k] and active[k]:
                    explore[k] = True
        else:
            l = ref[node]
            v = x[var[node]] if var[node] >= 0 else 0
            vote = leaf_vote(leaf_A, l, v, active)
            if vote >= 0:
                votes[vote] += 1
            else:
                exploring += 1
                for k in range(K):
                    if leaf_A[l, v, k] and active[k]:
                        explore[k] = True
    return exploring


@njit(cache=True)
def finished_actions(x, forest, out):
    """``out[theta]``: the one action left on tree theta's path for x (a finished path, which
    votes in :func:`decide_probabilities`), or -1 while the path is still exploring."""
    forest = as_forest(forest)
    roots, active, leaf_A = forest.roots, forest.active, forest.leaves.A
    nodes = forest.nodes
    kind, child, var, ref = nodes.kind, nodes.child, nodes.var, nodes.ref
    for theta in range(roots.shape[0]):
        node = find_path(x, roots[theta], kind, child, var)
        out[theta] = -1
        if kind[node] != SLOT:
            v = x[var[node]] if var[node] >= 0 else 0
            out[theta] = leaf_vote(leaf_A, ref[node], v, active)


@njit(cache=True)
def greedy_actions(x, forest, allowed, out):
    """``out[theta]``: the best remaining allowed action of tree theta's path by its estimates.

    An exploring stump uses its current best variable i' (the argmax of mu^i at its last round).
    """
    forest = as_forest(forest)
    roots, active = forest.roots, forest.active
    kind, child, var_of, ref = (forest.nodes.kind, forest.nodes.child, forest.nodes.var,
                                forest.nodes.ref)
    slots, leaves = forest.slots, forest.leaves
    S, best_var, A, W, R, W1, R1 = (slots.S, slots.best_var, slots.A, slots.W, slots.R, slots.W1,
                                    slots.R1)
    leaf_A, leaf_W, leaf_R = leaves.A, leaves.W, leaves.R
    K = active.shape[0]
    for theta in range(roots.shape[0]):
        node = find_path(x, roots[theta], kind, child, var_of)
        best = -1
        best_mean = -np.inf
        if kind[node] == SLOT:
            s = ref[node]
            i = best_var[s]
            if i < 0:
                i = S[s, 0]
            v = x[i]
            for k in range(K):
                if A[s, k, v, i] and active[k] and allowed[k]:
                    if v == 1:
                        wk, rk = W1[s, k, i], R1[s, k, i]
                    else:
                        wk = W[s, k] - W1[s, k, i]
                        rk = R[s, k] - R1[s, k, i]
                    mean = rk / wk if wk > 0 else 0.0
                    if mean > best_mean:
                        best, best_mean = k, mean
        else:
            l = ref[node]
            var = var_of[node]
            v = x[var] if var >= 0 else 0
            for k in range(K):
                if leaf_A[l, v, k] and active[k] and allowed[k]:
                    wk = leaf_W[l, v, k]
                    mean = leaf_R[l, v, k] / wk if wk > 0 else 0.0
                    if mean > best_mean:
                        best, best_mean = k, mean
        out[theta] = best


@njit(cache=True)
def decide_probabilities(x, forest, candidates, all_finished, probs, drawn, order, paths):
    """The forest's probability for each candidate action (sec. 5's version of Algorithm 6).

    ``candidates[j]`` is an action index, or -1 for an action never learned about (it counts as
    exploring). Fills ``probs``, ``drawn`` (the positions of the candidates the exploring paths
    draw from, the pool, in order) and ``order`` (ranking: probability, then votes, then
    position) and ``paths`` (each tree's node for x), and returns ``(share, winner, n_pool)``:
    the probability of drawing from the pool instead of playing the vote winner (a position, -1
    if no finished path votes for a candidate), and the size of the pool.
    """
    forest = as_forest(forest)
    K = forest.active.shape[0]
    explore = np.zeros(K, np.bool_)
    votes = np.zeros(K, np.int64)
    exploring = paths_status(x, forest, explore, votes, paths)
    if forest.roots.shape[0] == 0:  # warm-up: every root stump would draw among all actions
        exploring = 1
        explore[:] = True
    n = candidates.shape[0]
    pool = np.empty(n, np.bool_)
    cand_votes = np.zeros(n, np.int64)
    n_pool = 0
    any_new = False
    winner = -1
    for j in range(n):
        k = candidates[j]
        if k < 0:
            pool[j] = True
            any_new = True
        else:
            pool[j] = explore[k]
            cand_votes[j] = votes[k]
            if votes[k] > 0 and (winner < 0 or votes[k] > cand_votes[winner]):
                winner = j
        if pool[j]:
            n_pool += 1
    finished = 0
    for k in range(K):
        finished += votes[k]
    if any_new and exploring == 0:
        exploring = 1
    if all_finished:  # Algorithm 6, line 5: vote only when every path is finished
        share = 1.0 if exploring > 0 else 0.0
    else:  # finished paths vote, exploring paths draw, in proportion to their number
        share = exploring / (exploring + finished) if exploring + finished > 0 else 1.0
    if n_pool == 0:
        share = 0.0
    if winner < 0:
        share = 1.0
    if n_pool == 0 and winner < 0:  # every remaining action was excluded: draw among all
        for j in range(n):
            pool[j] = True
        n_pool = n
    for j in range(n):
        probs[j] = share / n_pool if pool[j] else 0.0
    if winner >= 0:
        probs[winner] += 1.0 - share
    # ranking: insertion sort on (-probability, -votes, position); n is small
    for j in range(n):
        order[j] = j
    for a in range(1, n):
        j = order[a]
        b = a - 1
        while b >= 0 and (probs[order[b]] < probs[j] or (
                probs[order[b]] == probs[j] and cand_votes[order[b]] < cand_votes[j])):
            order[b + 1] = order[b]
            b -= 1
        order[b + 1] = j
    n_pool = 0
    for j in range(n):
        if pool[j]:
            drawn[n_pool] = j
            n_pool += 1
    return share, winner, n_pool
