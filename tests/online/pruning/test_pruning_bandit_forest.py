"""The Bandit Forest adapter of ensemble pruning: structure, votes, NO_VOTE, and MEPSI on it."""

from __future__ import annotations

import random

import numpy as np
import pytest

from online import MEPSI, BanditForest
from online.pruning.bandit_forest import (
    NO_VOTE,
    bandit_forest_trees,
    bandit_forest_votes,
    label_codes,
)
from online.pruning.baselines import reduce_error
from online.pruning.voting import vote_error

BEST = {("sport", 0): "a", ("sport", 1): "b", ("news", 0): "b", ("news", 1): "c"}


def context(rng: random.Random) -> dict:
    return {"section": rng.choice(["sport", "news"]), "mobile": rng.randrange(2),
            "hour": rng.randrange(24)}


def learned_forest(n_events: int = 6000, n_trees: int = 8, seed: int = 0) -> BanditForest:
    rng = random.Random(seed)
    forest = BanditForest(n_trees=n_trees, max_depth=(2, 3), epsilon=0.5, warmup=40, seed=seed)
    for action in ("a", "b", "c"):
        forest.add_action(action)
    for _ in range(n_events):
        x = context(rng)
        d = forest.decide(x)
        good = BEST[(x["section"], x["mobile"])]
        forest.learn_one(x, d.action, float(rng.random() < (0.8 if d.action == good else 0.2)),
                         d.probability)
    return forest


@pytest.fixture(scope="module")
def forest() -> BanditForest:
    return learned_forest()


@pytest.fixture(scope="module")
def contexts() -> list[dict]:
    rng = random.Random(99)
    return [context(rng) for _ in range(120)]


def test_trees_are_the_forests_internal_nodes_in_preorder(forest):
    trees = bandit_forest_trees(forest)
    assert len(trees) == forest.n_trees
    assert max(t.n_nodes for t in trees) >= 2, "the stream should have grown splits"
    for theta, tree in enumerate(trees):
        variables, children = forest.tree_structure(theta)
        assert tree.feature.tolist() == variables  # tree_structure is already preorder
        assert tree.children() == children
        assert all(0 <= f < len(forest.variable_names) for f in tree.feature)


def test_votes_are_each_trees_greedy_action(forest, contexts):
    P = bandit_forest_votes(forest, contexts, exploring="greedy")
    assert P.shape == (forest.n_trees, len(contexts)) and P.dtype == object
    for j in (0, 7, 50):
        assert P[:, j].tolist() == forest.tree_votes(contexts[j])
    # the majority of the trees' votes is what the forest exploits (ties aside)
    agree = [
        max(set(P[:, j]), key=list(P[:, j]).count) == forest.predict_one(x)
        for j, x in enumerate(contexts)
    ]
    assert np.mean(agree) > 0.9
    assert bandit_forest_votes(forest, []).shape == (forest.n_trees, 0)
    with pytest.raises(ValueError, match="exploring"):
        bandit_forest_votes(forest, contexts, exploring="abstain")


def test_by_default_a_path_still_exploring_has_no_vote(forest, contexts):
    """decide's rule: only finished paths vote; the others are NO_VOTE, the rest as greedy."""
    P = bandit_forest_votes(forest, contexts)
    greedy = bandit_forest_votes(forest, contexts, exploring="greedy")
    assert 0 < np.mean(P == NO_VOTE) < 1  # this stream has both kinds of paths
    voted = P != NO_VOTE
    assert (P[voted] == greedy[voted]).all()
    for t in (0, forest.n_trees - 1):
        alone = forest.select_trees([t])
        for j in range(0, len(contexts), 10):
            d = alone.decide(contexts[j])
            assert (P[t, j] == NO_VOTE) == d.explored
            if not d.explored:  # a finished path plays its vote for sure
                assert d.action == P[t, j] and d.probability == 1.0


def test_a_tree_without_a_vote_counts_as_wrong():
    warming = BanditForest(n_trees=3, warmup=50, seed=0)
    warming.add_action("a")
    assert bandit_forest_votes(warming, [{"x": 1}]).tolist() == [[NO_VOTE]] * 3
    assert [t.n_nodes for t in bandit_forest_trees(warming)] == [0, 0, 0]
    # tree 0 right everywhere, trees 1 and 3 never vote, tree 2 right once
    P = np.array(
        [["a", "b", "a"], [NO_VOTE] * 3, ["a", NO_VOTE, "b"], [NO_VOTE] * 3], dtype=object
    )
    codes, y = label_codes(P, ["a", "b", "a"])
    n_labels = int(codes.max()) + 1
    errors = [vote_error(codes, y, n_labels, [t]) for t in range(4)]
    assert errors == [0.0, 1.0, pytest.approx(2 / 3), 1.0]
    assert vote_error(codes, y, n_labels, [0, 1, 3]) == 1.0  # a majority of "no action"
    assert reduce_error(codes, y, 1).tolist() == [0]


def test_mepsi_on_a_bandit_forest_and_the_selected_subforest(forest, contexts):
    trees = bandit_forest_trees(forest)
    targets = [forest.predict_one(x) for x in contexts]
    codes, y = label_codes(bandit_forest_votes(forest, contexts), targets)
    m = MEPSI(k=3, C=0.1, random_state=0).fit(trees, codes, y)
    selected = m.selected_.tolist()
    assert len(set(selected)) == 3
    assert m.objective_history_ == sorted(m.objective_history_, reverse=True)
    # the kept trees agree with the full forest better than the average tree does
    n_labels = int(max(codes.max(), y.max())) + 1
    single = np.mean([vote_error(codes, y, n_labels, [t]) for t in range(len(trees))])
    assert vote_error(codes, y, n_labels, selected) <= single

    # tree indices are what select_trees takes: the sub-forest's trees are the chosen ones
    sub = forest.select_trees(selected)
    assert sub.n_trees == 3
    for x in contexts[:20]:
        full = forest.tree_votes(x)
        assert sub.tree_votes(x) == [full[t] for t in selected]
    assert [t.feature.tolist() for t in bandit_forest_trees(sub)] == [
        trees[t].feature.tolist() for t in selected
    ]


def test_tree_indices_are_stable_while_the_forest_learns():
    """The trainer applies a selection made on an older snapshot: tree i must still be tree i."""
    early = learned_forest(n_events=3000)
    late = learned_forest(n_events=6000)  # the same stream, 3000 events further
    for a, b in zip(bandit_forest_trees(early), bandit_forest_trees(late), strict=True):
        if a.n_nodes:  # a resolved split never changes; the tree only grows below it
            assert b.feature[0] == a.feature[0] and b.n_nodes >= a.n_nodes
