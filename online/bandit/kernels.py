"""Compiled per-event work of Bandit Forest: path selection, statistics updates, eliminations.

Everything here works on the flat arrays of :mod:`online.bandit.storage`, one event at a time,
for all the trees at once. Structural changes (a stump that has selected its variable becomes a
split with two new paths, or a leaf) are left to Python: they are rare, and they draw random
subsets of variables.

Notation (Algorithm 6): for an exploring path c (a *slot*), ``T[s, k]`` = t_{c,k};
``W[s, k]`` = sum of the IPS weights of those plays; ``Rt[s, k]`` = sum of weight * reward;
``T1[s, k, i]``, ``W1[s, k, i]``, ``R1[s, k, i]`` = the same restricted to x_i = 1. The x_i = 0
parts are the differences (``T - T1``, ...), so an event only touches the variables it sets:
contexts are sparse (one-hot categories, one bin out of five). ``inS[s, i]``: i is still in S_c;
``A[s, k, v, i]`` = action k is still in A_{c,i,v} (variables innermost, as in ``T1``);
``union[s, k]`` = k is in some A_{c,i,v} of a remaining variable i. A *leaf* (depth D_theta,
variable selected) keeps the same sums for its variable only: ``leaf_*[l, v, k]``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from online.bandit.bounds import action_radius, variable_radius

SLOT = 0  # a decision stump still selecting its variable (VE) and its actions (AE)
SPLIT = 1  # a stump that selected its variable and was split into two paths
LEAF = 2  # a stump at depth D_theta (or with no variable left): action selection only


@njit(cache=True)
def find_path(x, root, node_kind, node_var, node_child):
    """Index of the node of path c_theta(x) (Algorithm 6, line 4)."""
    n = root
    while node_kind[n] == SPLIT:
        n = node_child[n, x[node_var[n]]]
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
def eliminate_actions(T, W, R, A, active, n_active, eps, L, delta, radii):
    """AE (Algorithm 3) on one cell (c, i, v), with the threshold of eq. (4).

    ``T[k]``, ``W[k]``, ``R[k]``: count, weight sum and weighted reward sum of action k in the
    cell; ``A[k]``: k still remaining. The conditional mean is R / W (self-normalised IPS).
    """
    # Eq. (4) eliminates a played remaining action k' against the best one k != k': with fewer
    # than two such actions in the cell (a finished leaf: most leaves once the forest has
    # learned) nothing can be eliminated, so the means and the radius (a read in a 512 KB
    # table) are skipped. Exact: the loops below would change nothing.
    n_played = 0
    for k in range(A.shape[0]):
        n_played += A[k] and active[k] and T[k] > 0
    if n_played < 2:
        return
    best = -1
    best_mean = -np.inf
    for k in range(A.shape[0]):
        if A[k] and active[k] and T[k] > 0:
            mean = R[k] / W[k]
            if mean > best_mean:
                best, best_mean = k, mean
    if best < 0:
        return
    best_radius = cached_radius(T[best], radii, n_active, delta, L)
    for k in range(A.shape[0]):
        if k != best and A[k] and active[k] and T[k] > 0:
            # eq. (4): mu_k' - mu_k + eps >= r(t_k') + r(t_k)  (= 2 r(t) for equal counts);
            # the first test skips the logarithm when even r(t_k) = 0 would not do
            gap = best_mean - R[k] / W[k] + eps
            if gap >= best_radius and gap >= best_radius + cached_radius(T[k], radii, n_active,
                                                                          delta, L):
                A[k] = False


@njit(cache=True)
def eliminate_in_slot(x, s, vars_, n_vars, inS, T, W, Rt, T1, W1, R1, A, union, best_var,
                      active, n_active, M, D, L, eps, delta, radii):
    """End of a round of a stump: VE with eq. (3), then AE with eq. (4) on the cells (i, x_i).

    As in Algorithm 4 (line 11), AE runs on the cell of the value each remaining variable takes
    in the current context.

    Returns the number of variables left in S_c.
    """
    width = min(inS.shape[1], M)
    return round_end(x, s, vars_, n_vars, inS, T, W, Rt, T1, W1, R1, A, union, best_var,
                     active, n_active, M, D, L, eps, delta, radii,
                     *round_scratch(width, active.shape[0]))


@njit(cache=True)
def round_scratch(width, K):
    """Work arrays of :func:`round_end`, allocated once per event rather than once per round."""
    return (np.empty(width), np.empty(width), np.empty(width), np.empty(K), np.empty(K, np.int64),
            np.empty(width, np.int64))


@njit(cache=True)
def round_end(x, s, vars_, n_vars, inS, T, W, Rt, T1, W1, R1, A, union, best_var,
              active, n_active, M, D, L, eps, delta, radii, top0, top1, mu, means, counts,
              n_left):
    """:func:`eliminate_in_slot` with its work arrays given (see :func:`round_scratch`)."""
    n = n_vars[s]
    n_before = n
    K = active.shape[0]
    width = min(inS.shape[1], M)
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
        top0[:] = -np.inf
        top1[:] = -np.inf
        for k in range(K):
            if active[k] and union[s, k]:
                inv_w = 1.0 / W[s, k]
                mean_k = Rt[s, k] * inv_w
                row = R1[s, k]
                for i in range(width):
                    value1 = row[i] * inv_w
                    top1[i] = max(top1[i], value1)
                    top0[i] = max(top0[i], mean_k - value1)
        best_j = 0
        for j in range(n):
            i = vars_[s, j]
            mu[j] = top0[i] + top1[i]
            if mu[j] > mu[best_j]:
                best_j = j
        radius = variable_radius(t_min, n_active, M, delta, D, L)
        kept = 0
        best_j_new = 0
        for j in range(n):
            # eq. (3): eliminate i when mu^{i'} - mu^i + eps >= radius (never i' itself)
            if j == best_j or mu[best_j] - mu[j] + eps < radius:
                if j == best_j:
                    best_j_new = kept
                vars_[s, kept] = vars_[s, j]
                kept += 1
            else:
                inS[s, vars_[s, j]] = False
        n_vars[s] = kept
        n = kept
        best_var[s] = vars_[s, best_j_new]
    elif best_var[s] < 0 and n > 0:
        best_var[s] = vars_[s, 0]
    # AE for each remaining variable on its observed value (Algorithm 4, lines 9-12). Eq. (4)
    # compares two remaining actions of a cell, so a cell with one action left (most cells once
    # a path has learned) cannot lose any: counting them first, for all the variables at once
    # (actions outside, variables inside: SIMD), spares their means, the cost of AE.
    n_left[:width] = 0
    for k in range(K):
        if active[k]:
            a0, a1 = A[s, k, 0], A[s, k, 1]
            for i in range(width):  # branch-free: a1 where x_i = 1, a0 where x_i = 0
                one = x[i] != 0
                n_left[i] += (a1[i] & one) | (a0[i] & (not one))
    changed = n != n_before
    for j in range(n):
        i = vars_[s, j]
        if n_left[i] < 2:
            continue
        v = x[i]
        # cell (i, v) of action k: count and weight of the plays of k with x_i = v (v = 0 is
        # the total minus v = 1), conditional mean R / W
        best = -1
        best_mean = -np.inf
        for k in range(K):
            counts[k] = 0
            if A[s, k, v, i] and active[k]:
                if v == 1:
                    t, w, r = T1[s, k, i], W1[s, k, i], R1[s, k, i]
                else:
                    t = T[s, k] - T1[s, k, i]
                    w = W[s, k] - W1[s, k, i]
                    r = Rt[s, k] - R1[s, k, i]
                if t > 0:
                    counts[k] = t
                    means[k] = r / w
                    if means[k] > best_mean:
                        best, best_mean = k, means[k]
        if best < 0:
            continue
        best_radius = cached_radius(counts[best], radii, n_active, delta, L)
        for k in range(K):
            if k != best and counts[k] > 0:
                # eq. (4): mu_k' - mu_k + eps >= r(t_k') + r(t_k)  (= 2 r(t) for equal counts);
                # the first test skips the logarithm when even r(t_k) = 0 would not do
                gap = best_mean - means[k] + eps
                if gap >= best_radius and gap >= best_radius + cached_radius(
                        counts[k], radii, n_active, delta, L):
                    A[s, k, v, i] = False
                    changed = True
    if not changed:
        return n
    # remaining actions of the path: an action leaves the draw only once it is eliminated for
    # every value of every remaining variable (sec. 3.4)
    for k in range(K):
        union[s, k] = False
        for v in range(2):
            row = A[s, k, v]
            for i in range(width):
                if row[i] and inS[s, i]:
                    union[s, k] = True
                    break
    return n


@njit(cache=True)
def learn_event(x, k, y, w, roots, node_kind, node_var, node_child, node_ref, tree_eps, tree_depth,
                vars_, n_vars, inS, T, W, Rt, T1, W1, R1, A, union, slot_n, best_var,
                leaf_T, leaf_W, leaf_R, leaf_A, active, n_active, M, delta, radii, ready, paths,
                n_paths):
    """Algorithm 6, lines 9-21 for one event: update every tree's path with (x, k, y, w).

    Fills ``ready`` with the nodes whose stump has one variable left (lines 16-20, done by the
    caller) and returns how many there are. ``paths[:n_paths]``: the nodes of the first trees'
    paths c_theta(x), if the caller has them (``decide`` on the same x, no learning since:
    the same trees, so the same nodes); the others are found here.
    """
    L = roots.shape[0]
    wy = w * y
    n_ready = 0
    capacity = inS.shape[1]
    width = min(capacity, M)
    scratch = round_scratch(width, active.shape[0])
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
            node = find_path(x, roots[theta], node_kind, node_var, node_child)
        if node_kind[node] == SLOT:
            s = node_ref[node]
            T[s, k] += 1
            W[s, k] += w
            Rt[s, k] += wy
            slot_n[s] += 1
            # VE lines 2-5 and AE line 2, for the played action and the variables x sets
            if dense:  # the whole row, SIMD (x + 0.0 is x: these sums are never -0.0)
                t1, w1, r1, in_s = T1[s, k], W1[s, k], R1[s, k], inS[s]
                for i in range(width):
                    m = (x[i] != 0) & in_s[i]
                    t1[i] += m
                    w1[i] += w if m else 0.0
                    r1[i] += wy if m else 0.0
            else:
                for a in range(n_ones):
                    i = ones[a]
                    if inS[s, i]:
                        T1[s, k, i] += 1
                        W1[s, k, i] += w
                        R1[s, k, i] += wy
            # "if k = LastAction(A)": with random draws, a round is n_active plays of the path
            if slot_n[s] % n_active == 0:
                left = round_end(x, s, vars_, n_vars, inS, T, W, Rt, T1, W1, R1, A, union,
                                 best_var, active, n_active, M, tree_depth[theta], L,
                                 tree_eps[theta], delta, radii, *scratch)
                if left <= 1:
                    ready[n_ready] = node
                    n_ready += 1
        else:
            l = node_ref[node]
            var = node_var[node]
            v = x[var] if var >= 0 else 0
            leaf_T[l, v, k] += 1
            leaf_W[l, v, k] += w
            leaf_R[l, v, k] += wy
            eliminate_actions(leaf_T[l, v], leaf_W[l, v], leaf_R[l, v], leaf_A[l, v], active,
                              n_active, tree_eps[theta], L, delta, radii)
    return n_ready


@njit(cache=True)
def learn_events(X, n_vars, ks, ys, ws, start, roots, node_kind, node_var, node_child, node_ref,
                 tree_eps, tree_depth, vars_, n_vars_s, inS, T, W, Rt, T1, W1, R1, A, union,
                 slot_n, best_var, leaf_T, leaf_W, leaf_R, leaf_A, active, n_active, delta, radii,
                 ready):
    """:func:`learn_event` for events ``start, start + 1, ...`` (rows of X, padded with zeros
    past their ``n_vars``) until one leaves stumps to resolve.

    Returns ``(next event, number of nodes in ready)``; the caller resolves them and goes on.
    """
    no_paths = np.empty(0, np.int64)
    for j in range(start, X.shape[0]):
        n_ready = learn_event(X[j], ks[j], ys[j], ws[j], roots, node_kind, node_var, node_child,
                              node_ref, tree_eps, tree_depth, vars_, n_vars_s, inS, T, W, Rt, T1,
                              W1, R1, A, union, slot_n, best_var, leaf_T, leaf_W, leaf_R, leaf_A,
                              active, n_active, n_vars[j], delta, radii, ready, no_paths, 0)
        if n_ready:
            return j + 1, n_ready
    return X.shape[0], 0


@njit(cache=True)
def leaf_vote(x, node, node_var, node_ref, leaf_A, active):
    """The one action left in the cell of leaf ``node`` for x (its learning is finished), or -1."""
    l = node_ref[node]
    v = x[node_var[node]] if node_var[node] >= 0 else 0
    last = -1
    for k in range(active.shape[0]):
        if leaf_A[l, v, k] and active[k]:
            if last >= 0:
                return -1
            last = k
    return last


@njit(cache=True)
def paths_status(x, roots, node_kind, node_var, node_child, node_ref, union, leaf_A, active,
                 explore, votes, paths):
    """Algorithm 6, lines 4-6 with sec. 5's draw: returns the number of paths still exploring.

    ``explore[k]`` is set for the remaining actions of the exploring paths; ``votes[k]`` counts
    the finished paths (one remaining action) voting for k; ``paths[theta]`` is the node of
    tree theta's path (for :func:`learn_event`).
    """
    K = active.shape[0]
    exploring = 0
    for theta in range(roots.shape[0]):
        node = find_path(x, roots[theta], node_kind, node_var, node_child)
        paths[theta] = node
        if node_kind[node] == SLOT:
            s = node_ref[node]
            exploring += 1
            for k in range(K):
                if union[s, k] and active[k]:
                    explore[k] = True
        else:
            vote = leaf_vote(x, node, node_var, node_ref, leaf_A, active)
            if vote >= 0:
                votes[vote] += 1
            else:
                exploring += 1
                l = node_ref[node]
                v = x[node_var[node]] if node_var[node] >= 0 else 0
                for k in range(K):
                    if leaf_A[l, v, k] and active[k]:
                        explore[k] = True
    return exploring


@njit(cache=True)
def finished_actions(x, roots, node_kind, node_var, node_child, node_ref, leaf_A, active, out):
    """``out[theta]``: the one action left on tree theta's path for x (a finished path, which
    votes in :func:`decide_probabilities`), or -1 while the path is still exploring."""
    for theta in range(roots.shape[0]):
        node = find_path(x, roots[theta], node_kind, node_var, node_child)
        out[theta] = -1
        if node_kind[node] != SLOT:
            out[theta] = leaf_vote(x, node, node_var, node_ref, leaf_A, active)


@njit(cache=True)
def greedy_actions(x, roots, node_kind, node_var, node_child, node_ref, T, W, Rt, T1, W1, R1, A,
                   best_var, vars_, leaf_T, leaf_W, leaf_R, leaf_A, active, allowed, out):
    """``out[theta]``: the best remaining allowed action of tree theta's path by its estimates.

    An exploring stump uses its current best variable i' (the argmax of mu^i at its last round).
    """
    K = active.shape[0]
    for theta in range(roots.shape[0]):
        node = find_path(x, roots[theta], node_kind, node_var, node_child)
        best = -1
        best_mean = -np.inf
        if node_kind[node] == SLOT:
            s = node_ref[node]
            i = best_var[s]
            if i < 0:
                i = vars_[s, 0]
            v = x[i]
            for k in range(K):
                if A[s, k, v, i] and active[k] and allowed[k]:
                    if v == 1:
                        wk, rk = W1[s, k, i], R1[s, k, i]
                    else:
                        wk, rk = W[s, k] - W1[s, k, i], Rt[s, k] - R1[s, k, i]
                    mean = rk / wk if wk > 0 else 0.0
                    if mean > best_mean:
                        best, best_mean = k, mean
        else:
            l = node_ref[node]
            var = node_var[node]
            v = x[var] if var >= 0 else 0
            for k in range(K):
                if leaf_A[l, v, k] and active[k] and allowed[k]:
                    wk = leaf_W[l, v, k]
                    mean = leaf_R[l, v, k] / wk if wk > 0 else 0.0
                    if mean > best_mean:
                        best, best_mean = k, mean
        out[theta] = best


@njit(cache=True)
def decide_probabilities(x, roots, node_kind, node_var, node_child, node_ref, union, leaf_A,
                         active, candidates, all_finished, probs, drawn, order, paths):
    """The forest's probability for each candidate action (sec. 5's version of Algorithm 6).

    ``candidates[j]`` is an action index, or -1 for an action never learned about (it counts as
    exploring). Fills ``probs``, ``drawn`` (the positions of the candidates the exploring paths
    draw from, the pool, in order) and ``order`` (ranking: probability, then votes, then
    position) and ``paths`` (each tree's node for x), and returns ``(share, winner, n_pool)``:
    the probability of drawing from the pool instead of playing the vote winner (a position, -1
    if no finished path votes for a candidate), and the size of the pool.
    """
    K = active.shape[0]
    explore = np.zeros(K, np.bool_)
    votes = np.zeros(K, np.int64)
    exploring = paths_status(x, roots, node_kind, node_var, node_child, node_ref, union, leaf_A,
                             active, explore, votes, paths)
    if roots.shape[0] == 0:  # warm-up: every root stump would draw among all actions
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
