"""Adapter from Grove's Bandit Forest (:class:`online.BanditForest`) to ensemble pruning.

MEPSI and the baselines of :mod:`online.pruning` see a tree ensemble as (i) each tree's internal
nodes in the neutral :class:`~online.pruning.trees.Tree` form and (ii) each tree's predictions on
a set of examples. For a Bandit Forest:

- **structure**: :meth:`BanditForest.tree_structure` gives, for tree ``theta``, the binary
  variable each internal node tests and the internal children of each node, in preorder (left =
  value 0 before right = value 1); :func:`bandit_forest_trees` turns that into ``Tree`` objects
  whose feature ids index :attr:`BanditForest.variable_names`.
- **predictions**: :meth:`BanditForest.tree_votes` gives the action each tree's path would
  exploit for a context (``None`` while the path is still exploring);
  :func:`bandit_forest_votes` stacks them for a list of contexts.

Choices where the papers are silent or ambiguous
------------------------------------------------
- **A tree with no vote counts as wrong, not as abstaining.** A path that is still exploring
  has no greedy action; it is given the label :data:`NO_VOTE`, which is never a target label,
  so it is an error of that tree and a vote for "no action" in a sub-ensemble's majority. This
  mirrors what the forest does when it serves: under its voting rule an exploring path makes
  the forest draw an action at random (with probability = share of exploring paths) instead of
  exploiting, so a sub-forest full of exploring trees mostly does not play the greedy choice.
  Abstaining (dropping the tree from the vote) would instead make an unfinished tree free to
  select, and MEPSI's error term blind to it.
- Exploring stumps and leaves that test no variable are not internal nodes (as in
  :meth:`BanditForest.tree_structure`); a tree still exploring at its root has ``NC = 0``.
- The labels are the forest's action ids as strings would compare; any hashable action id works
  as long as it is not ``NO_VOTE``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from online.pruning.trees import Tree

__all__ = ["NO_VOTE", "bandit_forest_trees", "bandit_forest_votes", "label_codes"]

#: label of a tree whose path has no greedy action yet (counted as a wrong vote)
NO_VOTE = "\x00no-vote"


def bandit_forest_trees(forest) -> list[Tree]:
    """One :class:`~online.pruning.trees.Tree` per tree of ``forest`` (internal nodes only).

    Examples
    --------
    >>> import random
    >>> from online import BanditForest
    >>> rng = random.Random(0)
    >>> forest = BanditForest(n_trees=4, max_depth=2, epsilon=0.5, warmup=30, seed=1)
    >>> best = {"sport": "a", "news": "b"}
    >>> for _ in range(3000):
    ...     x = {"section": rng.choice(list(best))}
    ...     d = forest.decide(x, actions=["a", "b"])
    ...     forest.learn_one(x, d.action, float(d.action == best[x["section"]]), d.probability)
    >>> trees = bandit_forest_trees(forest)
    >>> len(trees), [t.n_nodes for t in trees]
    (4, [3, 3, 3, 3])
    >>> [forest.variable_names[f] for f in trees[0].feature], trees[0].parent.tolist()
    (['section=news', 'section=sport', 'section=sport'], [-1, 0, 0])
    >>> P = bandit_forest_votes(forest, [{"section": "sport"}, {"section": "news"}])
    >>> P.tolist()
    [['a', 'b'], ['a', 'b'], ['a', 'b'], ['a', 'b']]
    """
    trees = []
    for theta in range(forest.n_trees):
        variables, children = forest.tree_structure(theta)
        trees.append(Tree.from_children(variables, children))
    return trees


def bandit_forest_votes(forest, contexts: Iterable[dict]) -> np.ndarray:
    """Each tree's greedy action on each context: object array of shape ``(n_trees, n)``.

    A tree whose path is still exploring for a context gets :data:`NO_VOTE` (a wrong vote, see
    the module notes).
    """
    columns = [
        [NO_VOTE if a is None else a for a in forest.tree_votes(x)] for x in contexts
    ]
    if not columns:
        return np.empty((forest.n_trees, 0), dtype=object)
    out = np.empty((forest.n_trees, len(columns)), dtype=object)
    for j, col in enumerate(columns):
        out[:, j] = col
    return out


def label_codes(votes: np.ndarray, targets: Sequence) -> tuple[np.ndarray, np.ndarray]:
    """Integer codes of ``votes`` and ``targets`` over their joint label set (NO_VOTE included).

    :mod:`online.pruning.voting` sorts labels with numpy; action ids of mixed types (or the
    ``NO_VOTE`` string beside ints) do not sort, so they are mapped to ints first.

    >>> P = np.array([["a", NO_VOTE], ["b", "a"]], dtype=object)
    >>> codes, y = label_codes(P, ["a", "a"])
    >>> codes.tolist(), y.tolist()
    ([[0, 1], [2, 0]], [0, 0])
    """
    index: dict = {}
    for label in list(targets) + [v for row in votes for v in row]:
        if label not in index:
            index[label] = len(index)
    codes = np.array([[index[v] for v in row] for row in votes], dtype=np.int64)
    codes = codes.reshape(votes.shape)
    return codes, np.array([index[t] for t in targets], dtype=np.int64)
