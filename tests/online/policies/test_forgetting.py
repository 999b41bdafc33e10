"""Stale actions are forgotten (online/policies/base.py, ``Policy._forget_stale``): an inventory
that keeps changing must not grow a policy's arrays, or its state, without bound."""

from __future__ import annotations

import numpy as np
import pytest

from online.policies.base import FORGET_AT_ONCE
from online.policies.linucb import LinUCB
from online.policies.registry import make_policy
from online.policies.trees import TreeEnsemblePolicy

HORIZON = 600
SMALL = {"trees": {"window": HORIZON, "n_trees": 5, "refit_min": 100},
         "linucb": {"forget_after": HORIZON}}
SMALL["auto"] = {"candidates": [{"kind": k, "params": p} for k, p in SMALL.items()]}


class _Remembering:
    """The same policy, never forgetting."""

    def _forget_horizon(self):
        return None


class RememberingTrees(_Remembering, TreeEnsemblePolicy):
    pass


class RememberingLinUCB(_Remembering, LinUCB):
    pass


def churn(policy, events: int, live: int = 8, every: int = 10, seed: int = 0):
    """Every ``every`` events the oldest action leaves and a new one comes; the action whose
    number matches the context's first feature earns 1. Yields each decision."""
    rng = np.random.default_rng(seed)
    serial = len(policy.actions)
    for t in range(events):
        if t and t % every == 0:
            policy.remove_action(policy.actions[0])
            policy.add_action(f"a{serial}")
            serial += 1
        f = rng.random(3)
        x = {"f0": float(f[0]), "f1": float(f[1]), "f2": float(f[2])}
        d = policy.decide(x)
        good = int(f[0] * live) == int(d.action[1:]) % live
        policy.learn_one(x, d.action, float(good), d.probability)
        yield x, d


def start(kind: str, cls=None, live: int = 8):
    actions = [f"a{i}" for i in range(live)]
    if cls is None:
        return make_policy(kind, actions=actions, seed=0, **SMALL[kind])
    policy = cls(seed=0, **SMALL[kind])
    for a in actions:
        policy.add_action(a)
    return policy


@pytest.mark.parametrize("kind", ["trees", "linucb", "auto"])
def test_an_inventory_that_changes_keeps_the_policy_bounded(kind):
    policy = start(kind)
    sizes = []
    for t, _ in enumerate(churn(policy, 4000), 1):
        if t % 500 == 0:
            sizes.append(len(policy.to_state()["actions"]))
    # an action lives 80 events and is stale HORIZON events after its last: ~68 actions are
    # not stale at any time; the arrays keep at most twice that, or FORGET_AT_ONCE more
    assert policy.n_forgotten > 300
    assert max(sizes[2:]) <= 2 * (HORIZON // 10 + 8) + FORGET_AT_ONCE
    assert len(policy.actions) == 8
    clone = type(policy).from_state(policy.to_state())  # renumbered arrays, restored the same
    assert clone.n_forgotten == policy.n_forgotten
    for x, _ in churn(start(kind), 50, seed=5):
        assert clone.probabilities(x) == policy.probabilities(x)


@pytest.mark.parametrize("kind,remembering", [("trees", RememberingTrees),
                                              ("linucb", RememberingLinUCB)])
def test_forgetting_leaves_every_decision_as_it_was(kind, remembering):
    """What is forgotten is never read again: the same draws, the same probabilities."""
    policy, twin = start(kind, type(make_policy(kind))), start(kind, remembering)
    for (x, d), (_, e) in zip(churn(policy, 3000), churn(twin, 3000)):
        assert d == e, x
    assert policy.n_forgotten > 100 and twin.n_forgotten == 0
    assert len(policy.to_state()["actions"]) < len(twin.to_state()["actions"]) / 2


@pytest.mark.parametrize("kind", ["trees", "linucb", "auto"])
def test_actions_that_came_with_events_leave_the_inventory_when_forgotten(kind):
    """A Personalizer app's requests bring their own actions, which come into the inventory
    with their events and are never removed: forgotten once stale, they leave it. An added
    action stays however long it goes without an event."""
    policy = make_policy(kind, actions=["kept"], seed=0, **SMALL[kind])
    rng = np.random.default_rng(0)
    for t in range(6000):
        offered = [f"day{t // 100}-{j}" for j in range(4)]  # a new set every 100 events
        x = {"f": float(rng.random())}
        d = policy.decide(x, actions=offered)
        policy.learn_one(x, d.action, float(rng.random() < 0.2), d.probability)
    assert "kept" in policy.actions
    assert policy.n_forgotten >= 2 * FORGET_AT_ONCE
    assert len(policy.actions) <= 4 * (HORIZON // 100 + 1) * 2 + FORGET_AT_ONCE
    assert all(a == "kept" or a.startswith("day") for a in policy.actions)
    if kind == "auto":  # every candidate's inventory is the auto policy's
        for spec in policy.candidates:
            assert policy.candidate(spec["name"]).actions == policy.actions


def test_a_forgotten_action_that_comes_back_is_a_new_one():
    policy = start("linucb")
    policy.learn_one({"f0": 1.0}, "a0", 1.0, 0.5)
    policy.remove_action("a0")
    for _ in churn(policy, 2000):
        pass
    assert "a0" not in policy.to_state()["actions"]  # forgotten
    policy.add_action("a0")
    k = policy._index["a0"]
    assert policy._plays[k] == 0 and (policy._b[k] == 0).all()
