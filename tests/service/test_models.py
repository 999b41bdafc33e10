"""Model kinds: serving copies explore with their own random streams."""

from service.models import model_kind


def test_serving_copies_of_one_snapshot_draw_differently_but_rank_the_same():
    kind = model_kind("bandit-forest")
    forest = kind.new({"n_trees": 5, "warmup": 1, "seed": 3}, ["a", "b", "c", "d"])
    state = kind.dump_for_serving(forest)
    copies = [kind.load_for_serving(state) for _ in range(2)]
    contexts = [{"x": i % 5} for i in range(40)]
    draws = [[kind.decide(c, x, ["a", "b", "c", "d"], []) for x in contexts] for c in copies]
    assert [d.action for d in draws[0]] != [d.action for d in draws[1]]  # 4 actions, 40 draws
    # the probabilities (logged propensities) come from the forest, not from the draw
    assert [d.ranking for d in draws[0]] == [d.ranking for d in draws[1]]
