"""The arrays of a Bandit Forest as named structures, one name per array in the paper's words.

The compiled kernels (:mod:`online.bandit.kernels`) take these NamedTuples instead of walls of
positional arrays; numba types a NamedTuple of arrays as a tuple, so ``slots.T[s, k]`` compiles
to the same code as an array argument. They are built in one place each: :class:`Nodes`,
:class:`Slots` and :class:`Leaves` by :class:`~online.bandit.storage.ForestStorage` (whenever
it reallocates), :class:`Forest` by :func:`forest_arrays`.

Notation (Algorithm 6): for an exploring path c (a *slot*, a decision stump still selecting its
variable), ``T[s, k]`` = t_{c,k}; ``W[s, k]`` = sum of the IPS weights of those plays;
``R[s, k]`` = sum of weight * reward; ``T1[s, k, i]``, ``W1[s, k, i]``, ``R1[s, k, i]`` = the
same restricted to x_i = 1. The x_i = 0 parts are the differences (``T - T1``, ...), so an event
only touches the variables it sets: contexts are sparse (one-hot categories, one bin out of
five). ``S[s, :n_S[s]]``: the variables still in S_c, packed; ``in_S[s, i]``: i is in S_c;
``A[s, k, v, i]``: action k is still in A_{c,i,v} (variables innermost, as in ``T1``);
``union[s, k]``: k is in some A_{c,i,v} of a remaining variable i (the actions the path
draws); ``best_var[s]``: i', the argmax of mu^i at the stump's last round. A *leaf* (depth
D_theta, variable selected) keeps the same sums for its variable only: ``leaves.T[l, v, k]``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

SLOT = 0  # a decision stump still selecting its variable (VE) and its actions (AE)
SPLIT = 1  # a stump that selected its variable and was split into two paths
LEAF = 2  # a stump at depth D_theta (or with no variable left): action selection only


class Nodes(NamedTuple):
    """The node pool of every tree (one row per node)."""

    kind: np.ndarray  # SLOT, SPLIT or LEAF
    var: np.ndarray  # the variable a SPLIT or LEAF tests (-1: none)
    child: np.ndarray  # [n, v]: the child of a SPLIT for x_var = v
    ref: np.ndarray  # the node's slot (SLOT) or leaf (LEAF)
    depth: np.ndarray  # the root stump is depth 1
    parent: np.ndarray
    tree: np.ndarray  # theta


class Slots(NamedTuple):
    """The statistics of the exploring stumps (module docstring for the notation)."""

    S: np.ndarray
    n_S: np.ndarray
    in_S: np.ndarray
    T: np.ndarray
    W: np.ndarray
    R: np.ndarray
    T1: np.ndarray
    W1: np.ndarray
    R1: np.ndarray
    A: np.ndarray
    union: np.ndarray
    plays: np.ndarray  # plays of the path since it was created (a round is n_active plays)
    best_var: np.ndarray


class Leaves(NamedTuple):
    """The statistics of the stumps at maximal depth: ``[l, v, k]`` for x_var = v."""

    T: np.ndarray
    W: np.ndarray
    R: np.ndarray
    A: np.ndarray


class Forest(NamedTuple):
    """Everything the kernels read or update: the trees' roots and theta, nodes, slots, leaves."""

    roots: np.ndarray  # the root node of tree theta
    epsilon: np.ndarray  # epsilon_theta
    max_depth: np.ndarray  # D_theta
    nodes: Nodes
    slots: Slots
    leaves: Leaves
    active: np.ndarray  # action k is in the inventory


class Bound(NamedTuple):
    """What the thresholds of eqs. (3)-(4) depend on besides the counts and theta."""

    n_active: int  # K, the actions in the inventory
    M: int  # the binary variables (of the event being learned)
    delta: float
    radii: np.ndarray  # action_radius(t) for small t at this K (see kernels.radius_table)


def forest_arrays(roots, epsilon, max_depth, store) -> Forest:
    """The :class:`Forest` of the trees ``roots`` (with their theta) over ``store``'s arrays."""
    return Forest(roots, epsilon, max_depth, store.nodes, store.slots, store.leaves, store.active)


def plain(forest: Forest) -> tuple:
    """``forest`` as nested plain tuples, what the kernels' entry points are given: numba's
    dispatcher types a plain tuple of arrays in C, a NamedTuple in Python (~6 us a call, more
    than a stump's round); :func:`as_forest` names the fields again inside."""
    return (forest.roots, forest.epsilon, forest.max_depth, tuple(forest.nodes),
            tuple(forest.slots), tuple(forest.leaves), forest.active)


@njit(cache=True)
def as_forest(t):
    """The :class:`Forest` of :func:`plain`'s tuple (or of a Forest: then the same)."""
    return Forest(t[0], t[1], t[2], Nodes(*t[3]), Slots(*t[4]), Leaves(*t[5]), t[6])
