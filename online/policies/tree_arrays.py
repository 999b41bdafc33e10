"""A tree ensemble as flat numpy arrays, evaluated by a compiled kernel (no Python per tree).

``CompiledEnsemble`` holds several regression models (one per action in the tree-ensemble
policy), each a sum of trees, in LightGBM's own node layout so that the kernel follows LightGBM's
decision rule exactly (``Tree::NumericalDecision`` / ``CategoricalDecision``):

- an internal node has a feature, a threshold and a ``decision_type`` byte (bit 0: categorical,
  bit 1: missing values go left, bits 2-3: the missing type 0 none / 1 zero / 2 NaN); a child
  index ``c >= 0`` is an internal node of the same tree, ``c < 0`` is the leaf ``~c``;
- numerical: NaN counts as 0.0 unless the missing type is NaN; missing values (NaN for type
  NaN, |v| <= 1e-35 for type zero) follow the default direction; else ``v <= threshold`` goes
  left;
- categorical: the value cast to an integer (toward zero) goes left when its bit is set in the
  node's bitset (``cat_threshold[cat_boundaries[i]:cat_boundaries[i+1]]``, 32 categories per
  word, ``i = int(threshold)``); NaN, a negative integer or one past the bitset goes right;
- a model's prediction is the sum of its trees' leaves (LightGBM folds the initial score into
  the first tree and the learning rate into the leaves).

The kernel scores most trees with QuickScorer (Lucchese et al., SIGIR 2015: per feature, the
nodes a value makes false, as bit masks over each tree's leaves) and walks the others root to
leaf; see "the kernel's layout" below.

The arrays come from LightGBM's text model format (``Booster.model_to_string()``), whose
per-tree lines are these vectors: parsing them is a few numpy conversions per tree, no JSON
tree walk. A feature index beyond the context vector's length reads as missing (NaN): the
context may have fewer columns than the window the trees were fitted on. Stored as arrays plus
JSON metadata (``to_state`` / ``from_state``), never pickled.
"""

from __future__ import annotations

import hashlib
import threading
import weakref
from dataclasses import dataclass
from typing import NamedTuple

import numba
import numpy as np
from numba.cpython.unsafe.numbers import trailing_zeros

__all__ = ["CompiledEnsemble", "parse_lightgbm"]

FORMAT = "grove.compiled-ensemble"
VERSION = 1

# LightGBM's decision_type bits (include/LightGBM/tree.h)
CATEGORICAL_MASK = 1
DEFAULT_LEFT_MASK = 2
MISSING_NONE, MISSING_ZERO, MISSING_NAN = 0, 1, 2
ZERO_THRESHOLD = 1e-35

_ARRAYS = ("model_trees", "tree_nodes", "tree_leaves", "tree_cats", "feature", "threshold",
           "decision_type", "left", "right", "leaf_value", "cat_boundaries", "cat_threshold")

#: ensembles read from a state and alive, by their arrays' digest: the next state holding the
#: same trees takes their layout (see ``CompiledEnsemble.from_state``)
_LOADED: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_LOADED_LOCK = threading.Lock()


@dataclass
class CompiledEnsemble:
    """``n_models`` sums of trees in flat arrays (see the module doc for the node layout).

    model m owns trees ``model_trees[m]:model_trees[m+1]``; tree t owns internal nodes
    ``tree_nodes[t]:tree_nodes[t+1]``, leaves ``tree_leaves[t]:tree_leaves[t+1]`` and bitsets
    ``tree_cats[t]:tree_cats[t+1]`` (rows of ``cat_boundaries``, local to the tree's words).
    """

    model_trees: np.ndarray  # int64 (n_models + 1)
    tree_nodes: np.ndarray  # int64 (n_trees + 1)
    tree_leaves: np.ndarray  # int64 (n_trees + 1)
    tree_cats: np.ndarray  # int64 (n_trees + 1): offsets into cat_boundaries
    feature: np.ndarray  # int32 (n_nodes)
    threshold: np.ndarray  # float64 (n_nodes)
    decision_type: np.ndarray  # uint8 (n_nodes)
    left: np.ndarray  # int32 (n_nodes), local to the tree
    right: np.ndarray  # int32 (n_nodes)
    leaf_value: np.ndarray  # float64 (n_leaves)
    cat_boundaries: np.ndarray  # int64: global word offsets into cat_threshold
    cat_threshold: np.ndarray  # uint32 words

    def __post_init__(self):
        self._layout: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def _blob(self) -> tuple[np.ndarray, np.ndarray]:
        """The kernels' copy of the arrays (see ``pack``), in one buffer: derived, never stored.
        Made by ``concatenate`` and ``from_state`` (a refit's or a loader's thread), so that a
        decision never waits for it; the per-action parts a refit concatenates never need it."""
        if self._layout is None:
            self._layout = to_blob(pack(self))
        return self._layout

    @property
    def kernel_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(buffer, index): what a compiled caller passes on to :func:`score_models`."""
        return self._blob

    @property
    def _packed(self) -> Packed:
        return from_blob(*self._blob)

    def laid_out(self) -> CompiledEnsemble:
        """This ensemble, its kernels' layout made now rather than at its first prediction."""
        self._blob  # noqa: B018 (the property makes it)
        return self

    @classmethod
    def empty(cls, n_models: int = 0) -> CompiledEnsemble:
        """``n_models`` models without trees (each predicts 0)."""
        z = np.zeros(1, np.int64)
        return cls(np.zeros(n_models + 1, np.int64), z, z.copy(), z.copy(),
                   np.zeros(0, np.int32), np.zeros(0), np.zeros(0, np.uint8),
                   np.zeros(0, np.int32), np.zeros(0, np.int32), np.zeros(0),
                   np.zeros(0, np.int64), np.zeros(0, np.uint32))

    @property
    def n_models(self) -> int:
        return len(self.model_trees) - 1

    @property
    def n_trees(self) -> int:
        return len(self.tree_nodes) - 1

    def nbytes(self) -> int:
        return sum(getattr(self, name).nbytes for name in _ARRAYS)

    @classmethod
    def concatenate(cls, parts: list[CompiledEnsemble]) -> CompiledEnsemble:
        """The models of ``parts`` one after the other (offsets shifted)."""
        if not parts:
            return cls.empty()
        model_trees, tree_nodes, tree_leaves, tree_cats, cat_bounds = [np.zeros(1, np.int64)], \
            [np.zeros(1, np.int64)], [np.zeros(1, np.int64)], [np.zeros(1, np.int64)], []
        nt = nn = nl = nc = nw = 0
        for p in parts:
            model_trees.append(p.model_trees[1:] + nt)
            tree_nodes.append(p.tree_nodes[1:] + nn)
            tree_leaves.append(p.tree_leaves[1:] + nl)
            tree_cats.append(p.tree_cats[1:] + nc)
            cat_bounds.append(p.cat_boundaries + nw)
            nt, nn, nl = nt + p.n_trees, nn + len(p.feature), nl + len(p.leaf_value)
            nc, nw = nc + len(p.cat_boundaries), nw + len(p.cat_threshold)
        cat = np.concatenate
        ensemble = cls(cat(model_trees), cat(tree_nodes), cat(tree_leaves), cat(tree_cats),
                       cat([p.feature for p in parts]), cat([p.threshold for p in parts]),
                       cat([p.decision_type for p in parts]), cat([p.left for p in parts]),
                       cat([p.right for p in parts]), cat([p.leaf_value for p in parts]),
                       cat(cat_bounds), cat([p.cat_threshold for p in parts]))
        return ensemble.laid_out()

    def select(self, models) -> CompiledEnsemble:
        """A new ensemble holding the given models, in that order."""
        return CompiledEnsemble.concatenate([self.model(int(m)) for m in models])

    def model(self, m: int) -> CompiledEnsemble:
        """Model ``m`` alone: an ensemble of one model, its own copy of the arrays."""
        t0, t1 = int(self.model_trees[m]), int(self.model_trees[m + 1])
        n0, n1 = int(self.tree_nodes[t0]), int(self.tree_nodes[t1])
        l0, l1 = int(self.tree_leaves[t0]), int(self.tree_leaves[t1])
        c0, c1 = int(self.tree_cats[t0]), int(self.tree_cats[t1])
        w0 = int(self.cat_boundaries[c0]) if c1 > c0 else 0
        w1 = int(self.cat_boundaries[c1 - 1]) if c1 > c0 else 0
        return CompiledEnsemble(
            np.array([0, t1 - t0], np.int64), self.tree_nodes[t0:t1 + 1] - n0,
            self.tree_leaves[t0:t1 + 1] - l0, self.tree_cats[t0:t1 + 1] - c0,
            self.feature[n0:n1].copy(), self.threshold[n0:n1].copy(),
            self.decision_type[n0:n1].copy(), self.left[n0:n1].copy(), self.right[n0:n1].copy(),
            self.leaf_value[l0:l1].copy(), self.cat_boundaries[c0:c1] - w0,
            self.cat_threshold[w0:w1].copy())

    def predict(self, x: np.ndarray, models: np.ndarray,
                out: np.ndarray | None = None) -> np.ndarray:
        """Prediction of each model in ``models`` (indices; -1 predicts 0) for one vector ``x``."""
        if out is None:
            out = np.empty(len(models))
        score_models(np.ascontiguousarray(x, np.float64), np.asarray(models, np.int64),
                     *self._blob, out)
        return out

    def predict_rows(self, X: np.ndarray, models: np.ndarray) -> np.ndarray:
        """``out[i, j]``: model ``models[j]``'s prediction (0 for -1) for row ``i`` of ``X``.

        Model by model, every row (one model's trees stay in the caches while the rows are
        walked through them); each entry is what :meth:`predict` gives for that row."""
        X = np.ascontiguousarray(np.atleast_2d(X), np.float64)
        out = np.empty((X.shape[0], len(models)))
        score_rows(X, np.asarray(models, np.int64), *self._blob, out)
        return out

    def to_state(self) -> dict:
        return {"format": FORMAT, "version": VERSION,
                **{name: getattr(self, name).copy() for name in _ARRAYS}}

    @classmethod
    def from_state(cls, state: dict) -> CompiledEnsemble:
        if state.get("format") != FORMAT or state.get("version") != VERSION:
            raise ValueError(f"not a {FORMAT} v{VERSION} state: "
                             f"{state.get('format')!r} v{state.get('version')!r}")
        template = cls.empty()
        ensemble = cls(**{name: np.asarray(state[name], getattr(template, name).dtype)
                          for name in _ARRAYS})
        # A process that serves an app loads each snapshot it publishes (every second), and
        # the trees change only at a refit: a snapshot whose arrays are those of an ensemble
        # still alive here takes that one's layout (derived from the arrays alone), rather than
        # laying them out again (0.29 s for an app of 38,137 trees; a digest of its 17 MB,
        # ~0.02 s). Held weakly: nothing is kept that its model no longer holds.
        key = ensemble.digest()
        with _LOADED_LOCK:
            twin = _LOADED.get(key)
        if twin is not None:  # (registered laid out)
            ensemble._layout = twin._layout
        else:
            ensemble.laid_out()
        with _LOADED_LOCK:  # the newest holder: the model it replaces is dropped next
            _LOADED[key] = ensemble
        return ensemble

    def digest(self) -> bytes:
        """A digest of the arrays (their lengths and bytes): equal for equal ensembles."""
        h = hashlib.blake2b(digest_size=20)
        for name in _ARRAYS:
            array = np.ascontiguousarray(getattr(self, name))
            h.update(len(array).to_bytes(8, "little"))
            h.update(array.data)
        return h.digest()


def parse_lightgbm(model_string: str) -> CompiledEnsemble:
    """One model (a regression booster's ``model_to_string()``) as a ``CompiledEnsemble``.

    One pass over the trees' lines sorts them by field; each field is then converted by one
    numpy call over all trees. What remains is the decimal text of the floats: LightGBM writes
    17 significant digits, and their correctly rounded conversion (Python's ``float``) is
    ~0.4 us a number. A threshold's text is converted once however often it repeats (a 0/1
    variable's every split has the same). A model of 100 trees of 63 leaves takes ~6 ms, most
    of it its leaf values (9 ms when each tree's lines went through a dict)."""
    section = model_string.split("end of trees", 1)[0]
    start = section.find("\nTree=")
    fields: dict[str, list[str]] = {name: [] for name in _TREE_FIELDS}
    for line in section[start:].split("\n") if start >= 0 else ():
        name, _, value = line.partition("=")
        if name in fields:
            fields[name].append(value)

    def integers(name: str, dtype) -> np.ndarray:
        # whitespace-separated decimal text; a one-leaf tree's empty line adds nothing
        return np.fromstring(" ".join(fields[name]), dtype, sep=" ")

    def floats(name: str, distinct: bool = False) -> np.ndarray:
        words = " ".join(fields[name]).split()
        if distinct:
            value = {word: float(word) for word in set(words)}
            return np.array([value[word] for word in words], np.float64)
        return np.array(list(map(float, words)), np.float64)

    n_leaves = integers("num_leaves", np.int64)
    n_cats = np.zeros(len(n_leaves), np.int64)
    cat_b = cat_threshold = np.zeros(0, np.int64)
    if fields["cat_boundaries"]:  # each tree's boundaries are local to its words: make global
        local = [np.fromstring(b, np.int64, sep=" ") for b in fields["cat_boundaries"]]
        n_cats[integers("num_cat", np.int64) > 0] = [len(b) for b in local]
        words = np.concatenate([[0], np.cumsum([b[-1] for b in local])[:-1]])
        cat_b = np.concatenate([b + w for b, w in zip(local, words)])
        cat_threshold = integers("cat_threshold", np.int64)

    def offsets(counts):
        return np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(np.int64)

    return CompiledEnsemble(
        np.array([0, len(n_leaves)], np.int64), offsets(n_leaves - 1), offsets(n_leaves),
        offsets(n_cats), integers("split_feature", np.int32), floats("threshold", True),
        integers("decision_type", np.uint8), integers("left_child", np.int32),
        integers("right_child", np.int32), floats("leaf_value"), cat_b,
        cat_threshold.astype(np.uint32))


#: the lines of LightGBM's text trees that ``parse_lightgbm`` reads
_TREE_FIELDS = ("num_leaves", "num_cat", "split_feature", "threshold", "decision_type",
                "left_child", "right_child", "leaf_value", "cat_boundaries", "cat_threshold")


# -- the kernel's layout ---------------------------------------------------------------------------
#
# Deciding scores 26 x 100 trees (Letter: 155k nodes + 157k leaves). A tree is scored one of two
# ways, chosen per tree when the ensemble is packed:
#
# QuickScorer (Lucchese, Nardini, Orlando, Perego, Tonellotto & Venturini, SIGIR 2015), for every
# tree of at most 64 leaves whose nodes are numerical with a threshold or categorical with a
# bitset of at most MAX_QUICK_CODES bits (every tree of the paper's streams and of contexts with
# a few categories). A tree's leaves are numbered left to right, and each node has a 64-bit
# mask with zeros on the leaves of its left subtree. A node that is false (the value goes right)
# rules those leaves out, so ANDing the masks of a tree's false nodes into an all-ones word leaves
# the exit leaf as the lowest set bit (the paper's Theorem 1). The false nodes are found per
# feature rather than per tree. The nodes are grouped by the copy of x they read (the slot,
# below) and sorted by threshold; the false ones (``threshold < v``; all of them when v is NaN)
# are a prefix of each group, found by a binary search. A tree's nodes with the same slot and
# threshold are false together and make one entry, their masks ANDed (a 0/1 variable tested at
# several nodes of a tree: Letter's 153k nodes make 108k entries). So a decision reads those
# prefixes (~30k entries on Letter, 18 bytes each) in order, with no data-dependent branch per
# entry, and then one leaf per tree: ~3x faster than the walk below on Letter's trees
# (bench/policies/README.md, "QuickScorer"). It reads every model's entries, so a request for
# a few of the models (learning one event, a model's prediction) walks their trees instead.
# A group with few thresholds and entries for many of its block's trees (a 0/1 variable: one
# threshold, Letter's groups hold entries for 29-73 % of the trees) is dense instead: per
# threshold, one word per tree of the block, the AND of the masks of the entries up to it
# (``_dense_groups``). A value then ANDs one such row into the trees' words, in order and
# without the entries' scattered stores: 1.9x faster on Letter's 2,600 trees
# (bench/policies/README.md, "Dense QuickScorer groups").
# A categorical node has no threshold to sort by, but the value's code says which nodes it makes
# false, so those are listed per code (``_categorical_entries``): one list per block of trees,
# feature and code, and one for any other value (NaN, negative, past every bitset).
#
# The walk, for the other trees (a categorical node with a longer bitset; a NaN threshold; more
# than 64 leaves). One tree at a time, root to leaf, a branch per step:
#
# - one 8-byte word per node *and* per leaf, each tree's in depth-first order: a node's left child
#   is the next word, its right child ``right`` words further; a leaf's word is its value;
# - a node's word: the slot of x it reads (bits 0-19), its threshold's index in ``thresholds``
#   (the ensemble's distinct thresholds, a table that stays in L1; bits 20-43), ``right``
#   (bits 44-61), whether the left / right child is a leaf (bits 62 / 63);
# - a categorical node (or one whose threshold is NaN) reads the slot ``SPECIAL``, and its node
#   index in the flat arrays in place of the threshold's: LightGBM's rule on the flat arrays.
#   Walking 4 trees together without data-dependent branches was an earlier kernel: 1.5-1.75x
#   slower on Letter's trees (bench/policies/README.md, "One tree at a time").
#
# Both read the same copies of x. A numerical node's missing-value rule is folded into the slot
# it reads: the kernel builds five copies of x per row (NaN kept, NaN -> -inf, NaN -> 0,
# "zero" -> NaN, "zero" -> -inf, see ``_VIEWS``), so every rule of ``Tree::NumericalDecision``
# becomes ``v <= threshold`` (NaN compares false: right; -inf compares true: left).
SLOT_BITS, INDEX_BITS, RIGHT_BITS = 20, 24, 18
SPECIAL = (1 << SLOT_BITS) - 1
LEFT_LEAF, RIGHT_LEAF = np.uint64(1 << 62), np.uint64(1 << 63)
# the copy of x a numerical node reads, by (missing type, default left)
_VIEWS = {(MISSING_NONE, False): 2, (MISSING_NONE, True): 2, (MISSING_NAN, False): 0,
          (MISSING_NAN, True): 1, (MISSING_ZERO, False): 3, (MISSING_ZERO, True): 4}
N_VIEWS = 5


class Packed(NamedTuple):
    """``CompiledEnsemble``'s arrays as the kernel reads them (see the comment above)."""

    model_trees: np.ndarray  # int64 (n_models + 1)
    roots: np.ndarray  # int64 (n_trees): each tree's first word (~word: a single leaf)
    words: np.ndarray  # uint64 (n_nodes + n_leaves)
    values: np.ndarray  # float64 view of words (the leaves' values)
    thresholds: np.ndarray  # float64: the distinct thresholds
    n_features: int  # columns of each copy of x (the copies are followed by a NaN slot)
    feature: np.ndarray  # the flat arrays, for the SPECIAL nodes
    threshold: np.ndarray
    decision_type: np.ndarray
    cat_row: np.ndarray  # int64 (n_nodes): the node's row of cat_boundaries (-1: numerical)
    cat_boundaries: np.ndarray
    cat_threshold: np.ndarray
    qs: Quick  # the trees QuickScorer scores


class Quick(NamedTuple):
    """QuickScorer's arrays (see the comment above): the nodes of the quick trees by block of
    65,536 trees (a tree is known by its 16-bit index in its block), then by the slot of the
    copies of x they read, then by increasing threshold: block b's nodes of slot k are
    ``slot_nodes[g]:slot_nodes[g+1]``, ``g = b * N_VIEWS * n_features + k``."""

    leaf0: np.ndarray  # int64 (n_trees): the tree's first leaf in ``leaves`` (-1: walked)
    leaves: np.ndarray  # float64: each quick tree's leaf values, left to right
    slot_nodes: np.ndarray  # int64 (blocks * N_VIEWS * n_features + 1)
    threshold: np.ndarray  # float64, per entry: a tree's nodes of one slot and one threshold
    tree: np.ndarray  # uint16: the entry's tree in its block (2 bytes: 1.1-1.2x faster than 4)
    mask: np.ndarray  # uint64: zeros on the leaves of the nodes' left subtrees
    cat_groups: np.ndarray  # int64 (groups, 4): block, feature, codes C, first row of cat_code
    cat_code: np.ndarray  # int64: per group, C + 1 rows (codes 0..C-1, then "any other value")
    cat_tree: np.ndarray  # uint16, per entry: a tree's nodes of one group false for one code
    cat_mask: np.ndarray  # uint64: their masks ANDed
    # the dense groups (their entries are not in ``threshold``, ``tree``, ``mask``): group g's
    # thresholds are ``level_threshold[level_start[g]:level_start[g+1]]`` (none: not dense),
    # ascending; the row of threshold l, ``dense[level_row[l]:]``, one word per tree of the
    # block: the AND of the masks of the group's entries of thresholds up to it
    level_start: np.ndarray  # int64 (blocks * N_VIEWS * n_features + 1)
    level_threshold: np.ndarray  # float64, per level
    level_row: np.ndarray  # int64, per level
    dense: np.ndarray  # uint64


class _Trees(NamedTuple):
    """The trees of a ``CompiledEnsemble`` in LightGBM's layout (its flat arrays)."""

    tree_nodes: np.ndarray
    tree_leaves: np.ndarray
    tree_cats: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    decision_type: np.ndarray
    left: np.ndarray
    right: np.ndarray
    leaf_value: np.ndarray


class _Layout(NamedTuple):
    """What ``_lay_out`` fills: the walk's words (``values``: the same memory as float64), each
    tree's root word, each node's row of ``cat_boundaries``; QuickScorer's masks (per
    node of the flat arrays) and leaves (left to right, from each tree's ``leaf0``)."""

    words: np.ndarray
    values: np.ndarray
    roots: np.ndarray
    cat_row: np.ndarray
    mask: np.ndarray
    leaf0: np.ndarray
    leaves: np.ndarray


MAX_QUICK_LEAVES = 64  # QuickScorer's masks are one 64-bit word
# a categorical node whose bitset has at most 2 words (codes 0-63) is QuickScorer's: the entries
# of a feature's nodes are at most (trees) x (codes + 1), 1.7 MB for 2,600 trees at 64 codes
MAX_QUICK_CODES = 64
TREE_BITS = 16  # QuickScorer's blocks of trees
# a group is dense (one row per threshold, one word per tree of its block) with at most this
# many thresholds and when its rows take at most 4 words per entry (entries * 4 >= levels *
# trees: the rows' bytes at most 1.8x its entries', 18 bytes each); Letter's groups (one
# threshold, entries for 29-73 % of the trees) are all dense, 0.8x the entries' bytes
DENSE_MAX_LEVELS = 4
_ALL = np.uint64(0xFFFFFFFFFFFFFFFF)
# The exit leaf, the lowest set bit's index, is LLVM's count of trailing zeros (one tzcnt
# instruction; numba's intrinsic). A de Bruijn multiply and a 64-entry table, the kernel's
# before the twenty-ninth session, took 1.3x as long warm and 1.6x after a 9 MB sweep had
# evicted the table (bench/policies/README.md, "The exit leaf in one instruction").


def pack(e: CompiledEnsemble) -> Packed:
    """The kernel's layout of ``e``'s arrays."""
    n_features = int(e.feature.max()) + 1 if len(e.feature) else 0
    numerical = (e.decision_type & CATEGORICAL_MASK) == 0
    thresholds = np.unique(np.concatenate([e.threshold[numerical & ~np.isnan(e.threshold)],
                                           [0.0]]))
    view = np.full(8, -1, np.int64)  # (decision_type >> 1) & 7 = missing type, default left
    for (missing, left), v in _VIEWS.items():
        view[(missing << 1) | left] = v
    node_view = view[(e.decision_type >> 1) & 7]
    special = ~numerical | np.isnan(e.threshold) | (node_view < 0)
    tree_of_node = np.repeat(np.arange(e.n_trees), np.diff(e.tree_nodes))
    cat_bits = np.zeros(len(e.feature), np.int64)  # a categorical node's bitset, in bits
    cat_rows = np.flatnonzero(~numerical)
    cat_rows = cat_rows[~np.isnan(e.threshold[cat_rows])]
    row = e.tree_cats[tree_of_node[cat_rows]] + e.threshold[cat_rows].astype(np.int64)
    cat_bits[cat_rows] = 32 * (e.cat_boundaries[row + 1] - e.cat_boundaries[row])
    quick_cat = (cat_bits > 0) & (cat_bits <= MAX_QUICK_CODES)
    # the trees QuickScorer takes: at most 64 leaves, every node numerical with a threshold or
    # categorical with a bitset of at most MAX_QUICK_CODES bits
    quick = np.diff(e.tree_leaves) <= MAX_QUICK_LEAVES
    quick[tree_of_node[special & ~quick_cat]] = False
    if (N_VIEWS * n_features >= SPECIAL or max(len(thresholds), len(e.feature)) >= 1 << INDEX_BITS
            or int(np.diff(e.tree_nodes).max(initial=0)) * 2 >= 1 << RIGHT_BITS
            or e.n_trees >= 1 << 31):
        raise ValueError(f"an ensemble too large for the kernel's words: {n_features} "
                         f"features, {len(e.feature)} nodes")
    words = np.zeros(len(e.feature) + len(e.leaf_value), np.uint64)
    out = _Layout(words, words.view(np.float64), np.empty(e.n_trees, np.int64),
                  np.full(len(e.feature), -1, np.int64), np.zeros(len(e.feature), np.uint64),
                  np.full(e.n_trees, -1, np.int64),
                  np.empty(int(np.diff(e.tree_leaves)[quick].sum())))
    trees = _Trees(e.tree_nodes, e.tree_leaves, e.tree_cats, e.feature, e.threshold,
                   e.decision_type, e.left, e.right, e.leaf_value)
    index = np.searchsorted(thresholds, e.threshold)  # each node's distinct threshold
    _lay_out(trees, index, view, n_features, quick, out)
    # QuickScorer's nodes, by block of trees, then slot, then threshold
    nodes = np.flatnonzero(quick[tree_of_node] & numerical)
    n_slots, tree = N_VIEWS * n_features, tree_of_node[nodes]
    group = (tree >> TREE_BITS) * n_slots + node_view[nodes] * n_features + e.feature[nodes]
    # one stable sort on (group, threshold's rank) keeps the flat order, by tree, among equals
    # (< 2^35 groups x < 2^24 thresholds: no overflow). Packing Letter's 2,501 trees takes
    # ~32 ms (the walk's layout alone took ~6 ms), in the refit or the snapshot's loader.
    order = np.argsort(group * len(thresholds) + index[nodes], kind="stable")
    nodes, group, tree = nodes[order], group[order], tree[order]
    threshold = e.threshold[nodes]
    # a tree's nodes of one slot and one threshold are false together: one entry, their masks
    # ANDed (a 0/1 variable's nodes in a tree: Letter's 153k nodes make 108k entries)
    new = np.ones(len(nodes), np.bool_)
    new[1:] = ((group[1:] != group[:-1]) | (tree[1:] != tree[:-1])
               | (threshold[1:] != threshold[:-1]))
    first = np.flatnonzero(new)
    mask = np.bitwise_and.reduceat(out.mask[nodes], first) if len(first) else out.mask[:0]
    group, tree, threshold = group[first], tree[first], threshold[first]
    n_groups = ((e.n_trees - 1 >> TREE_BITS) + 1) * n_slots
    dense = _dense_groups(group, tree, threshold, mask, n_groups, e.n_trees)
    sparse = dense.level_start[group + 1] == dense.level_start[group]
    group, tree, threshold, mask = group[sparse], tree[sparse], threshold[sparse], mask[sparse]
    qs = Quick(out.leaf0, out.leaves,
               np.searchsorted(group, np.arange(n_groups + 1)).astype(np.int64),
               threshold, (tree & (1 << TREE_BITS) - 1).astype(np.uint16), mask,
               *_categorical_entries(e, np.flatnonzero(quick[tree_of_node] & quick_cat),
                                     tree_of_node, cat_bits, out), *dense)
    return Packed(e.model_trees, out.roots, words, out.values, thresholds, n_features,
                  e.feature, e.threshold, e.decision_type, out.cat_row, e.cat_boundaries,
                  e.cat_threshold, qs)


class _Dense(NamedTuple):
    level_start: np.ndarray
    level_threshold: np.ndarray
    level_row: np.ndarray
    dense: np.ndarray


def _dense_groups(group: np.ndarray, tree: np.ndarray, threshold: np.ndarray, mask: np.ndarray,
                  n_groups: int, n_trees: int) -> _Dense:
    """The dense groups among QuickScorer's entries (sorted by group, then threshold; ``tree``:
    the entries' trees, ``n_groups`` groups over blocks of ``1 << TREE_BITS`` trees):
    ``Quick``'s ``level_start``, ``level_threshold``, ``level_row``, ``dense`` (see
    ``DENSE_MAX_LEVELS``).

    >>> g, t = np.array([0, 0, 0, 0, 1]), np.array([0, 1, 1, 2, 0])
    >>> thr = np.array([0.5, 0.5, 2.0, 2.0, 1.0])
    >>> m = np.array([6, 5, 3, 6, 6], np.uint64)
    >>> d = _dense_groups(g, t, thr, m, 2, 5)  # group 1, one entry for 5 trees: sparse
    >>> d.level_start.tolist(), d.level_threshold.tolist(), d.level_row.tolist()
    ([0, 2, 2], [0.5, 2.0], [0, 5])
    >>> [[int(w) if w != _ALL else "-" for w in row] for row in d.dense.reshape(2, 5)]
    [[6, 5, '-', '-', '-'], [6, 1, 6, '-', '-']]
    """
    counts = np.bincount(group, minlength=n_groups)
    new_level = np.ones(len(group), np.bool_)
    new_level[1:] = (group[1:] != group[:-1]) | (threshold[1:] != threshold[:-1])
    levels = np.bincount(group[new_level], minlength=n_groups)
    n_blocks = (n_trees - 1 >> TREE_BITS) + 1 if n_trees else 1
    block = np.arange(n_groups) // max(1, n_groups // n_blocks)
    block_trees = np.minimum(1 << TREE_BITS, n_trees - (block << TREE_BITS))
    chosen = (levels > 0) & (levels <= DENSE_MAX_LEVELS) & (counts * 4 >= levels * block_trees)
    level_start = np.concatenate([[0], np.cumsum(np.where(chosen, levels, 0))]).astype(np.int64)
    rows, thresholds, starts, at = [], [], [], 0
    bounds = np.concatenate([[0], np.cumsum(counts)])
    for g in np.flatnonzero(chosen).tolist():
        g0, g1 = bounds[g], bounds[g + 1]
        row = np.full(block_trees[g], _ALL, np.uint64)
        local = tree[g0:g1] & (1 << TREE_BITS) - 1
        for value in np.unique(threshold[g0:g1]).tolist():  # ascending: each row ANDs more
            mine = threshold[g0:g1] == value
            np.bitwise_and.at(row, local[mine], mask[g0:g1][mine])
            rows.append(row.copy())
            thresholds.append(value)
            starts.append(at)
            at += len(row)
    return _Dense(level_start, np.array(thresholds, np.float64), np.array(starts, np.int64),
                  np.concatenate(rows) if rows else np.zeros(0, np.uint64))


def _categorical_entries(e: CompiledEnsemble, nodes: np.ndarray, tree_of_node: np.ndarray,
                         cat_bits: np.ndarray, out: _Layout) -> tuple:
    """QuickScorer's entries of the categorical ``nodes`` (of quick trees): ``Quick``'s
    ``cat_groups, cat_code, cat_tree, cat_mask``, from the layout ``out`` (the nodes' masks
    and bitset rows, ``_lay_out``'s).

    A categorical node has no threshold to sort by, but a value's code picks the nodes it makes
    false: those whose bitset lacks the code, and all of them for a value that is NaN, negative
    or past every bitset of the feature (``_flat_decision``'s rule). So per block of trees and
    feature (a group, C codes: the longest bitset's bits), the entries are listed per code 0 ..
    C - 1 and for "any other value", a tree's nodes false for the same code ANDed into one."""
    tree = tree_of_node[nodes]
    feature = e.feature[nodes].astype(np.int64)
    n_f = int(feature.max(initial=0)) + 1
    keys, group = np.unique((tree >> TREE_BITS) * n_f + feature, return_inverse=True)
    codes = np.zeros(len(keys), np.int64)
    np.maximum.at(codes, group, cat_bits[nodes])
    first = np.concatenate([[0], np.cumsum(codes + 1)]).astype(np.int64)
    # bit c of each node's bitset (0 past its words), for c < its group's C
    start = e.cat_boundaries[out.cat_row[nodes]]
    n_words = (cat_bits[nodes] // 32)[:, None]
    w = np.arange(int(n_words.max(initial=0)))[None, :]
    words = np.where(w < n_words, e.cat_threshold[np.minimum(start[:, None] + w,
                                                             len(e.cat_threshold) - 1)], 0)
    bits = (words[:, :, None] >> np.arange(32, dtype=np.uint32)) & 1
    false = (bits.reshape(len(nodes), 32 * w.shape[1]) == 0) & (
        np.arange(32 * w.shape[1])[None, :] < codes[group][:, None])
    at, code = np.nonzero(false)
    rows = np.concatenate([first[group[at]] + code, first[group] + codes[group]])  # + "other"
    at = np.concatenate([at, np.arange(len(nodes))])
    entry_tree = tree[at]
    # by row, then tree: a row's entries are all codes' or all "other"'s, and each part lists
    # them in node order, which is tree order, so a stable sort by row alone gives that order;
    # on rows of 16 bits numpy's is a radix sort (3.5M entries of an inventory of articles:
    # 134 -> 29 ms, the same order), else the two keys' lexsort
    order = (np.argsort(rows.astype(np.uint16), kind="stable") if first[-1] < 1 << 16
             else np.lexsort((entry_tree, rows)))
    rows, entry_tree, masks = rows[order], entry_tree[order], out.mask[nodes[at[order]]]
    new = np.ones(len(rows), np.bool_)
    new[1:] = (rows[1:] != rows[:-1]) | (entry_tree[1:] != entry_tree[:-1])
    starts = np.flatnonzero(new)
    masks = np.bitwise_and.reduceat(masks, starts) if len(starts) else masks[:0]
    groups = np.column_stack([keys // n_f, keys % n_f, codes, first[:-1]])
    return (groups.astype(np.int64).ravel(),
            np.searchsorted(rows[starts], np.arange(first[-1] + 1)).astype(np.int64),
            (entry_tree[starts] & (1 << TREE_BITS) - 1).astype(np.uint16), masks)


# The kernels take the layout as one buffer of 8-byte words plus an index, not as ``Packed``:
# numba unboxes each array of a tuple argument on every call (~0.4 us an array: 7.3 us for
# ``Packed``'s 18), against ~0.9 us for the two. The parts, in order, with their dtypes:
_PARTS = (("model_trees", np.int64), ("roots", np.int64), ("words", np.uint64),
          ("thresholds", np.float64), ("feature", np.int32), ("threshold", np.float64),
          ("decision_type", np.uint8), ("cat_row", np.int64), ("cat_boundaries", np.int64),
          ("cat_threshold", np.uint32), ("qs.leaf0", np.int64), ("qs.leaves", np.float64),
          ("qs.slot_nodes", np.int64), ("qs.threshold", np.float64), ("qs.tree", np.uint16),
          ("qs.mask", np.uint64), ("qs.cat_groups", np.int64), ("qs.cat_code", np.int64),
          ("qs.cat_tree", np.uint16), ("qs.cat_mask", np.uint64),
          ("qs.level_start", np.int64), ("qs.level_threshold", np.float64),
          ("qs.level_row", np.int64), ("qs.dense", np.uint64))
_N_PARTS = len(_PARTS)


def to_blob(packed: Packed) -> tuple[np.ndarray, np.ndarray]:
    """``packed`` as one uint64 buffer and its index: each part's first word (then the end),
    each part's length, ``n_features``."""
    arrays = [np.ascontiguousarray(_field(packed, name), dtype) for name, dtype in _PARTS]
    words = [(a.nbytes + 7) // 8 for a in arrays]
    starts = np.concatenate([[0], np.cumsum(words)]).astype(np.int64)
    buf = np.zeros(int(starts[-1]), np.uint64)
    raw = buf.view(np.uint8)
    for a, start in zip(arrays, starts.tolist()):
        raw[8 * start:8 * start + a.nbytes] = a.view(np.uint8)
    index = np.concatenate([starts, [len(a) for a in arrays], [packed.n_features]])
    return buf, index.astype(np.int64)


def from_blob(buf: np.ndarray, index: np.ndarray) -> Packed:
    """The ``Packed`` view of a buffer from :func:`to_blob` (no copy)."""
    parts = {}
    for k, (name, dtype) in enumerate(_PARTS):
        parts[name] = buf[index[k]:index[k + 1]].view(dtype)[:index[_N_PARTS + 1 + k]]
    qs = Quick(*(parts[f"qs.{f}"] for f in Quick._fields))
    words = parts["words"]
    return Packed(parts["model_trees"], parts["roots"], words, words.view(np.float64),
                  parts["thresholds"], int(index[-1]), parts["feature"], parts["threshold"],
                  parts["decision_type"], parts["cat_row"], parts["cat_boundaries"],
                  parts["cat_threshold"], qs)


def _field(packed: Packed, name: str) -> np.ndarray:
    return getattr(packed.qs, name[3:]) if name.startswith("qs.") else getattr(packed, name)


@numba.njit(cache=True, nogil=True, inline="always")
def _unblob(buf, index):
    """``from_blob`` in the kernels: the parts in ``_PARTS``' order (QuickScorer's categorical
    ones as one tuple, ``cats``: groups, code rows, trees, masks; its dense groups' as another,
    ``dense``: level starts, thresholds, rows, words), then ``n_features``."""
    n = _N_PARTS + 1

    def part(k):
        return buf[index[k]:index[k + 1]]

    return (part(0).view(np.int64), part(1).view(np.int64), part(2),
            part(3).view(np.float64), part(4).view(np.int32)[:index[n + 4]],
            part(5).view(np.float64), part(6).view(np.uint8)[:index[n + 6]],
            part(7).view(np.int64), part(8).view(np.int64),
            part(9).view(np.uint32)[:index[n + 9]], part(10).view(np.int64),
            part(11).view(np.float64), part(12).view(np.int64), part(13).view(np.float64),
            part(14).view(np.uint16)[:index[n + 14]], part(15),
            (part(16).view(np.int64), part(17).view(np.int64),
             part(18).view(np.uint16)[:index[n + 18]], part(19)),
            (part(20).view(np.int64), part(21).view(np.float64), part(22).view(np.int64),
             part(23)), index[-1])


@numba.njit(cache=True)
def _lay_out(trees, index, view, n_features, quick, out):
    """Fill ``out`` (a ``_Layout``) from ``trees`` (a ``_Trees``): the walk's words of every
    tree, and QuickScorer's masks and leaves of the ``quick`` ones. ``index``: each node's
    row of the distinct thresholds, ``view``: the copy of x each missing-value rule reads."""
    tree_nodes, tree_leaves, tree_cats = trees.tree_nodes, trees.tree_leaves, trees.tree_cats
    feature, threshold, decision_type = trees.feature, trees.threshold, trees.decision_type
    left, right, leaf_value = trees.left, trees.right, trees.leaf_value
    words, values, roots, cat_row = out.words, out.values, out.roots, out.cat_row
    stack = np.empty(feature.shape[0] + 2, np.int64)  # child codes: c >= 0 node, c < 0 leaf ~c
    parent = np.empty_like(stack)
    first_leaf = np.empty_like(stack)  # QuickScorer: a node's first leaf (left to right)
    pos = 0  # the walk's next word
    n_quick = 0  # QuickScorer's leaves so far
    for t in range(tree_nodes.shape[0] - 1):
        n0, l0 = tree_nodes[t], tree_leaves[t]
        single = tree_nodes[t + 1] == n0
        if quick[t]:  # depth first, left child first: the leaves come left to right
            out.leaf0[t] = n_quick
            top = 0
            stack[0], parent[0] = (-1 if single else 0), -1
            while top >= 0:
                c, p = stack[top], parent[top]
                top -= 1
                if p >= 0:  # a right child: its parent's left subtree has ended
                    leaves = n_quick - first_leaf[p]  # < 64: the right subtree has one
                    ones = (np.uint64(1) << np.uint64(leaves)) - np.uint64(1)
                    out.mask[n0 + p] = ~(ones << np.uint64(first_leaf[p] - out.leaf0[t]))
                if c < 0:
                    out.leaves[n_quick] = leaf_value[l0 + ~c]
                    n_quick += 1
                else:
                    first_leaf[c] = n_quick
                    stack[top + 1], parent[top + 1] = right[n0 + c], c
                    stack[top + 2], parent[top + 2] = left[n0 + c], -1
                    top += 2
        roots[t] = ~pos if single else pos
        top = 0
        stack[0], parent[0] = (-1 if single else 0), -1
        while top >= 0:
            c, p = stack[top], parent[top]
            top -= 1
            if p >= 0:
                if pos == p + 1:
                    if c < 0:
                        words[p] |= LEFT_LEAF
                else:
                    words[p] |= np.uint64(pos - p) << np.uint64(SLOT_BITS + INDEX_BITS)
                    if c < 0:
                        words[p] |= RIGHT_LEAF
            if c < 0:
                values[pos] = leaf_value[l0 + ~c]
            else:
                i = n0 + c
                d = decision_type[i]
                v = view[(d >> 1) & 7] if (d & CATEGORICAL_MASK) == 0 else -1
                if v < 0 or np.isnan(threshold[i]):
                    slot, key = SPECIAL, i
                    if d & CATEGORICAL_MASK:
                        cat_row[i] = tree_cats[t] + np.int64(threshold[i])
                else:
                    slot, key = v * n_features + feature[i], index[i]
                words[pos] = np.uint64(slot) | (np.uint64(key) << np.uint64(SLOT_BITS))
                stack[top + 1], parent[top + 1] = right[i], pos
                stack[top + 2], parent[top + 2] = left[i], pos
                top += 2
            pos += 1


@numba.njit(cache=True, nogil=True, inline="always")
def _flat_decision(x, i, feature, threshold, decision_type, cat_row, cat_boundaries,
                   cat_threshold):
    """LightGBM's decision at node ``i`` of the flat arrays: True goes left."""
    f = feature[i]
    d = decision_type[i]
    v = x[f] if f < x.shape[0] else np.nan
    if d & CATEGORICAL_MASK:
        if np.isnan(v) or v <= -1.0 or v >= 2.0 ** 31:  # LightGBM's int cast is negative
            return False
        iv = np.int64(v)  # toward zero: (-1, 0) reads as 0
        c = cat_row[i]
        w0 = cat_boundaries[c]
        word = iv // 32
        if word >= cat_boundaries[c + 1] - w0:
            return False
        return (cat_threshold[w0 + word] >> np.uint32(iv % 32)) & np.uint32(1) == 1
    missing = (d >> 2) & 3
    if np.isnan(v) and missing != MISSING_NAN:
        v = 0.0
    if (missing == MISSING_ZERO and abs(v) <= ZERO_THRESHOLD) or (
            missing == MISSING_NAN and np.isnan(v)):
        return (d & DEFAULT_LEFT_MASK) != 0
    return v <= threshold[i]


@numba.njit(cache=True, nogil=True, inline="always")
def _copies(x, n_f, xs):
    """Fill ``xs`` with the copies of ``x`` (see ``_VIEWS``), then one NaN slot."""
    for f in range(n_f):
        v = x[f] if f < x.shape[0] else np.nan
        nan = np.isnan(v)
        zero = nan or abs(v) <= ZERO_THRESHOLD
        xs[f] = v
        xs[n_f + f] = -np.inf if nan else v
        xs[2 * n_f + f] = 0.0 if nan else v
        xs[3 * n_f + f] = np.nan if zero else v
        xs[4 * n_f + f] = -np.inf if zero else v
    xs[N_VIEWS * n_f] = np.nan


@numba.njit(cache=True, nogil=True, inline="always")
def _quick_found(xs, slot_nodes, threshold, tree, mask, cats, dense, found):
    """QuickScorer's first pass for one row's copies ``xs``: ``found[t]``, for each quick tree
    t, the AND of its false nodes' masks (its exit leaf: the lowest bit set). ``cats``: the
    categorical nodes' entries, ``dense``: the dense groups' rows (``_unblob``)."""
    found[:] = _ALL
    n_slots = xs.shape[0] - 1
    level_start, level_threshold, level_row, rows = dense
    for g in range(slot_nodes.shape[0] - 1):
        l0, l1 = level_start[g], level_start[g + 1]
        if l0 < l1:  # a dense group: the row of the thresholds below v (all for NaN)
            v = xs[g % n_slots]
            j = l1 - l0 if np.isnan(v) else np.searchsorted(level_threshold[l0:l1], v)
            if j > 0:
                block = (g // n_slots) << TREE_BITS
                n = min(1 << TREE_BITS, found.shape[0] - block)
                words, row = found[block:block + n], rows[level_row[l0 + j - 1]:]
                for t in range(n):
                    words[t] &= row[t]
            continue
        g0, g1 = slot_nodes[g], slot_nodes[g + 1]
        if g0 == g1:
            continue
        v = xs[g % n_slots]
        if not np.isnan(v):  # the false nodes: threshold < v (all of them for NaN), a prefix
            g1 = g0 + np.searchsorted(threshold[g0:g1], v)
        block = (g // n_slots) << TREE_BITS
        for i in range(g0, g1):
            found[block + tree[i]] &= mask[i]
    groups, code_rows, cat_tree, cat_mask = cats
    for h in range(groups.shape[0] // 4):
        block, f, n_codes, first = groups[4 * h], groups[4 * h + 1], groups[4 * h + 2], \
            groups[4 * h + 3]
        v = xs[f]  # the first copy: x itself (NaN past its end)
        # the value's code as _flat_decision reads it; NaN, negative or past C: "other"
        c = n_codes if np.isnan(v) or v <= -1.0 or v >= n_codes else np.int64(v)
        block <<= TREE_BITS
        for i in range(code_rows[first + c], code_rows[first + c + 1]):
            found[block + cat_tree[i]] &= cat_mask[i]


@numba.njit(cache=True, nogil=True, inline="always")
def _quick(models, model_trees):
    """Whether QuickScorer scores the quick trees of ``models``: it reads every model's false
    nodes, so it pays when the models hold at least half the trees (else each tree is walked)."""
    n = 0
    for j in range(models.shape[0]):
        if models[j] >= 0:
            n += model_trees[models[j] + 1] - model_trees[models[j]]
    return n > 0 and 2 * n >= model_trees[-1]


@numba.njit(cache=True, nogil=True)
def score_models(x, models, buf, index, out):
    """out[j] = sum of model ``models[j]``'s trees at ``x`` (0 for ``models[j] < 0``).

    ``buf, index``: ``CompiledEnsemble``'s layout (``to_blob``). A tree's leaf is QuickScorer's exit
    leaf (a quick tree, when ``_quick``) or found by a walk, root to leaf."""
    (model_trees, roots, words, thresholds, feature, threshold, decision_type, cat_row, cat_b,
     cat_t, leaf0, leaves, slot_nodes, q_threshold, q_tree, q_mask, cats, dense,
     n_f) = _unblob(buf, index)
    values = words.view(np.float64)
    xs = np.empty(N_VIEWS * n_f + 1)
    _copies(x, n_f, xs)
    quick = _quick(models, model_trees)
    found = np.empty(model_trees[-1] if quick else 0, np.uint64)
    if quick:
        _quick_found(xs, slot_nodes, q_threshold, q_tree, q_mask, cats, dense, found)
    slot_mask, index_mask = np.uint64(SPECIAL), np.uint64((1 << INDEX_BITS) - 1)
    right_mask = np.uint64((1 << RIGHT_BITS) - 1)
    index_shift, right_shift = np.uint64(SLOT_BITS), np.uint64(SLOT_BITS + INDEX_BITS)
    left_leaf, right_leaf = np.uint64(62), np.uint64(63)
    one = np.uint64(1)
    for j in range(models.shape[0]):
        m = models[j]
        s = 0.0
        if m >= 0:
            for t in range(model_trees[m], model_trees[m + 1]):
                if quick and leaf0[t] >= 0:  # the lowest bit left
                    w = found[t]
                    s += leaves[leaf0[t] + trailing_zeros(w)]
                    continue
                n = roots[t]
                if n < 0:  # a tree of one leaf
                    s += values[~n]
                    continue
                while True:
                    w = words[n]
                    slot = np.int64(w & slot_mask)
                    if slot != SPECIAL:
                        go_left = xs[slot] <= thresholds[(w >> index_shift) & index_mask]
                    else:
                        go_left = _flat_decision(
                            x, np.int64((w >> index_shift) & index_mask), feature, threshold,
                            decision_type, cat_row, cat_b, cat_t)
                    if go_left:  # left is the next word, right ``right`` words on
                        n += 1
                        if (w >> left_leaf) & one:
                            break
                    else:
                        n += np.int64((w >> right_shift) & right_mask)
                        if w >> right_leaf:
                            break
                s += values[n]
        out[j] = s


@numba.njit(cache=True, nogil=True)
def score_rows(X, models, buf, index, out):
    """out[i, j] = ``score_models``' ``out[j]`` for row ``i`` of ``X``: with QuickScorer row by
    row, else model by model (one model's trees stay in the caches while the rows walk them).
    The walk is ``score_models``' own, written out again: a shared numba helper taking the
    layout made the single-row kernel 2.7x slower."""
    (model_trees, roots, words, thresholds, feature, threshold, decision_type, cat_row, cat_b,
     cat_t, leaf0, leaves, slot_nodes, q_threshold, q_tree, q_mask, cats, dense,
     n_f) = _unblob(buf, index)
    values = words.view(np.float64)
    xs = np.empty((X.shape[0], N_VIEWS * n_f + 1))  # each row's copies, as score_models'
    for i in range(X.shape[0]):
        _copies(X[i], n_f, xs[i])
    quick = _quick(models, model_trees)
    found = np.empty((X.shape[0] if quick else 0, model_trees[-1]), np.uint64)
    if quick:
        for i in range(X.shape[0]):
            _quick_found(xs[i], slot_nodes, q_threshold, q_tree, q_mask, cats, dense,
                         found[i])
    slot_mask, index_mask = np.uint64(SPECIAL), np.uint64((1 << INDEX_BITS) - 1)
    right_mask = np.uint64((1 << RIGHT_BITS) - 1)
    index_shift, right_shift = np.uint64(SLOT_BITS), np.uint64(SLOT_BITS + INDEX_BITS)
    left_leaf, right_leaf = np.uint64(62), np.uint64(63)
    one = np.uint64(1)
    for j in range(models.shape[0]):
        m = models[j]
        for i in range(X.shape[0]):
            s = 0.0
            if m >= 0:
                for t in range(model_trees[m], model_trees[m + 1]):
                    if quick and leaf0[t] >= 0:
                        w = found[i, t]
                        s += leaves[leaf0[t] + trailing_zeros(w)]
                        continue
                    n = roots[t]
                    if n < 0:
                        s += values[~n]
                        continue
                    while True:
                        w = words[n]
                        slot = np.int64(w & slot_mask)
                        if slot != SPECIAL:
                            go_left = xs[i, slot] <= thresholds[(w >> index_shift) & index_mask]
                        else:
                            go_left = _flat_decision(
                                X[i], np.int64((w >> index_shift) & index_mask), feature,
                                threshold, decision_type, cat_row, cat_b, cat_t)
                        if go_left:
                            n += 1
                            if (w >> left_leaf) & one:
                                break
                        else:
                            n += np.int64((w >> right_shift) & right_mask)
                            if w >> right_leaf:
                                break
                    s += values[n]
            out[i, j] = s
