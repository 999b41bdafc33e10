"""The auto policy: the floor, evaluation, switching, candidate changes, hostile input."""

from __future__ import annotations

import random
import types

import numpy as np
import pytest

from online import make_policy
from online.policies.auto import AutoPolicy, CandidateConflict

ADS = ["a1", "a2", "a3", "a4", "a5"]


def _favorite_events(policy, n, rng):
    """The five-action problem: reward 1 iff the action is the context's favorite."""
    for _ in range(n):
        x = {"favorite": rng.choice(ADS), "device": rng.choice(["pc", "phone", "tv"])}
        d = policy.decide(x)
        policy.learn_one(x, d.action, float(d.action == x["favorite"]), d.probability)


def test_served_probabilities_keep_the_floor_and_are_exact():
    policy = AutoPolicy(candidates=[{"kind": "linucb"}], floor=0.2, actions=ADS, seed=0)
    _favorite_events(policy, 300, random.Random(1))
    x = {"favorite": "a2", "device": "pc"}
    probs = policy.probabilities(x)
    assert min(probs.values()) >= 0.2 / 5 - 1e-12
    assert abs(sum(probs.values()) - 1) < 1e-12
    assert max(probs, key=probs.get) == "a2"
    d = policy.decide(x)
    assert d.probability == probs[d.action]
    # excluded actions: the floor is spread over the allowed ones
    probs = policy.probabilities(x, excluded=["a1", "a2"])
    assert set(probs) == {"a3", "a4", "a5"} and min(probs.values()) >= 0.2 / 3 - 1e-12


def test_two_candidates_of_equal_value_almost_never_switch():
    """Rewards do not depend on the action: every policy is worth 0.5, any switch is wrong."""
    runs, switched = 30, 0
    for run in range(runs):
        rng = np.random.default_rng(run)
        policy = AutoPolicy(candidates=[{"kind": "bandit-forest", "params": {"warmup": 50}},
                                        {"kind": "linucb"}],
                            actions=ADS, min_events=100, seed=run)
        for _ in range(15):
            events = []
            for _ in range(100):
                x = {"f": str(rng.integers(4)), "g": float(rng.random())}
                d = policy.decide(x)
                events.append((x, d.action, float(rng.random() < 0.5), d.probability))
            policy.learn_many(events)
        switched += bool(policy.switches)
    assert switched <= 0.05 * runs


def test_a_better_challenger_takes_over_and_keeps_serving():
    policy = AutoPolicy(candidates=[{"kind": "bandit-forest"}, {"kind": "linucb"}],
                        actions=ADS, seed=3)
    rng = random.Random(3)
    _favorite_events(policy, 3000, rng)
    assert policy.serving == "linucb"
    (switch,) = policy.switches
    assert switch["from"] == "bandit-forest" and switch["to"] == "linucb"
    figures = switch["estimates"]
    assert figures["linucb"]["lower"] > figures["bandit-forest"]["upper"]
    assert switch["at"] >= 500  # min_events
    rows = {e["name"]: e for e in policy.evaluations()}
    assert rows["linucb"]["serving"] and not rows["bandit-forest"]["serving"]
    # a learning candidate's band bounds its best value so far from below and its worst from
    # above (the class doc), not its running mean: no containment of the estimate is asserted
    assert 0.0 <= rows["linucb"]["lower"] <= 1.0 and 0.0 <= rows["linucb"]["estimate"] <= 1.0
    assert rows["linucb"]["events"] == 3000
    served = 0.0
    for _ in range(1000):
        x = {"favorite": rng.choice(ADS), "device": "pc"}
        served += policy.decide(x).action == x["favorite"]
    assert served / 1000 >= 0.85


def test_candidates_change_at_run_time_and_keep_what_the_others_learned():
    policy = AutoPolicy(candidates=[{"kind": "linucb"}, {"kind": "bandit-forest"}],
                        actions=ADS, seed=0)
    _favorite_events(policy, 400, random.Random(0))
    linucb_state = policy.candidate("linucb").to_state()
    policy.add_candidate({"kind": "linucb", "name": "wide", "params": {"alpha": 3.0}})
    assert policy.candidate("wide").n_learned == 0
    with pytest.raises(CandidateConflict, match="serving"):
        policy.remove_candidate("linucb")
    with pytest.raises(CandidateConflict, match="serving"):
        policy.set_candidates([{"kind": "bandit-forest"}])
    with pytest.raises(ValueError, match="unknown policy kind 'nope'"):
        policy.add_candidate({"kind": "nope"})
    with pytest.raises(ValueError, match="no parameter 'alpah'"):
        policy.add_candidate({"kind": "linucb", "params": {"alpah": 1}})
    with pytest.raises(ValueError, match="epsilon"):
        policy.set_candidates([{"kind": "linucb"}, {"kind": "linucb", "name": "x",
                                                     "params": {"epsilon": 7}}])
    assert [c["name"] for c in policy.candidates] == ["linucb", "bandit-forest", "wide"]
    policy.set_candidates([{"kind": "bandit-forest"}, {"kind": "linucb", "name": "wide",
                                                         "params": {"alpha": 3.0}}],
                          serving="wide")
    assert policy.serving == "wide"
    assert policy.switches[-1]["reason"] == "operator"
    assert policy.candidate("bandit-forest").n_learned == 400
    assert [e["name"] for e in policy.evaluations()] == ["bandit-forest", "wide"]
    policy.set_candidates([{"kind": "linucb"}, {"kind": "linucb", "name": "wide",
                                                 "params": {"alpha": 3.0}}])
    assert policy.serving == "wide" and policy.candidate("linucb").n_learned == 0
    assert linucb_state["n_learned"] == 400


def test_hostile_events_neither_crash_nor_bias():
    policy = AutoPolicy(candidates=[{"kind": "linucb"}, {"kind": "bandit-forest"}],
                        actions=ADS, seed=0)
    x = {"favorite": "a1", "device": "pc"}
    policy.learn_one(x, "a1", 7.0, 0.5)  # reward out of range: clipped, counted
    policy.learn_one(x, "a2", -3.0, 0.5)
    assert policy.clipped_rewards == 2
    with pytest.raises(ValueError, match="probability must be in"):
        policy.learn_many([(x, "a1", 1.0, 0.5), (x, "a1", 1.0, 0.0), (x, "a1", 1.0, 0.5)])
    assert policy.n_learned == 3  # the event before the bad one was learned, none after
    policy.learn_one(x, "a3", 1.0, 1e-9)  # far below the floor: weight capped at K / floor
    (row, _) = policy.evaluations()
    assert 0.0 <= row["lower"] <= row["upper"] <= 1.0 and row["events"] == 4
    policy.learn_one(x, "new-ad", 1.0, 0.5)  # an action nobody had: added everywhere
    assert "new-ad" in policy.candidate("bandit-forest").actions


def test_a_bad_context_leaves_the_events_before_it_learned_by_every_candidate():
    """The events before a context some candidate refuses are learned by all, the bad one by
    none (before: a NaN lost the whole batch, the estimates too; a context the forest alone
    refused was learned by LinUCB and not by the forest, out of step for good)."""
    rng = random.Random(0)
    good = [({"n": rng.random()}, rng.choice(ADS), float(rng.random() < .5), 0.5)
            for _ in range(5)]
    for bad in ({"n": float("nan")}, {"n": 1e300}, {"n": [object()]}):
        policy = AutoPolicy(candidates=[{"kind": "linucb"}, {"kind": "bandit-forest"}],
                            actions=ADS, seed=0)
        with pytest.raises((ValueError, TypeError)):
            policy.learn_many([*good, (bad, "a1", 1.0, 0.5), *good])
        assert policy.n_learned == 5
        assert [c.n_learned for c in map(policy.candidate, ("linucb", "bandit-forest"))] == [5, 5]
        assert [row["events"] for row in policy.evaluations()] == [5, 5]
    # a value of the other kind than its feature's first (a number, then a string) is one the
    # forest now codes as missing, as the regressions code both: every candidate learns it
    policy = AutoPolicy(candidates=[{"kind": "linucb"}, {"kind": "bandit-forest"}],
                        actions=ADS, seed=0)
    policy.learn_many([({"age": 31.0}, "a1", 1.0, 0.5), ({"age": "unknown"}, "a2", 0.0, 0.5)])
    assert [c.n_learned for c in map(policy.candidate, ("linucb", "bandit-forest"))] == [2, 2]


def test_a_refused_candidate_list_leaves_refits_deferred():
    """All or nothing: a bad list restores the policy, and its candidates' refits stay the
    caller's (the restored candidates refitted inline before)."""
    policy = make_policy("auto", actions=ADS, seed=0, min_events=10)
    policy.defer_refits()
    with pytest.raises(ValueError):
        policy.set_candidates([{"kind": "trees"}, {"kind": "linucb", "name": 123}])
    rng = random.Random(0)
    for _ in range(60):
        policy.learn_one({"n": rng.random()}, rng.choice(ADS), rng.random(), 0.5)
    assert policy.candidate("trees").n_refits == 0 and policy.refit_due()


def test_a_removed_actions_late_events_count_with_weight_zero():
    policy = AutoPolicy(actions=ADS, seed=1)
    rng = random.Random(2)
    _favorite_events(policy, 300, rng)
    before = {e["name"]: e for e in policy.evaluations()}
    policy.remove_action("a2")
    late = [({"favorite": "a2"}, "a2", 1.0, 0.2)] * 3 + [({"favorite": "a1"}, "a1", 0.0, 0.2)]
    policy.learn_many(late)  # no candidate would serve a2 now: its rewards add nothing
    assert "a2" not in policy.actions
    for e in policy.evaluations():
        old = before[e["name"]]
        assert e["events"] == old["events"] + 4 and e["snips"] <= old["snips"]
        assert e["ips"]["estimate"] == pytest.approx(old["ips"]["estimate"] * 300 / 304)
    policy.remove_action("a1")
    for a in ("a3", "a4", "a5"):
        policy.remove_action(a)
    policy.learn_one({"favorite": "a1"}, "a1", 1.0, 0.2)  # no inventory: learned, not evaluated
    assert policy.actions == [] and policy.n_learned == 305


def test_state_round_trip_is_exact():
    policy = make_policy("auto", actions=ADS, seed=5,
                         candidates=[{"kind": "linucb"}, {"kind": "bandit-forest",
                                                          "params": {"warmup": 30}}])
    rng = random.Random(5)
    _favorite_events(policy, 700, rng)
    from service import codec  # the service's storage format (msgpack + arrays, never pickle)

    clone = AutoPolicy.from_state(codec.decode(codec.encode(policy.to_state())))
    assert clone.evaluations() == policy.evaluations()
    assert clone.switches == policy.switches and clone.params() == policy.params()
    for _ in range(200):
        x = {"favorite": rng.choice(ADS), "device": rng.choice(["pc", "tv"])}
        a, b = policy.decide(x), clone.decide(x)
        assert a == b
        policy.learn_one(x, a.action, float(a.action == x["favorite"]), a.probability)
        clone.learn_one(x, b.action, float(b.action == x["favorite"]), b.probability)
    assert clone.evaluations() == policy.evaluations()


def test_a_serving_copy_holds_the_serving_candidate_only_and_decides_the_same():
    """What the trainer publishes every second: the serving candidate's model, the figures
    of all; the others' models are in the full state only."""
    from service import codec

    policy = make_policy("auto", actions=ADS, seed=5)  # trees serve, linucb learns beside
    rng = random.Random(6)
    _favorite_events(policy, 600, rng)
    state = policy.to_state(statistics=False)
    assert [c["state"] is None for c in state["model"]["candidates"]] == [False, True]
    assert len(codec.encode(state)) < len(codec.encode(
        {**state, "model": policy._model_state(statistics=True)}))
    serving = AutoPolicy.from_state(codec.decode(codec.encode(state)))
    assert serving.evaluations() == policy.evaluations() and serving.serving == "trees"
    for _ in range(50):
        x = {"favorite": rng.choice(ADS), "device": rng.choice(["pc", "tv"])}
        assert serving.probabilities(x) == policy.probabilities(x)
    assert AutoPolicy.from_state(serving.to_state(statistics=False)).evaluations() == \
        policy.evaluations()
    # it decides; learning or changing it needs the full state, and says so
    x = {"favorite": "a1", "device": "pc"}
    for change in (lambda: serving.learn_one(x, "a1", 1.0, 0.2), lambda: serving.serve("linucb"),
                   lambda: serving.add_action("a6"), lambda: serving.candidate("linucb"),
                   lambda: serving.to_state()):
        with pytest.raises(ValueError, match="serving copy"):
            change()
    assert serving.n_learned == policy.n_learned and serving.actions == ADS
    with pytest.raises(ValueError, match="serving candidate"):  # (its model is required)
        bad = codec.decode(codec.encode(state))
        bad["model"]["serving"] = "linucb"
        AutoPolicy.from_state(bad)


def test_inverted_bands_of_learning_candidates_do_not_make_them_trade_places(monkeypatch):
    """Regression (Shuttle stream, 100k steps: trees and LinUCB swapped at every event from
    event 15,459 on). Bands of learning candidates may be inverted (lower > upper); with
    each one's lower bound above the other's upper bound, the old rule switched both ways."""
    from online.evaluation import Estimate

    policy = AutoPolicy(candidates=[{"kind": "linucb"}, {"kind": "linucb", "name": "other",
                                                         "params": {"alpha": 0.5}}],
                        min_events=100, actions=ADS, seed=0)
    values = {"linucb": 0.90, "other": 0.92}
    monkeypatch.setattr(policy, "_bands", lambda: [
        Estimate(values[c.name], 0.95, 0.60, 10_000) for c in policy._candidates_])
    _favorite_events(policy, 1000, random.Random(2))
    # one switch, to the higher estimate; none back although the bands still allow it
    assert [(s["from"], s["to"]) for s in policy.switches] == [("linucb", "other")]
    values.update(linucb=0.93)  # now the estimates cross: a switch back, after a cool-down
    _favorite_events(policy, 1000, random.Random(3))
    assert [s["to"] for s in policy.switches] == ["other", "linucb"]
    gaps = np.diff([s["at"] for s in policy.switches])
    assert (gaps >= 100).all()


@pytest.mark.parametrize("estimator", ["ips", "dr"])
def test_candidates_are_evaluated_over_the_actions_each_request_offered(estimator):
    """A request that names its actions (a Personalizer rank request, ``excludedActions``): each
    candidate is evaluated as it would have decided among those, not among the inventory.
    Every request here offers a0 and a1 (a0 earns), drawn uniformly; the inventory has eight
    actions more that no request offers, which LinUCB's bound, over the inventory, would play
    (they were never played), earning nothing in the estimate."""
    policy = AutoPolicy(actions=[f"a{i}" for i in range(10)], estimator=estimator, seed=0)
    rng = np.random.default_rng(0)
    events = []
    for _ in range(3000):
        x = {"f": float(rng.random())}
        action = "a0" if rng.random() < 0.5 else "a1"
        events.append((x, action, float(action == "a0"), 0.5, ["a0", "a1"]))
    policy.learn_many(events)
    figures = {e["kind"]: e for e in policy.evaluations()}
    # both learn that a0 earns 1 within the first batch of 1,024 events (evaluated as they were
    # before it: uniform, worth 0.5); then worth ~1: 0.82 in all. Over the inventory: 0.16-0.60
    for kind in ("trees", "linucb"):
        assert figures[kind]["estimate"] > 0.75, (kind, figures[kind])
        assert figures[kind]["events"] == 3000


def test_each_request_s_own_actions_scored_at_once_as_group_by_group():
    """The trees', LinUCB's and ``adf``'s ``offered_rows`` (every event over its own actions,
    one call; ``adf`` with the actions' features each event brought) fill the evaluation's
    rows as scoring each group of events that offered the same actions does (what a
    candidate without it gets), number for number, events of the inventory beside them."""
    actions = [f"a{i}" for i in range(8)]
    policy = AutoPolicy(actions=actions, seed=0, candidates=[
        {"kind": "trees"}, {"kind": "linucb"}, {"kind": "adf"}])
    rng = np.random.default_rng(1)

    def event():
        x = {"f": float(rng.random()), "g": str(rng.integers(3))}
        offer = None if rng.random() < 0.2 else tuple(rng.permutation(actions)[:3].tolist())
        action = (offer or actions)[0]
        features = None if offer is None or rng.random() < 0.3 else {
            a: {"shape": f"s{int(a[1:]) % 3}", "size": float(rng.random())} for a in offer}
        return x, action, float(rng.random() < 0.3), 1 / len(offer or actions), offer, features

    policy.learn_many([event() for _ in range(1500)])
    batch = [event() for _ in range(200)]
    groups: dict = {}
    for i, e in enumerate(batch):
        groups.setdefault(e[4], []).append(i)
    position = {a: j for j, a in enumerate(actions)}
    for c in policy._candidates_:
        at_once, by_group = np.zeros((2, len(batch), len(actions)))
        policy._fill_target(at_once, c.policy, batch, groups, (position, actions))
        grouped = types.SimpleNamespace(distribution_rows=c.policy.distribution_rows) \
            if hasattr(c.policy, "distribution_rows") else \
            types.SimpleNamespace(probabilities=c.policy.probabilities)  # (adf: row by row)
        policy._fill_target(by_group, grouped, batch, groups, (position, actions))
        assert (at_once == by_group).all() and np.allclose(at_once.sum(axis=1), 1.0), c.name
        assert (at_once[[i for i, e in enumerate(batch) if e[4]]] == 0).sum() > 0

def test_an_event_s_offered_actions_must_be_a_list_of_ids():
    policy = AutoPolicy(actions=["a0", "a1"], seed=0)
    with pytest.raises(ValueError, match="list of action ids"):
        policy.learn_many([({"f": 1.0}, "a0", 1.0, 0.5, "a0")])
    assert policy.learn_many([({"f": 1.0}, "a0", 1.0, 0.5, None)]) == 1
