"""Bandit Forest (Féraud et al., 2016): the paper's toy problem, its bounds, and the policy's
API."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from river import bandit

from online import BanditForest
from online.bandit import kernels
from online.bandit.bounds import action_radius, variable_radius
from online.bandit.layout import Bound
from online.bandit.storage import ForestStorage
from tests.helpers.golden import state_hash

# -- the paper's Table 1 toy problem ---------------------------------------------------------------

def table1_event(rng: random.Random) -> tuple[dict, dict]:
    """One context and the rewards of k1, k2 under a joint law with Table 1's conditionals.

    Table 1 as printed cannot come from rewards in [0, 1]: k1's means (0 given v0, 1 given v1 of
    x_i1) force reward(k1) = x_i1, and then matching k2's four conditional means needs a mean of
    3/2 for (x_i1, x_i2) = (0, 1). Scaling every reward by 2/3 keeps every argmax of the table and
    makes the law valid: P(x_i2 = 1) = 1/4, P(x_i1 = 1 | x_i2) = 1/4 or 3/4, reward(k1) = x_i1,
    and k2's means 1/2, 3/2, 0, 1/3 for (x_i1, x_i2) = (0,0), (0,1), (1,0), (1,1).
    """
    x2 = int(rng.random() < 1 / 4)
    x1 = int(rng.random() < (3 / 4 if x2 else 1 / 4))
    k2_mean = {(0, 0): 1 / 2, (0, 1): 3 / 2, (1, 0): 0.0, (1, 1): 1 / 3}[(x1, x2)]
    scale = 2 / 3
    return {"x_i1": x1, "x_i2": x2}, {"k1": scale * x1, "k2": float(rng.random() < scale * k2_mean)}


def test_table1_law_has_the_papers_conditional_means():
    rng = random.Random(0)
    sums: dict = {}
    for _ in range(200_000):
        x, y = table1_event(rng)
        for var in ("x_i1", "x_i2"):
            for k in ("k1", "k2"):
                s = sums.setdefault((var, x[var], k), [0.0, 0])
                s[0] += y[k] / (2 / 3)
                s[1] += 1
    mean = {key: s / n for key, (s, n) in sums.items()}
    table = {("x_i1", 0, "k1"): 0, ("x_i1", 1, "k1"): 1, ("x_i1", 0, "k2"): 3 / 5,
             ("x_i1", 1, "k2"): 1 / 6, ("x_i2", 0, "k1"): 1 / 4, ("x_i2", 1, "k1"): 3 / 4,
             ("x_i2", 0, "k2"): 9 / 24, ("x_i2", 1, "k2"): 5 / 8}
    for key, expected in table.items():
        assert mean[key] == pytest.approx(expected, abs=0.015), key
    # sec. 3.1: mu^{i1} = 3/4 > mu^{i2} = 15/32, so x_i1 is the variable to pick
    p1, p2 = 3 / 8, 1 / 4
    mu_i1 = (1 - p1) * max(0, 3 / 5) + p1 * max(1, 1 / 6)
    mu_i2 = (1 - p2) * max(1 / 4, 9 / 24) + p2 * max(3 / 4, 5 / 8)
    assert (mu_i1, mu_i2) == (pytest.approx(3 / 4), pytest.approx(15 / 32))


def test_decision_stump_picks_x_i1_with_k2_for_v0_and_k1_for_v1():
    rng = random.Random(1)
    stump = BanditForest(n_trees=1, max_depth=1, split_fraction=1.0, epsilon=0.0, warmup=20,
                         seed=3)
    for _ in range(40_000):
        x, y = table1_event(rng)
        d = stump.decide(x, actions=["k1", "k2"])
        stump.learn_one(x, d.action, y[d.action], d.probability)
        if "exploring" not in stump.tree(0) and all(
                len(a) == 1 for a in stump.tree(0)["actions"]):
            break
    assert stump.tree(0) == {"variable": "x_i1", "actions": [["k2"], ["k1"]]}
    assert stump.decide({"x_i1": 0, "x_i2": 1}) .action == "k2"
    assert stump.decide({"x_i1": 1, "x_i2": 0}) == stump.decide({"x_i1": 1, "x_i2": 1})
    assert stump.decide({"x_i1": 1, "x_i2": 0}).action == "k1"
    assert stump.decide({"x_i1": 1, "x_i2": 0}).probability == 1.0


# -- eqs. (3) and (4) on hand-computed numbers ----------------------------------------------------

def test_bound_functions_are_the_papers_right_hand_sides():
    # eq. (3): 4 sqrt(ln(4 K M D L t^2 / delta) / (2 t)) with K=2, M=10, D=3, L=5, t=100
    assert variable_radius(100, 2, 10, 0.05, 3, 5) == pytest.approx(
        4 * math.sqrt(math.log(2.4e8) / 200))
    assert variable_radius(100, 2, 10, 0.05, 3, 5) == pytest.approx(1.24245, abs=1e-5)
    # eq. (4): 2 sqrt(ln(4 K L t^2 / delta) / (2 t)) with K=2, L=5, t=100
    assert 2 * action_radius(100, 2, 0.05, 5) == pytest.approx(2 * math.sqrt(math.log(8e6) / 200))
    assert 2 * action_radius(100, 2, 0.05, 5) == pytest.approx(0.56383, abs=1e-5)
    assert variable_radius(0, 2, 10, 0.05) == math.inf


def hand_built_stump(eps: float, x0: int = 1):
    """A stump over 2 variables and 2 actions, each action played 100 times (weights 1).

    x_0 = 1 in 50 of each action's plays. Reward sums:
      var 0: k0 -> 40 with x_0 = 1, 0 with x_0 = 0;   k1 -> 5 with x_0 = 1, 30 with x_0 = 0
      var 1: k0 -> 20 and 20;                         k1 -> 20 and 15
    so mu^0 = max(.40, .05) + max(0, .30) = 0.70 and mu^1 = max(.2, .2) + max(.15, .2) = 0.40.
    Eq. (3) with K=2, M=2, D=L=1, delta=0.05, t=100: radius = 4 sqrt(ln(3.2e6)/200) = 1.09467,
    so variable 1 goes iff 0.30 + eps >= 1.09467. Eq. (4) in cell (0, x_0=1): means .8 and .1
    over 50 plays: 2 sqrt(ln(4e5)/100) = 0.71831, so k1 goes iff 0.7 + eps >= 0.71831; in cell
    (0, x_0=0): means 0 and .6, so k0 goes iff 0.6 + eps >= 0.71831.
    """
    store = ForestStorage(n_vars=2, n_actions=2)
    store.active[:2] = True
    s = store.new_slot(np.array([0, 1], np.int32))
    slots = store.slots
    slots.T[s, :2] = 100
    slots.W[s, :2] = 100.0
    slots.T1[s, :2, :2] = 50
    slots.W1[s, :2, :2] = 50.0
    slots.R[s, :2] = [40, 35]  # each action's reward sum, whatever x
    slots.R1[s, 0, :2] = [40, 20]  # with x_0 = 1, with x_1 = 1 (k0)
    slots.R1[s, 1, :2] = [5, 20]  # (k1)
    bound = Bound(n_active=2, M=2, delta=0.05, radii=kernels.radius_table(1024, 2, 0.05, 1))
    x = np.array([x0, 0], np.int8)
    left = kernels.stump_round(x, s, slots, store.active, 1, 1, eps, bound,
                               kernels.round_work(2, store.active.shape[0]))
    return left, slots.S[s, :left].tolist(), slots.A[s, :2, :, :2].transpose(2, 1, 0)


def test_variable_elimination_follows_eq_3():
    assert 4 * math.sqrt(math.log(3.2e6) / 200) == pytest.approx(1.09467, abs=1e-5)
    assert hand_built_stump(eps=0.79)[:2] == (2, [0, 1])
    assert hand_built_stump(eps=0.80)[:2] == (1, [0])


def test_action_elimination_follows_eq_4():
    assert 2 * math.sqrt(math.log(4e5) / 100) == pytest.approx(0.71831, abs=1e-5)
    _, _, A = hand_built_stump(eps=0.01)
    assert A[0, 1].tolist() == [True, True] and A[0, 0].tolist() == [True, True]
    _, _, A = hand_built_stump(eps=0.02)
    assert A[0, 1].tolist() == [True, False]  # k1 out of A_{0,1}
    assert A[0, 0].tolist() == [True, True]  # (0, 0) is not the observed cell
    _, _, A = hand_built_stump(eps=0.12, x0=0)
    assert A[0, 0].tolist() == [False, True]  # k0 out of A_{0,0}
    assert A[0, 1].tolist() == [True, True]


# -- a known best depth-2 tree ---------------------------------------------------------------------

BEST = {(0, 0): "a", (0, 1): "b", (1, 0): "c", (1, 1): "d"}


def depth2_event(rng: random.Random) -> tuple[dict, str]:
    x = {f"x{i}": int(rng.random() < 0.5) for i in range(6)}
    return x, BEST[(x["x0"], x["x1"])]


@pytest.mark.slow
def test_forest_converges_to_the_best_depth_2_tree():
    rng = random.Random(7)
    forest = BanditForest(n_trees=15, max_depth=2, epsilon=(0.3, 0.5), warmup=50, seed=11)
    actions = ["a", "b", "c", "d"]
    late_rewards = []
    for t in range(40_000):
        x, best = depth2_event(rng)
        d = forest.decide(x, actions=actions)
        reward = float(rng.random() < (0.8 if d.action == best else 0.2))
        forest.learn_one(x, d.action, reward, d.probability)
        if t >= 35_000:
            late_rewards.append(reward)
    for (x0, x1), best in BEST.items():
        for _ in range(5):
            x, _ = depth2_event(rng)
            x.update(x0=x0, x1=x1)
            assert forest.predict_one(x) == best
    assert forest.decide({"x0": 1, "x1": 0, "x2": 1}).action == "c"
    assert np.mean(late_rewards) > 0.7  # greedy gets 0.8, uniform 0.35


# -- the API ---------------------------------------------------------------------------------------

def trained_forest(n: int = 3000, **params) -> BanditForest:
    rng = random.Random(5)
    params = {"n_trees": 8, "max_depth": 3, "epsilon": 0.4, "warmup": 50, "seed": 2, **params}
    forest = BanditForest(**params)
    for _ in range(n):
        x = {"site": rng.choice(["a", "b", "c"]), "age": rng.uniform(18, 80),
             "mobile": rng.random() < 0.5}
        d = forest.decide(x, actions=["k1", "k2", "k3"])
        best = {"a": "k1", "b": "k2", "c": "k3"}[x["site"]]
        forest.learn_one(x, d.action, float(rng.random() < (0.9 if d.action == best else 0.1)),
                         d.probability)
    return forest


def leaves(tree) -> list:
    if isinstance(tree, dict):
        return [v for value in tree.values() for v in leaves(value)]
    if isinstance(tree, list):
        return [v for value in tree for v in leaves(value)]
    return [tree]


def test_state_round_trip_is_exact_and_json_able():
    forest = trained_forest()
    state = forest.to_state()
    for value in leaves(state):
        assert value is None or isinstance(value, (np.ndarray, str, int, float, bool))
    json.dumps(state, default=lambda a: a.tolist())  # every non-array leaf is JSON
    clone = BanditForest.from_state(state)
    rng = random.Random(9)
    for _ in range(500):  # same decisions, same learning, same decisions again
        x = {"site": rng.choice(["a", "b", "c", "z"]), "age": rng.uniform(10, 90)}
        assert clone.decide(x) == forest.decide(x)
        reward = rng.random()
        forest.learn_one(x, "k2", reward, 0.5)
        clone.learn_one(x, "k2", reward, 0.5)
    assert clone.to_state()["storage"]["slot_R1"].tobytes() == \
        forest.to_state()["storage"]["slot_R1"].tobytes()


def test_state_without_statistics_decides_the_same_but_cannot_learn():
    forest = trained_forest()
    serving = BanditForest.from_state(forest.to_state(statistics=False))
    for site in "abc":
        x = {"site": site, "age": 30.0}
        assert serving.decide(x) == forest.decide(x)
    with pytest.raises(RuntimeError, match="cannot|not learn"):
        serving.learn_one({"site": "a"}, "k1", 1.0, 1.0)
    with pytest.raises(ValueError, match="version"):
        BanditForest.from_state({**forest.to_state(), "version": 99})


def test_same_seed_same_decisions():
    a, b = trained_forest(1500), trained_forest(1500)
    x = {"site": "b", "age": 44.0}
    assert [a.decide(x) for _ in range(20)] == [b.decide(x) for _ in range(20)]


def test_decision_ranking_is_built_on_demand_and_compares_by_value():
    a, b = trained_forest(1500), trained_forest(1500)
    x = {"site": "b", "age": 44.0}
    da, db = a.decide(x), b.decide(x)
    probs = list(da.probabilities.values())
    assert probs == sorted(probs, reverse=True) and da.ranking == list(da.probabilities.items())
    assert da.probabilities[da.action] == da.probability and da == db
    assert repr(da).startswith(f"Decision(action={da.action!r}, probability=")
    with pytest.raises(TypeError):
        hash(da)


def test_excluded_actions_are_never_chosen():
    forest = trained_forest()
    for _ in range(50):
        d = forest.decide({"site": "a", "age": 30.0}, excluded=["k1"])
        assert d.action != "k1" and "k1" not in d.probabilities
        assert sum(d.probabilities.values()) == pytest.approx(1.0)
        assert d.probabilities[d.action] == d.probability
    with pytest.raises(ValueError, match="no action"):
        forest.decide({"site": "a"}, excluded=["k1", "k2", "k3"])


def test_actions_added_and_removed_at_run_time():
    forest = trained_forest(6000)
    x = {"site": "a", "age": 30.0, "mobile": True}
    assert forest.predict_one(x) == "k1"
    forest.add_action("k4")
    assert sorted(forest.actions) == ["k1", "k2", "k3", "k4"]
    seen = {forest.decide(x).action for _ in range(200)}
    assert "k4" in seen  # the new ad is explored, even where paths had finished
    forest.remove_action("k1")
    assert sorted(forest.actions) == ["k2", "k3", "k4"]
    for _ in range(100):
        d = forest.decide(x)
        assert d.action != "k1" and "k1" not in d.probabilities
        forest.learn_one(x, d.action, 0.5, d.probability)
    assert forest.predict_one(x) in {"k2", "k3", "k4"}
    with pytest.raises(KeyError):
        forest.remove_action("k1")
    # an action the forest never learned about, offered in one call, is explored
    assert forest.decide(x, actions=["k2", "brand-new"]).probabilities["brand-new"] > 0


def test_unseen_categories_missing_and_new_keys_are_handled():
    forest = trained_forest()
    for x in [{"site": "never-seen", "age": 30.0}, {}, {"age": 200.0}, {"new": "key", "n": 1.5},
              {"site": None, "mobile": None}]:
        d = forest.decide(x)
        assert d.action in {"k1", "k2", "k3"} and 0 < d.probability <= 1
        forest.learn_one(x, d.action, 0.0, d.probability)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), np.float64("nan")])
def test_non_finite_values_are_rejected(value):
    forest = trained_forest(100)
    with pytest.raises(ValueError, match="finite"):
        forest.decide({"site": "a", "age": value})
    with pytest.raises(ValueError, match="finite"):
        forest.learn_one({"age": value}, "k1", 1.0, 1.0)


def test_bad_inputs_are_rejected_with_clear_errors():
    forest = trained_forest(100)
    with pytest.raises(TypeError, match="nested"):
        forest.decide({"site": {"nested": 1}})
    with pytest.raises(ValueError, match="probability"):
        forest.learn_one({"site": "a"}, "k1", 1.0, 0.0)
    with pytest.raises(ValueError, match="reward"):
        forest.learn_one({"site": "a"}, "k1", float("nan"), 1.0)
    for bad in (None, [1, 2]):
        with pytest.raises(ValueError, match="a context must be a dict"):
            forest.decide(bad)
        with pytest.raises(ValueError, match="a context must be a dict"):
            forest.learn_one(bad, "k1", 1.0, 1.0)
    for reward, probability in ((None, 1.0), (1.0, None), (10**400, 1.0)):
        with pytest.raises(ValueError, match="must be numbers"):
            forest.learn_one({"site": "a"}, "k1", reward, probability)
    with pytest.raises(ValueError, match="not None"):
        forest.learn_one({"site": "a"}, None, 1.0, 1.0)
    with pytest.raises(ValueError, match="not None"):
        forest.add_action(None)
    n = forest.n_learned  # numbers where strings were learned: as missing (the encoder's doc)
    forest.learn_one({"site": 3.0}, "k1", 1.0, 1.0)
    assert forest.n_learned == n + 1


def test_river_evaluate_offline_runs_with_the_policy():
    rng = random.Random(3)
    arms = ["a", "b", "c"]
    history = []
    for _ in range(3000):
        context = {"section": rng.choice(["x", "y"]), "score": rng.random()}
        arm = rng.choice(arms)
        best = "a" if context["section"] == "x" else "c"
        history.append((arms, context, arm, rng.random() < (0.8 if arm == best else 0.1)))
    policy = BanditForest(n_trees=5, max_depth=2, epsilon=0.4, warmup=30, seed=1)
    total, n_used = bandit.evaluate_offline(policy=policy, history=history)
    assert 500 < n_used < 3000
    assert total.get() / n_used > 0.3  # uniform play would get about 0.33
    assert policy.n_learned == n_used


# -- trees as a pruning job sees them --------------------------------------------------------------

def test_tree_structure_lists_splits_and_deciding_leaves():
    forest = trained_forest(6000)
    names = forest.variable_names
    for theta in range(forest.n_trees):
        variables, children = forest.tree_structure(theta)

        def count(tree):  # internal nodes of the readable description
            if "children" in tree:
                return 1 + sum(count(c) for c in tree["children"])
            return int(tree.get("variable") is not None)

        assert len(variables) == count(forest.tree(theta)) == len(children)
        if variables:
            assert names[variables[0]] == forest.tree(theta).get("variable")
        assert sorted(c for cs in children for c in cs) == list(range(1, len(variables)))


def test_select_trees_keeps_the_chosen_trees_exactly():
    forest = trained_forest(6000)
    sub = forest.select_trees([5, 0, 3])
    assert sub.n_trees == 3
    assert [sub.tree(i) for i in range(3)] == [forest.tree(5), forest.tree(0), forest.tree(3)]
    rng = random.Random(2)
    for _ in range(50):
        x = {"site": rng.choice("abc"), "age": rng.uniform(18, 80), "mobile": rng.random() < .5}
        votes = forest.tree_votes(x)
        assert sub.tree_votes(x) == [votes[5], votes[0], votes[3]]
    whole = forest.select_trees(range(forest.n_trees))
    for site in "abc":
        x = {"site": site, "age": 40.0}
        assert whole.predict_one(x) == forest.predict_one(x)
    d = sub.decide({"site": "a", "age": 30.0})  # the pruned forest still decides and learns
    sub.learn_one({"site": "a", "age": 30.0}, d.action, 1.0, d.probability)
    assert BanditForest.from_state(sub.to_state()).tree(1) == sub.tree(1)
    with pytest.raises(ValueError, match="distinct"):
        forest.select_trees([0, 0])


def test_reseed_changes_only_the_draws():
    a, b = trained_forest(1500), trained_forest(1500)
    a.reseed(123)
    b.reseed(123)
    x = {"site": "b", "age": 44.0}
    assert [a.decide(x) for _ in range(20)] == [b.decide(x) for _ in range(20)]
    b.reseed(124)
    draws_a = [a.decide(x).action for _ in range(200)]
    draws_b = [b.decide(x).action for _ in range(200)]
    assert draws_a != draws_b or len(set(draws_a)) == 1
    assert a.tree(0) == b.tree(0)


def test_state_round_trip_when_every_stump_is_a_leaf():
    # no exploring stump left: the variable count must still come through (a replay found it)
    rng = random.Random(4)
    forest = BanditForest(n_trees=3, warmup=30, max_depth=1, delta=0.9, epsilon=1.0, seed=1)
    for _ in range(400):
        x = {f"f{i}": rng.choice(["a", "b", "c"]) for i in range(3)}
        d = forest.decide(x, actions=["p", "q", "r"])
        forest.learn_one(x, d.action, float(d.action == "pqr"["abc".index(x["f0"])]),
                         d.probability)
        clone = BanditForest.from_state(forest.to_state())
        assert clone.decide(x) == forest.decide(x)


def test_finished_votes_are_what_a_one_tree_forest_plays_without_exploring():
    forest = trained_forest(6000)
    rng = random.Random(8)
    for _ in range(30):
        x = {"site": rng.choice("abc"), "age": rng.uniform(18, 80), "mobile": rng.random() < .5}
        finished = forest.finished_votes(x)
        for theta in range(forest.n_trees):
            alone = forest.select_trees([theta]).decide(x)
            assert finished[theta] == (None if alone.explored else alone.action)


def test_learn_one_after_decide_learns_the_context_it_is_given():
    # learn_one reuses decide's encoding only for the same, fully known context: a context
    # changed in place, or holding a category decide had not seen, is encoded again
    def play(mutate: bool) -> dict:
        rng = random.Random(5)
        forest = BanditForest(n_trees=4, warmup=20, max_depth=2, seed=2)
        for t in range(400):
            x = {"site": rng.choice(["a", "b", "c"]), "n": rng.randrange(3),
                 "flag": rng.random() < 0.5}
            if t % 50 == 49:
                x["site"] = f"new{t}"  # unseen by the encoder when decide runs
            d = forest.decide(x, actions=["p", "q"])
            if mutate:
                x["site"] = "c" if x["site"] == "a" else "a"
                x["flag"] = not x["flag"]
            else:
                x = dict(x, site="c" if x["site"] == "a" else "a", flag=not x["flag"])
            forest.learn_one(x, d.action, float(x["site"] == "a") * (d.action == "p"),
                             d.probability)
        return forest.to_state()

    assert state_hash(play(mutate=True)) == state_hash(play(mutate=False))


def test_learn_one_reuses_decides_paths_only_while_the_trees_are_unchanged():
    # learn_one takes the trees' paths from decide on the same context if no event was learned
    # in between; here other events are learned between some decides and their learn_one
    # (the trees grow meanwhile), and the end state must be that of learning without decides
    def play(decide: bool) -> dict:
        rng = random.Random(8)
        forest = BanditForest(n_trees=6, warmup=30, max_depth=(2, 3), epsilon=0.9, delta=0.3,
                              seed=4)
        for a in "pqr":
            forest.add_action(a)
        best = {"a": "p", "b": "q", "c": "r"}
        events = []
        for _ in range(2500):
            x = {"site": rng.choice("abc"), "hour": rng.randrange(24), "vip": rng.random() < .5}
            action = rng.choice("pqr")
            reward = float(action == best[x["site"]])
            events.append((x, action, reward))
        held = None
        for t, (x, action, reward) in enumerate(events):
            if decide:
                forest.decide(x)
            if t % 7 == 3:  # learned later, after other events
                held = (x, action, reward)
                continue
            forest.learn_one(x, action, reward, 0.5)
            if held is not None and t % 7 == 5:
                if decide:
                    forest.decide(held[0])  # its paths are stale by the time it is learned
                    forest.learn_one(dict(x, hour=-1), action, reward, 0.5)
                else:
                    forest.learn_one(dict(x, hour=-1), action, reward, 0.5)
                forest.learn_one(*held, 0.5)
                held = None
        assert forest.n_nodes >= 6 * 5  # paths were split while events were held
        state = forest.to_state()
        del state["rng"]["decide"]
        return state

    assert state_hash(play(decide=True)) == state_hash(play(decide=False))


def test_learn_many_ends_exactly_as_learn_one():
    rng = random.Random(11)
    events = []
    for t in range(1500):
        x = {"site": rng.choice(["a", "b", "c"] + ([f"s{t // 300}"] if t > 400 else [])),
             "age": rng.uniform(10, 90), "mobile": rng.random() < 0.3}
        if t > 700:
            x["late"] = rng.randrange(5)  # a numeric feature whose bins come mid-stream
        action = rng.choice(["p", "q", "r"] + (["s"] if t > 900 else []))
        reward = float(rng.random() < (0.8 if (x["site"] == "a") == (action == "p") else 0.3))
        events.append((x, action, reward, rng.choice([1.0, 0.5, 0.25])))

    def forest():
        return BanditForest(n_trees=6, warmup=60, max_depth=(1, 3), epsilon=0.8, seed=4)

    one = forest()
    for event in events:
        one.learn_one(*event)
    many = forest()
    start = 0
    while start < len(events):
        size = rng.randrange(1, 400)
        assert many.learn_many(events[start:start + size]) == len(events[start:start + size])
        start += size
    assert many.n_nodes > 6  # stumps were resolved inside batches
    assert state_hash(many.to_state()) == state_hash(one.to_state())
    # a bad event: the ones before it are learned, then the error is raised, as with learn_one
    bad = [events[0], (events[1][0], "p", float("nan"), 1.0), events[2]]
    before = many.n_learned
    with pytest.raises(ValueError, match="reward"):
        many.learn_many(bad)
    assert many.n_learned == before + 1


def test_decide_from_several_threads_gives_each_call_its_own_probabilities():
    # API replicas decide from a thread pool on one forest: no call may see another's outputs
    import sys
    import threading

    forest = trained_forest()
    rng = random.Random(3)
    contexts = [{"site": rng.choice(["a", "b", "c", "z"]), "age": rng.uniform(10, 90)}
                for _ in range(150)]
    actions = [["k1", "k2"], None, ["k0", "k1", "k2", "new"]]
    expected = [[forest.decide(x, actions=a).probabilities for a in actions] for x in contexts]
    errors = []

    def work():
        for x, want in zip(contexts, expected):
            got = [forest.decide(x, actions=a).probabilities for a in actions]
            if got != want:
                errors.append((x, got, want))

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert not errors


# -- IPS readings (sec. 5) -------------------------------------------------------------------------

def test_plain_ips_is_the_self_normalized_forest_when_every_probability_is_one():
    forests = [BanditForest(n_trees=6, max_depth=2, epsilon=0.5, warmup=30, seed=3, ips=ips)
               for ips in ("self-normalized", "plain")]
    rng = random.Random(4)
    for _ in range(3000):
        x, best = depth2_event(rng)
        action = rng.choice("abcd")  # logged by a deterministic policy: p = 1
        reward = float(rng.random() < (0.8 if action == best else 0.2))
        for forest in forests:
            forest.learn_one(x, action, reward, 1.0)
    states = [f.to_state()["storage"] for f in forests]
    for name, array in states[0].items():
        np.testing.assert_array_equal(states[1][name], array, err_msg=name)
    x, _ = depth2_event(rng)
    assert forests[0].decide(x) == forests[1].decide(x)


def test_plain_ips_averages_reward_over_probability_by_count():
    """ips="plain": the means are sum(y / p) / t_k (VE line 4 with y/p for y); the default
    self-normalises them, sum(y / p) / sum(1 / p)."""
    rng = random.Random(6)
    events = []
    for _ in range(400):
        x = {"x0": int(rng.random() < 0.5), "x1": int(rng.random() < 0.5)}
        events.append((x, rng.choice("ab"), float(rng.random() < 0.6), rng.choice([0.25, 0.5])))
    for ips in ("plain", "self-normalized"):
        forest = BanditForest(n_trees=1, max_depth=1, epsilon=0.0, delta=1e-9, warmup=1,
                              split_fraction=1.0, seed=0, ips=ips)
        for x, action, reward, p in events:
            forest.learn_one(x, action, reward, p)
        storage = forest.to_state()["storage"]
        [slot_T], [slot_W], [slot_R] = storage["slot_T"], storage["slot_W"], storage["slot_Rt"]
        for k, action in enumerate(forest.actions):
            mine = [(y, p) for _, a, y, p in events if a == action]  # warm-up replayed too
            assert slot_T[k] == len(mine)
            assert slot_R[k] == pytest.approx(sum(y / p for y, p in mine))
            denominator = len(mine) if ips == "plain" else sum(1 / p for _, p in mine)
            assert slot_W[k] == pytest.approx(denominator)
    with pytest.raises(ValueError, match="ips"):
        BanditForest(ips="snips")


def test_ips_reading_survives_the_state_round_trip():
    forest = trained_forest(500, ips="plain")
    clone = BanditForest.from_state(forest.to_state())
    assert clone.ips == "plain"
    x = {"site": "a", "age": 30.0}
    forest.learn_one(x, "k1", 1.0, 0.5)
    clone.learn_one(x, "k1", 1.0, 0.5)
    assert clone.to_state()["storage"]["slot_W"].tobytes() == \
        forest.to_state()["storage"]["slot_W"].tobytes()
