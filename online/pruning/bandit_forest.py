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
- **A tree with no vote counts as wrong, not as abstaining.** A tree without a vote for a
  context is given the label :data:`NO_VOTE`, which is never a target label, so it is an error
  of that tree and a vote for "no action" in a sub-ensemble's majority. Which trees have no
  vote is ``exploring``:

  * ``"wrong"`` (default): every tree whose path for the context is still exploring. This is
    the forest's own voting rule when it serves (:meth:`BanditForest.decide`): only finished
    paths vote, an exploring path makes the forest draw an action at random instead of
    exploiting (with probability = share of exploring paths). A sub-forest of such trees plays
    the greedy choice less often, and MEPSI's error term sees it. Read from
    :meth:`BanditForest.finished_votes`.
  * ``"greedy"``: every tree votes its path's current best estimate
    (:meth:`BanditForest.tree_votes`, the view of :meth:`BanditForest.predict_one`); only a
    path with no estimate at all (``None``) has no vote. For young forests, where every path
    still explores and ``"wrong"`` leaves nothing to compare.

  Abstaining (dropping the tree from the vote) would instead make an unfinished tree free to
  select, and MEPSI's error term blind to it. On a 100-tree forest after 30,000 events
  (bench figures in the pruning job's report), MEPSI to 20 trees with ``"greedy"`` kept trees
  that agree with the forest's greedy choice as well as any, but explore more: its SNIPS value
  fell from 0.495 to 0.394; with ``"wrong"`` it rose to 0.562.
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

    A young forest's paths all explore: by the forest's voting rule no tree votes yet, while
    their current best estimates already exist:

    >>> young = BanditForest(n_trees=2, warmup=10, seed=0)
    >>> for i in range(30):
    ...     x = {"section": rng.choice(["sport", "news"]), "hour": rng.randrange(24)}
    ...     young.learn_one(x, "ab"[i % 2], float(i % 2), 0.5)
    >>> x = {"section": "news", "hour": 3}
    >>> bandit_forest_votes(young, [x], exploring="greedy").tolist()
    [['b'], ['b']]
    >>> bandit_forest_votes(young, [x]).tolist() == [[NO_VOTE], [NO_VOTE]]
    True
    """
    trees = []
    for theta in range(forest.n_trees):
        variables, children = forest.tree_structure(theta)
        trees.append(Tree.from_children(variables, children))
    return trees


def bandit_forest_votes(forest, contexts: Iterable[dict], exploring: str = "wrong") -> np.ndarray:
    """Each tree's vote on each context: object array of shape ``(n_trees, n)``.

    A tree without a vote gets :data:`NO_VOTE` (a wrong vote): with ``exploring="wrong"`` every
    tree whose path for the context is still exploring, with ``"greedy"`` only a path with no
    estimate yet (see the module notes).
    """
    if exploring not in ("wrong", "greedy"):
        raise ValueError(f"exploring must be 'wrong' or 'greedy', got {exploring!r}")
    contexts = list(contexts)
    votes = forest.finished_votes if exploring == "wrong" else forest.tree_votes
    out = np.empty((forest.n_trees, len(contexts)), dtype=object)
    for j, x in enumerate(contexts):
        out[:, j] = [NO_VOTE if a is None else a for a in votes(x)]
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
