"""The arrays of the MCTS-IS search (:mod:`online.interactions.search`) as named structures.

The compiled search takes these NamedTuples instead of walls of positional arrays: the two node
tables of :mod:`online.interactions.fdt` (:class:`DataNodes`, :class:`FeatureNodes`, one field
per column, same names), the samples, the parameters and the work arrays of one sample. Inside
a kernel, data node column c is the local ``d<c>`` and feature node column c ``f<c>``
(``dV``, ``dfstart``, ``fsigma``, ...): read once per call, not once per access.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from online.interactions.fdt import FDT


class DataNodes(NamedTuple):
    """The data node table's columns (:data:`~online.interactions.fdt.DATA_COLUMNS`); inside a
    kernel, column c is the local ``d<c>`` (``dV``, ``dfstart``, ...)."""

    V: np.ndarray
    B: np.ndarray
    s: np.ndarray
    parent: np.ndarray
    cat: np.ndarray
    depth: np.ndarray
    fstart: np.ndarray
    fcount: np.ndarray
    tree: np.ndarray


class FeatureNodes(NamedTuple):
    """The feature node table's columns (:data:`~online.interactions.fdt.FEATURE_COLUMNS`);
    inside a kernel, column c is the local ``f<c>`` (``fV``, ``fsigma``, ...)."""

    V: np.ndarray
    sigma: np.ndarray
    field: np.ndarray
    parent: np.ndarray
    cstart: np.ndarray
    ccount: np.ndarray
    sumV: np.ndarray
    nabove: np.ndarray


class Tables(NamedTuple):
    """The N_T FDTs: their roots n_r and the two node tables."""

    roots: np.ndarray
    data: DataNodes
    features: FeatureNodes


class Params(NamedTuple):
    """The model's parameters the search reads (``max_depth`` -1: none)."""

    c_p: float
    v: float
    kappa: float
    c_f: float
    lam: float
    grace: float
    max_depth: int
    max_nodes: int


class Samples(NamedTuple):
    """The rows to learn: category codes (rows x fields), y, and K_i when row r is learned."""

    codes: np.ndarray
    y: np.ndarray
    K_rows: np.ndarray


class Work(NamedTuple):
    """Work arrays of one sample (path, excluded feature nodes, growths), sized for T trees and
    F fields; they also carry phase A's results across a resumed call."""

    path_d: np.ndarray  # [t, level] the data nodes of SN_t
    path_f: np.ndarray  # [t, level] the feature nodes between them
    support: np.ndarray  # [t, level] the support of eq. (6)
    plen: np.ndarray  # [t] nodes on the path
    at_leaf: np.ndarray  # [t] the path ends at a leaf (to expand)
    best: np.ndarray  # [t] eq. (8)'s argmin at this level; phase B: the leaves to expand
    n_unv: np.ndarray  # [t] never-selected feature nodes; phase B: the leaves' trees
    ex: np.ndarray  # tree, level, feature node, child data node of the excluded ones
    grow: np.ndarray  # feature node, new block start
    err: np.ndarray
    powers: np.ndarray
    counts: np.ndarray  # N_EX, N_GROW, NEED_D, NEED_F, N_EXPAND, SMALLEST
    alive: np.ndarray
    is_new: np.ndarray
    tmp: np.ndarray
    on_path: np.ndarray  # [field]


class Scratch:
    """The :class:`Work` of T trees and F fields (``shape``), kept by the model between calls."""

    def __init__(self, n_trees: int, n_fields: int):
        T, F = n_trees, n_fields
        L = F + 1  # n_r and at most one data node per field
        E = T * F * (F + 1) // 2 + 1  # excluded feature nodes: at most F - level per level
        self.shape = (T, F)
        self.work = Work(
            path_d=np.empty((T, L), dtype=np.int64),
            path_f=np.empty((T, L), dtype=np.int64),
            support=np.empty((T, L)),
            plen=np.empty(T, dtype=np.int64),
            at_leaf=np.empty(T, dtype=np.bool_),
            best=np.empty(T, dtype=np.int64),
            n_unv=np.empty(T, dtype=np.int64),
            ex=np.empty((E, 4), dtype=np.int64),
            grow=np.empty((T * L + E, 2), dtype=np.int64),
            err=np.empty(L),
            powers=np.empty(L),
            counts=np.zeros(6, dtype=np.int64),
            alive=np.empty(T, dtype=np.bool_),
            is_new=np.empty(T, dtype=np.bool_),
            tmp=np.empty(T, dtype=np.int64),
            on_path=np.empty(F, dtype=np.bool_),
        )
        self._tables: tuple = ((), ())  # (what they were made from, the plain Tables)

    def tables(self, fdt: FDT) -> tuple:
        """:func:`plain` of :func:`tables_of`, cached until a table grows or a tree is added."""
        source = (fdt.roots, fdt.d.rows, fdt.f.rows)
        made_from, tables = self._tables
        if len(made_from) != 3 or any(a is not b for a, b in zip(made_from, source)):
            tables = plain(tables_of(fdt))
            self._tables = (source, tables)
        return tables


def plain(tables: Tables) -> tuple:
    """``tables`` as nested plain tuples: numba's dispatcher types a plain tuple of arrays in C,
    a NamedTuple in Python (microseconds a call, and ``learn_one`` calls once per sample)."""
    return tables.roots, tuple(tables.data), tuple(tables.features)


def tables_of(fdt: FDT) -> Tables:
    """The :class:`Tables` of ``fdt`` (views of its columns: rebuilt after a table grows)."""
    D, F = fdt.d, fdt.f
    return Tables(fdt.roots, DataNodes(*(getattr(D, c) for c in DataNodes._fields)),
                  FeatureNodes(*(getattr(F, c) for c in FeatureNodes._fields)))
