"""Bandit Forest's decisions must not change when its code is made faster.

A golden trace recorded with the code before the speed work (tests/online/bandit/data/
bandit_forest_golden.json) is replayed: seeded streams with L=20 and L=100 trees, excluded
actions, explicit action lists, an action added and one removed at run time, a
``to_state``/``from_state`` round trip mid-way, and ``predict_one``. Every chosen
action, every propensity (rounded to 1e-12) and a hash of the final ``to_state()`` must match.

Regenerate (only when a change of the trace is intended, e.g. a bug fix, and say so in the
commit):  python -m tests.online.bandit.test_bandit_forest_golden
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from online import BanditForest
from tests.helpers.golden import state_hash

GOLDEN = Path(__file__).parent / "data" / "bandit_forest_golden.json"

SCENARIOS = {
    # name: (events, binary variables, actions, forest parameters); shallow trees and a strong
    # signal so that variables are selected, paths split, leaves finish and vote within the run
    "L20": (5000, 30, 4, {"n_trees": 20, "max_depth": (1, 3), "epsilon": (0.5, 0.9)}),
    "L100": (4000, 100, 3, {"n_trees": 100, "max_depth": (1, 2), "epsilon": (0.6, 0.9)}),
    "L10-all-finished": (3000, 20, 3, {"n_trees": 10, "max_depth": 1, "epsilon": 0.8,
                                       "voting": "all-finished", "delta": 0.2}),
}


def context(rng: np.random.Generator, n_binary: int) -> dict:
    """Binary ints plus a categorical, a float and a bool feature (every encoder path)."""
    x = dict(
        zip((f"v{j}" for j in range(n_binary)), (rng.random(n_binary) < 0.4).astype(int).tolist())
    )
    x["site"] = ["a", "b", "c", "d"][int(rng.integers(4))]
    x["age"] = float(np.round(rng.normal(40, 12), 1))
    if rng.random() < 0.7:  # sometimes missing
        x["mobile"] = bool(rng.random() < 0.5)
    return x


def best_action(x: dict, n_actions: int) -> str:
    leaf = 2 * x["v0"] + (x["site"] in ("a", "b"))
    return f"k{leaf % n_actions}"


def run(name: str) -> dict:
    """Play scenario ``name``; returns the trace (actions, propensities, final state hash)."""
    events, n_binary, n_actions, params = SCENARIOS[name]
    rng = np.random.default_rng(7)
    forest = BanditForest(warmup=100, seed=3, **params)
    actions = [f"k{a}" for a in range(n_actions)]
    for a in actions:
        forest.add_action(a)
    chosen, probs, predicted = [], [], []
    for t in range(events):
        if t == events // 3:
            forest.add_action("k9")
        if t == events // 2:
            forest = BanditForest.from_state(forest.to_state())
        if t == 2 * events // 3:
            forest.remove_action("k1")
        x = context(rng, n_binary)
        u = rng.random()
        if u < 0.1:
            d = forest.decide(x, excluded=("k0",))
        elif u < 0.15:
            d = forest.decide(x, actions=["k1", "k2", "new-ad"])
        else:
            d = forest.decide(x)
        chosen.append(d.action)
        probs.append(round(d.probability, 12))
        p_best = 0.9 if d.action == best_action(x, n_actions) else 0.1
        reward = float(rng.random() < p_best)
        if d.action == "new-ad":  # never learned: the forest must still accept it later
            continue
        forest.learn_one(x, d.action, reward, d.probability)
        if t % 250 == 0:
            predicted.append(forest.predict_one(x))
    return {"actions": chosen, "probabilities": probs, "predicted": predicted,
            "n_nodes": int(forest.n_nodes), "state": state_hash(forest.to_state())}


@pytest.fixture(scope="module")
def golden() -> dict:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_decisions_match_the_golden_trace(golden, name):
    expected = golden[name]
    got = run(name)
    assert got["actions"] == expected["actions"]
    assert got["probabilities"] == expected["probabilities"]
    assert got["predicted"] == expected["predicted"]
    assert got["n_nodes"] == expected["n_nodes"]
    assert got["state"] == expected["state"]


if __name__ == "__main__":
    GOLDEN.parent.mkdir(parents=True, exist_ok=True)
    GOLDEN.write_text(json.dumps({name: run(name) for name in SCENARIOS}) + "\n")
    print(f"wrote {GOLDEN}")
