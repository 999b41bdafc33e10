"""Compiled per-event work of Bandit Forest: path selection, statistics updates, eliminations.

Everything here works on the arrays of :mod:`online.bandit.layout` (see there for the
notation: ``slots.T``, ``slots.A``, ``leaves.R``, ...), one event at a time, for all the trees
at once. Structural changes (a stump that has selected its variable becomes a split with two
new paths, or a leaf) are left to Python (:mod:`online.bandit.paths`): they are rare, and they
draw random subsets of variables.

The entry points called from Python (:func:`learn_event`, :func:`learn_events`) take the forest
as :func:`~online.bandit.layout.plain` tuples or as a :class:`~online.bandit.layout.Forest`
(and a :class:`~online.bandit.layout.Bound`, :class:`Events` as plain tuples or NamedTuples).
The compiled acting (votes and draws) is in :mod:`online.bandit.decide_kernels`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from online.bandit.bounds import action_radius, variable_radius
from online.bandit.layout import LEAF, SLOT, SPLIT, Bound, as_forest

__all__ = ["LEAF", "SLOT", "SPLIT", "Events", "RoundWork", "eliminate_actions", "find_path",
           "learn_event", "learn_events", "radius_table", "round_work", "stump_round"]


class RoundWork(NamedTuple):
    """Work arrays of :func:`stump_round` (allocated once per event, not once per round)."""

    top0: np.ndarray  # [i] max_k mu_{k,0}^i
    top1: np.ndarray  # [i] max_k mu_{k,1}^i
    mu: np.ndarray  # [j] mu^i of the j-th remaining variable
    t: np.ndarray  # [j, k] the counts and means of the cells of AE (eliminate_actions)
    mean: np.ndarray
    cell_var: np.ndarray  # [j] the variable of cell j
    n_left: np.ndarray  # [i] remaining actions in the cell (i, x_i)


class Events(NamedTuple):
    """The events of :func:`learn_events`: rows of X padded with zeros past their ``n_vars``."""

    X: np.ndarray
    n_vars: np.ndarray  # M when the event was learned
    actions: np.ndarray
    rewards: np.ndarray  # y
    weights: np.ndarray  # w (see BanditForest._weighted)


@njit(cache=True)
def find_path(x, root, kind, child, var):
    """Index of the node of path c_theta(x) (Algorithm 6, line 4): ``kind``, ``child``, ``var``
    of :class:`~online.bandit.layout.Nodes` (the arrays, read once by the caller: a field of a
    NamedTuple counts a reference per array, per tree here)."""
    n = root
    while kind[n] == SPLIT:
        n = child[n, x[var[n]]]
    return n


@njit(cache=True)
def radius_table(size, n_active, delta, L):
    """action_radius(t) for t = 0 .. size - 1 (the logarithm is most of the cost of AE)."""
    table = np.empty(size)
    for t in range(size):
        table[t] = action_radius(t, n_active, delta, L)
    return table


@njit(cache=True)
def cached_radius(t, radii, n_active, delta, L):
    """action_radius(t) from the table ``radii`` (computed for the current K) when t is in it."""
    if t < radii.shape[0]:
        return radii[t]
    return action_radius(t, n_active, delta, L)


@njit(cache=True)
def round_work(width, K):
    """The :class:`RoundWork` of stumps over ``width`` variables and K actions."""
    cells = max(width, 1)  # one per variable (a leaf uses the first)
    return RoundWork(np.empty(width), np.empty(width), np.empty(width),
                     np.empty((cells, K), np.int64), np.empty((cells, K)),
                     np.empty(cells, np.int64), np.empty(width, np.int64))


@njit(cache=True)
def eliminate_actions(t, mean, n_cells, eps, L, bound):
    """AE (Algorithm 3) with the threshold of eq. (4) on cells (c, i, v) j < ``n_cells``: the
    routine of stumps (the cells of a round) and leaves (one cell).

    ``t[j, k]``: the plays of action k in cell j if k is remaining (in A_{c,i,v}) and active,
    else 0; ``mean[j, k]``: its conditional mean R / W (self-normalised IPS) where
    ``t[j, k] > 0``. Sets ``t[j, k] = -1`` for each action eliminated (the caller takes it out
    of its A: one call per round, no array view per cell, each a reference count) and returns
    how many there are.
    """
    radii, n_active, delta = bound.radii, bound.n_active, bound.delta
    n_eliminated = 0
    for j in range(n_cells):
        best = -1
        best_mean = -np.inf
        for k in range(t.shape[1]):
            if t[j, k] > 0 and mean[j, k] > best_mean:
                best, best_mean = k, mean[j, k]
        if best < 0:
            continue
        best_radius = cached_radius(t[j, best], radii, n_active, delta, L)
        for k in range(t.shape[1]):
            if k != best and t[j, k] > 0:
                # eq. (4): mu_k' - mu_k + eps >= r(t_k') + r(t_k)  (= 2 r(t) for equal counts);
                # the first test skips the logarithm when even r(t_k) = 0 would not do
                gap = best_mean - mean[j, k] + eps
                if gap >= best_radius and gap >= best_radius + cached_radius(
                        t[j, k], radii, n_active, delta, L):
                    t[j, k] = -1
                    n_eliminated += 1
    return n_eliminated


@njit(cache=True)
def leaf_cell(T, W, R, A, active, t, mean):
    """Cell 0 of ``t``, ``mean`` for :func:`eliminate_actions` from a leaf's cell; returns the
    number of its remaining actions played, the means filled only when there are two or more."""
    # Eq. (4) eliminates a played remaining action k' against the best one k != k': with fewer
    # than two such actions in the cell (a finished leaf: most leaves once the forest has
    # learned) nothing can be eliminated, so the means and the radius (a read in a 512 KB
    # table) are skipped. Exact: AE would change nothing.
    n_played = 0
    for k in range(A.shape[0]):
        t[0, k] = T[k] if A[k] and active[k] else 0
        n_played += t[0, k] > 0
    if n_played >= 2:
        for k in range(A.shape[0]):
            if t[0, k] > 0:
                mean[0, k] = R[k] / W[k]
    return n_played


@njit(cache=True)
def variable_elimination(s, slots, active, D, L, eps, bound, work):
    """VE (Algorithm 2 with the threshold of eq. (3)) at the end of a round of stump ``s``.

    Also sets ``best_var[s]`` (i'). Returns the number of variables left in S_c.
    """
    # the arrays as locals, read once: each ``slots.X`` is a reference count in and out
    S, n_S, in_S, T, W, R, R1 = slots.S, slots.n_S, slots.in_S, slots.T, slots.W, slots.R, slots.R1
    union, best_var = slots.union, slots.best_var
    n = n_S[s]
    K = active.shape[0]
    width = min(in_S.shape[1], bound.M)
    # VE works on the actions still remaining for the path (those eliminated for every (i, v)
    # are no longer played, so their count would stall the bound and they cannot be the max).
    t_min = -1
    for k in range(K):
        if active[k] and union[s, k] and (t_min < 0 or T[s, k] < t_min):
            t_min = T[s, k]
    if n > 1 and t_min > 0:
        # VE lines 2-7: mu^i = sum_v max_k mu_{k,v}^i with mu_{k,v}^i = R / W. Actions outside,
        # variables inside, over the whole row (the removed ones are ignored below): contiguous
        # loops the compiler vectorizes.
        top0, top1, mu = work.top0, work.top1, work.mu
        top0[:] = -np.inf
        top1[:] = -np.inf
        for k in range(K):
            if active[k] and union[s, k]:
                inv_w = 1.0 / W[s, k]
                mean_k = R[s, k] * inv_w
                row = R1[s, k]
                for i in range(width):
                    value1 = row[i] * inv_w
                    top1[i] = max(top1[i], value1)
                    top0[i] = max(top0[i], mean_k - value1)
        best_j = 0
        for j in range(n):
            i = S[s, j]
            mu[j] = top0[i] + top1[i]
            if mu[j] > mu[best_j]:
                best_j = j
        radius = variable_radius(t_min, bound.n_active, bound.M, bound.delta, D, L)
        kept = 0
        best_j_new = 0
        for j in range(n):
            # eq. (3): eliminate i when mu^{i'} - mu^i + eps >= radius (never i' itself)
            if j == best_j or mu[best_j] - mu[j] + eps < radius:
                if j == best_j:
                    best_j_new = kept
                S[s, kept] = S[s, j]
                kept += 1
            else:
                in_S[s, S[s, j]] = False
        n_S[s] = kept
        n = kept
        best_var[s] = S[s, best_j_new]
    elif best_var[s] < 0 and n > 0:
        best_var[s] = S[s, 0]
    return n


@njit(cache=True)
def action_elimination(x, s, slots, active, L, eps, bound, work):
    """AE for each remaining variable of stump ``s`` on its observed value (Algorithm 4,
    lines 9-12), with :func:`eliminate_actions`. Returns whether an action was eliminated."""
    S, T, W, R, T1, W1, R1, A = (slots.S, slots.T, slots.W, slots.R, slots.T1, slots.W1,
                                 slots.R1, slots.A)
    K = active.shape[0]
    width = min(slots.in_S.shape[1], bound.M)
    # Eq. (4) compares two remaining actions of a cell, so a cell with one action left (most
    # cells once a path has learned) cannot lose any: counting them first, for all the
    # variables at once (actions outside, variables inside: SIMD), spares their means, the cost
    # of AE.
    n_left = work.n_left
    n_left[:width] = 0
    for k in range(K):
        if active[k]:
            a0, a1 = A[s, k, 0], A[s, k, 1]
            for i in range(width):  # branch-free: a1 where x_i = 1, a0 where x_i = 0
                one = x[i] != 0
                n_left[i] += (a1[i] & one) | (a0[i] & (not one))
    t, mean, cell_var = work.t, work.mean, work.cell_var
    n_cells = 0
    for j in range(slots.n_S[s]):
        i = S[s, j]
        if n_left[i] < 2:
            continue
        v = x[i]
        # cell (i, v) of action k: count and weight of the plays of k with x_i = v (v = 0 is
        # the total minus v = 1), conditional mean R / W
        for k in range(K):
            t[n_cells, k] = 0
            if A[s, k, v, i] and active[k]:
                if v == 1:
                    t[n_cells, k], w, r = T1[s, k, i], W1[s, k, i], R1[s, k, i]
                else:
                    t[n_cells, k] = T[s, k] - T1[s, k, i]
                    w = W[s, k] - W1[s, k, i]
                    r = R[s, k] - R1[s, k, i]
                if t[n_cells, k] > 0:
                    mean[n_cells, k] = r / w
        cell_var[n_cells] = i
        n_cells += 1
    if n_cells == 0 or eliminate_actions(t, mean, n_cells, eps, L, bound) == 0:
        return False
    for j in range(n_cells):
        i = cell_var[j]
        for k in range(K):
            if t[j, k] < 0:
                A[s, k, x[i], i] = False
    return True


@njit(cache=True)
def update_union(s, slots, width):
    """The remaining actions of path ``s``: an action leaves the draw only once it is eliminated
    for every value of every remaining variable (sec. 3.4)."""
    union, A, in_S = slots.union, slots.A, slots.in_S
    for k in range(union.shape[1]):
        union[s, k] = False
        for v in range(2):
            row = A[s, k, v]
            for i in range(width):
                if row[i] and in_S[s, i]:
                    union[s, k] = True
                    break


@njit(cache=True)
def stump_round(x, s, slots, active, D, L, eps, bound, work):
    """End of a round of stump ``s``: VE with eq. (3), then AE with eq. (4) on the cells
    (i, x_i) as in Algorithm 4 (line 11), then the union of the remaining actions.

    Returns the number of variables left in S_c.
    """
    n_before = slots.n_S[s]
    n = variable_elimination(s, slots, active, D, L, eps, bound, work)
    eliminated = action_elimination(x, s, slots, active, L, eps, bound, work)
    if eliminated or n != n_before:
        update_union(s, slots, min(slots.in_S.shape[1], bound.M))
    return n


@njit(cache=True)
def _learn_event(x, k, y, w, forest, bound, paths, n_paths, ready):
    """:func:`learn_event` on a :class:`~online.bandit.layout.Forest`."""
    L = forest.roots.shape[0]
    nodes, slots, leaves, active = forest.nodes, forest.slots, forest.leaves, forest.active
    # the arrays as locals, read once: each ``slots.X`` is a reference count in and out
    kind, ref, var_of, child, roots = nodes.kind, nodes.ref, nodes.var, nodes.child, forest.roots
    T, W, R, T1, W1, R1 = slots.T, slots.W, slots.R, slots.T1, slots.W1, slots.R1
    in_S, plays = slots.in_S, slots.plays
    leaf_T, leaf_W, leaf_R, leaf_A = leaves.T, leaves.W, leaves.R, leaves.A
    epsilon, max_depth = forest.epsilon, forest.max_depth
    wy = w * y
    n_ready = 0
    capacity = in_S.shape[1]
    width = min(capacity, bound.M)
    work = round_work(width, active.shape[0])
    cell_t, cell_mean = work.t, work.mean  # a leaf's cell for eliminate_actions
    ones = np.empty(x.shape[0], np.int64)  # the variables x sets (the only ones updated)
    n_ones = 0
    for i in range(min(x.shape[0], capacity)):
        if x[i]:
            ones[n_ones] = i
            n_ones += 1
    dense = 4 * n_ones >= width
    for theta in range(L):
        if theta < n_paths:
            node = paths[theta]
        else:
            node = find_path(x, roots[theta], kind, child, var_of)
        if kind[node] == SLOT:
            s = ref[node]
            T[s, k] += 1
            W[s, k] += w
            R[s, k] += wy
            plays[s] += 1
            # VE lines 2-5 and AE line 2, for the played action and the variables x sets
            if dense:  # the whole row, SIMD (x + 0.0 is x: these sums are never -0.0)
                t1, w1, r1, in_s = T1[s, k], W1[s, k], R1[s, k], in_S[s]
                for i in range(width):
                    m = (x[i] != 0) & in_s[i]
                    t1[i] += m
                    w1[i] += w if m else 0.0
                    r1[i] += wy if m else 0.0
            else:
                for a in range(n_ones):
                    i = ones[a]
                    if in_S[s, i]:
                        T1[s, k, i] += 1
                        W1[s, k, i] += w
                        R1[s, k, i] += wy
            # "if k = LastAction(A)": with random draws, a round is n_active plays of the path
            if plays[s] % bound.n_active == 0:
                left = stump_round(x, s, slots, active, max_depth[theta], L, epsilon[theta],
                                   bound, work)
                if left <= 1:
                    ready[n_ready] = node
                    n_ready += 1
        else:
            l = ref[node]
            var = var_of[node]
            v = x[var] if var >= 0 else 0
            leaf_T[l, v, k] += 1
            leaf_W[l, v, k] += w
            leaf_R[l, v, k] += wy
            if leaf_cell(leaf_T[l, v], leaf_W[l, v], leaf_R[l, v], leaf_A[l, v], active,
                         cell_t, cell_mean) >= 2:
                if eliminate_actions(cell_t, cell_mean, 1, epsilon[theta], L, bound):
                    for a in range(active.shape[0]):
                        if cell_t[0, a] < 0:
                            leaf_A[l, v, a] = False
    return n_ready


@njit(cache=True)
def learn_event(x, k, y, w, forest, bound, paths, n_paths, ready):
    """Algorithm 6, lines 9-21 for one event: update every tree's path with (x, k, y, w).

    Fills ``ready`` with the nodes whose stump has one variable left (lines 16-20, done by the
    caller) and returns how many there are. ``paths[:n_paths]``: the nodes of the first trees'
    paths c_theta(x), if the caller has them (``decide`` on the same x, no learning since:
    the same trees, so the same nodes); the others are found here.
    """
    return _learn_event(x, k, y, w, as_forest(forest), Bound(*bound), paths, n_paths, ready)


@njit(cache=True)
def learn_events(events, start, forest, bound, ready):
    """:func:`learn_event` for the :class:`Events` ``start, start + 1, ...`` until one leaves
    stumps to resolve (``bound.M`` is each event's own ``n_vars``).

    Returns ``(next event, number of nodes in ready)``; the caller resolves them and goes on.
    """
    forest, events, bound = as_forest(forest), Events(*events), Bound(*bound)
    no_paths = np.empty(0, np.int64)
    for j in range(start, events.X.shape[0]):
        event_bound = Bound(bound.n_active, events.n_vars[j], bound.delta, bound.radii)
        n_ready = _learn_event(events.X[j], events.actions[j], events.rewards[j],
                               events.weights[j], forest, event_bound, no_paths, 0, ready)
        if n_ready:
            return j + 1, n_ready
    return events.X.shape[0], 0
