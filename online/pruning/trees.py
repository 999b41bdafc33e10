"""A neutral tree structure for ensemble pruning, and adapters from scikit-learn forests.

MEPSI looks at a tree only through its internal nodes (Definition 3.2 of the MEPSI paper
neglects the leaves): which feature each internal node tests and how the internal nodes hang
together. :class:`Tree` holds exactly that, so any tree ensemble (scikit-learn forests,
Grove's Bandit Forest) can be pruned once it is exported to this form.

Choices where the paper is silent or ambiguous
----------------------------------------------
- Leaves are dropped and the remaining internal children keep their left-to-right order
  (ordered trees, as Zhang-Shasha and APTED assume). A node whose internal child hangs on the
  left and one whose internal child hangs on the right become the same reduced tree: the
  paper's "neglect the leaf nodes" loses that side.
- A tree whose root is a leaf has no internal node (``n_nodes == 0``, NC = 0).
- Thresholds are not part of a node's label: UPDATE changes "the associated feature", so two
  nodes testing the same feature at different thresholds are equal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = [
    "Tree",
    "forest_oob_predictions",
    "forest_predictions",
    "from_sklearn_forest",
    "from_sklearn_tree",
]


class LastForest:
    """The last result computed per ``key`` for the same list of tree objects.

    MEPSI asks the TED and SED kernels for the same forest's flattened arrays many times in a
    row (once per pair step, candidate step and ESM_avg sample); this keeps the last result per
    key (e.g. per orientation) and recomputes when the trees are other objects. Identity, not
    equality: a tree object is not changed once built. The trees stay referenced until a call
    with other trees replaces them.
    """

    def __init__(self):
        self._last: dict = {}  # key -> (trees, result)

    def get(self, trees, key, compute):
        """``compute(trees)``, or its last result for ``key`` if ``trees`` are the same objects."""
        trees = list(trees)
        hit = self._last.get(key)
        if hit is not None and len(hit[0]) == len(trees) and all(
            a is b for a, b in zip(hit[0], trees)
        ):
            return hit[1]
        result = compute(trees)
        self._last[key] = (trees, result)
        return result

    def clear(self) -> None:
        self._last.clear()


def preorder_postorder(feature, parent, mirror: bool = False):
    """:func:`postorder` of a tree whose nodes are numbered in preorder (as
    :meth:`Tree.from_children` and the scikit-learn adapter number them), without a Python loop
    over nodes: node ``v`` at depth ``d`` with ``s`` nodes below it (itself included) is
    postorder ``v - d + s - 1`` with leftmost leaf ``v - d``; in the mirror tree (children right
    to left) the postorder is the reversed preorder. None if the numbering is not a preorder.
    """
    parent = np.asarray(parent, dtype=np.int64)
    n = len(parent)
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    v = np.arange(n)
    if n > 1 and not (parent[1:] < v[1:]).all():
        return None
    depth = np.zeros(n, np.int64)
    up = parent.copy()
    while (up >= 0).any():  # one step per level
        has = up >= 0
        depth[has] += 1
        up[has] = parent[up[has]]
    size = np.ones(n, np.int64)
    for d in range(int(depth.max()), 0, -1):
        at = np.flatnonzero(depth == d)
        np.add.at(size, parent[at], size[at])
    # a preorder: each first child follows its parent, each next sibling ends the last subtree
    first = np.full(n, n)
    np.minimum.at(first, parent[1:], v[1:])
    has_kids = first < n
    if not (first[has_kids] == v[has_kids] + 1).all():
        return None
    nxt, p = v[1:] + size[1:], parent[1:]
    sibling = (nxt < n) & (parent[np.minimum(nxt, n - 1)] == p)
    if not ((nxt == p + size[p]) | sibling).all():
        return None
    feature = np.asarray(feature, dtype=np.int64)
    post = v - depth + size - 1 if not mirror else n - 1 - v
    feats, lml = np.empty(n, np.int64), np.empty(n, np.int64)
    feats[post] = feature
    lml[post] = post - size + 1
    return feats, lml


def postorder(feature, kids: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    """(node features in postorder, postorder index of each node's leftmost leaf) of the tree
    rooted at node 0 with children lists ``kids`` (reversed lists give the mirror tree)."""
    feats: list[int] = []
    lml: list[int] = []
    first_leaf: dict[int, int] = {}
    stack = [(0, False)] if len(kids) else []
    while stack:
        v, done = stack.pop()
        if done or not kids[v]:
            x = len(feats)
            feats.append(feature[v])
            lml.append(first_leaf[kids[v][0]] if kids[v] else x)
            first_leaf[v] = lml[-1]
        else:
            stack.append((v, True))
            stack.extend((c, False) for c in reversed(kids[v]))
    return np.array(feats, dtype=np.int64), np.array(lml, dtype=np.int64)


@dataclass(frozen=True, eq=False)
class Tree:
    """Internal nodes of a decision tree: tested feature ids and parent links.

    Node ``0`` is the root; ``parent[v]`` is the index of ``v``'s parent (``-1`` for the root)
    and siblings are ordered left to right by their index. Leaves are not stored.

    Parameters
    ----------
    feature
        ``feature[v]`` is the id of the feature node ``v`` tests (any non-negative int).
    parent
        ``parent[v]`` is the parent of node ``v``, ``-1`` for the root (node 0 only).

    Examples
    --------
    A root testing feature 3 with two internal children testing 1 and 2 (left to right):

    >>> t = Tree.from_children([3, 1, 2], [[1, 2], [], []])
    >>> t.n_nodes
    3
    >>> t.parent.tolist()
    [-1, 0, 0]
    >>> t.postorder_features().tolist()
    [1, 2, 3]
    >>> Tree.from_state(t.to_state()).parent.tolist()
    [-1, 0, 0]
    """

    feature: np.ndarray
    parent: np.ndarray
    _post: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        feature = np.asarray(self.feature, dtype=np.int64).reshape(-1)
        parent = np.asarray(self.parent, dtype=np.int64).reshape(-1)
        if feature.shape != parent.shape:
            raise ValueError("feature and parent must have the same length")
        n = len(feature)
        if n:
            if parent[0] != -1 or np.any(parent[1:] < 0) or np.any(parent >= n):
                raise ValueError(
                    "node 0 must be the root (parent -1) and every other parent in range"
                )
            if not _is_tree(parent):
                raise ValueError("parent links must form one tree rooted at node 0")
        object.__setattr__(self, "feature", feature)
        object.__setattr__(self, "parent", parent)

    @classmethod
    def from_children(cls, feature, children) -> Tree:
        """Build from per-node child lists (``children[v]`` = internal children of ``v`` in order).

        Nodes are renumbered in preorder so that siblings are ordered by index.
        """
        feature = list(feature)
        order, parent, stack = [], [], [(0, -1)] if feature else []
        while stack:
            v, p = stack.pop()
            parent.append(p)
            order.append(v)
            new_v = len(order) - 1
            stack.extend((c, new_v) for c in reversed(list(children[v])))
        return cls(
            np.array([feature[v] for v in order], dtype=np.int64),
            np.array(parent, dtype=np.int64),
        )

    @property
    def n_nodes(self) -> int:
        """NC(h): the number of internal nodes."""
        return len(self.feature)

    def children(self) -> list[list[int]]:
        kids: list[list[int]] = [[] for _ in range(self.n_nodes)]
        for v in range(1, self.n_nodes):
            kids[self.parent[v]].append(v)
        return kids

    def _postorder(self, mirror: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """(features in postorder, leftmost-leaf postorder index of each node), of the tree or
        (``mirror``) of its mirror image (children right to left)."""
        key = "post_mirror" if mirror else "post"
        if key not in self._post:
            fast = preorder_postorder(self.feature, self.parent, mirror)
            if fast is None:
                kids = self.children()
                fast = postorder(self.feature, [k[::-1] for k in kids] if mirror else kids)
            self._post[key] = fast
        return self._post[key]

    def postorder_features(self) -> np.ndarray:
        return self._postorder()[0]

    def leftmost_leaves(self) -> np.ndarray:
        """l(x) of Zhang & Shasha (1989): postorder index of the leftmost leaf below each node."""
        return self._postorder()[1]

    def to_state(self) -> dict:
        return {
            "format": "grove.pruning.tree",
            "version": 1,
            "feature": self.feature.copy(),
            "parent": self.parent.copy(),
        }

    @classmethod
    def from_state(cls, state: dict) -> Tree:
        if state.get("format") != "grove.pruning.tree" or state.get("version") != 1:
            raise ValueError("not a grove.pruning.tree v1 state")
        return cls(np.asarray(state["feature"]), np.asarray(state["parent"]))


def _is_tree(parent: np.ndarray) -> bool:
    n = len(parent)
    depth = np.full(n, -1)
    depth[0] = 0
    for v in range(n):
        path = []
        u = v
        while depth[u] < 0:
            path.append(u)
            u = parent[u]
            if len(path) > n:
                return False
        for w in reversed(path):
            depth[w] = depth[parent[w]] + 1
    return True


def from_sklearn_tree(estimator) -> Tree:
    """Internal nodes of a fitted scikit-learn decision tree (children in left, right order).

    >>> from sklearn.tree import DecisionTreeClassifier
    >>> clf = DecisionTreeClassifier(max_depth=2, random_state=0).fit(
    ...     [[0, 0], [0, 1], [1, 0], [1, 1]], [0, 1, 1, 0])
    >>> from_sklearn_tree(clf).n_nodes
    3
    """
    t = estimator.tree_
    left, right, feat = t.children_left, t.children_right, t.feature
    if left[0] == -1:
        return Tree(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    features, parents, stack = [], [], [(0, -1)]
    while stack:
        v, p = stack.pop()
        parents.append(p)
        features.append(feat[v])
        me = len(features) - 1
        # push right first so the left internal child is numbered first (preorder)
        for c in (right[v], left[v]):
            if left[c] != -1:
                stack.append((c, me))
    return Tree(np.array(features, dtype=np.int64), np.array(parents, dtype=np.int64))


def from_sklearn_forest(forest) -> list[Tree]:
    """One :class:`Tree` per member of a fitted RandomForest/ExtraTrees ``estimators_``."""
    return [from_sklearn_tree(est) for est in forest.estimators_]


def forest_predictions(forest, X, *, scores: bool = False) -> np.ndarray:
    """Each member's predictions on ``X``, in the forest's class labels.

    Returns shape ``(n_trees, n_samples)`` labels from ``forest.classes_``, or with
    ``scores=True`` the per-tree class probabilities ``(n_trees, n_samples, n_classes)``.
    """
    X = np.asarray(X)
    proba = np.stack([est.predict_proba(X) for est in forest.estimators_])
    if scores:
        return proba
    return np.asarray(forest.classes_)[proba.argmax(axis=2)]


def forest_oob_predictions(forest, X) -> np.ndarray:
    """Each member's class probabilities on its out-of-bag samples of the training set ``X``.

    Shape ``(n_trees, n_samples, n_classes)``; the rows of the samples a tree was fitted on
    (its bootstrap draw) are all zeros, which :mod:`online.pruning.voting` reads as "no vote".
    ``X`` must be the data the bootstrap forest was fitted on, in the same order (the draws
    are replayed from each tree's seed, as scikit-learn's own ``oob_score`` does).

    >>> from sklearn.ensemble import RandomForestClassifier
    >>> X = [[0.0], [1.0], [2.0], [3.0], [4.0], [5.0]]
    >>> rf = RandomForestClassifier(3, random_state=0).fit(X, [0, 0, 0, 1, 1, 1])
    >>> P = forest_oob_predictions(rf, X)
    >>> P.shape
    (3, 6, 2)
    >>> bool(((P.sum(axis=2) == 0) | np.isclose(P.sum(axis=2), 1)).all())
    True
    """
    from sklearn.ensemble._forest import (
        _generate_unsampled_indices,
        _get_n_samples_bootstrap,
    )

    if not getattr(forest, "bootstrap", False):
        raise ValueError("out-of-bag predictions need a bootstrap forest")
    X = np.asarray(X)
    n = X.shape[0]
    n_boot = _get_n_samples_bootstrap(n, forest.max_samples, None)
    out = np.zeros((len(forest.estimators_), n, len(forest.classes_)))
    for t, est in enumerate(forest.estimators_):
        oob = _generate_unsampled_indices(est.random_state, n, n_boot, None)
        out[t, oob] = est.predict_proba(X[oob])
    return out
