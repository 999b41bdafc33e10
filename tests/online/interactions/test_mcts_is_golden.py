"""MCTS-IS's learning must not change when its code is made faster.

A golden trace recorded with the numpy code before the compiled kernel
(tests/online/interactions/data/mcts_is_golden.json) is replayed with ``learn_one``: seeded
streams with pruning (c_F = 0),
categories and fields that appear late, missing fields, ``max_categories``, ``max_depth``, a
spent ``max_nodes`` budget, grouping (Appendix B.2) and a ``to_state``/``from_state`` round trip
mid-way. Probabilities on probe rows every 100 samples (rounded to 1e-12), the top interactions,
the node counts and a hash of the final ``to_state()`` must match.

Regenerate (only when a change of the trace is intended, e.g. a bug fix, and say so in the
commit):  python -m tests.online.interactions.test_mcts_is_golden
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from online import MCTSInteractions
from tests.helpers.golden import state_hash

GOLDEN = Path(__file__).parent / "data" / "mcts_is_golden.json"

SCENARIOS = {
    # name: (samples, stream kind, model parameters)
    # max_nodes: the default when the trace was recorded (now 250,000)
    "xor-defaults": (1500, "xor", {"seed": 0, "max_nodes": 1_000_000}),
    "pruning-late-values": (
        1200,
        "late",
        {"c_f": 0.0, "lambda_": 0.05, "grace_period": 1, "seed": 1, "max_nodes": 1_000_000},
    ),
    "budget-depth-cap": (
        1500,
        "wide",
        {"max_nodes": 800, "max_categories": 4, "max_depth": 3, "grace_period": 3, "seed": 2},
    ),
    "groups": (800, "wide", {"groups": 2, "grace_period": 5, "seed": 3, "max_nodes": 1_000_000}),
}


def stream(kind: str, n: int, seed: int):
    rng = random.Random(seed)
    for t in range(n):
        x = {"a": rng.choice("01"), "b": rng.choice("01"), "c": rng.choice("012")}
        y = int(x["a"] != x["b"])
        if kind == "late":
            if t > 300:  # c gains values, a new field e appears, a is sometimes missing
                x["c"] = rng.choice("01234")
            if t > 500:
                x["e"] = rng.choice("xy")
                y = int(x["a"] != x["b"]) if x["e"] == "x" else int(x["c"] == "3")
            if rng.random() < 0.05:
                del x["a"]
        elif kind == "wide":
            x["w"] = str(rng.randrange(10))
            x["z"] = rng.choice("pq")
            y = int((x["a"] == "1") != (x["w"] in "0123") or x["z"] == "p" and x["c"] == "2")
        if rng.random() < 0.1:
            y = 1 - y
        yield x, y


def trace(name: str) -> dict:
    n, kind, params = SCENARIOS[name]
    model = MCTSInteractions(**params)
    rows = list(stream(kind, n, seed=len(name)))
    probes = [x for x, _ in rows[:5]]
    probas = []
    for t, (x, y) in enumerate(rows):
        model.learn_one(x, y)
        if t == n // 2:  # a restored model continues exactly
            model = MCTSInteractions.from_state(model.to_state())
        if t % 100 == 99:
            probas.append([round(model.predict_proba_one(p)[True], 12) for p in probes])
    top = model.interactions(top=5)
    return {
        "probas": probas,
        "transform": [sorted(model.transform_one(p)) for p in probes],
        "interactions": [[t["rule"], round(t["chi2"], 9)] for t in top],
        "nodes": model.n_nodes["data_nodes"],
        "feature_nodes": model.n_nodes["feature_nodes"],
        # the "statistics" flag was added to the state after the trace was recorded
        "state": state_hash({k: v for k, v in model.to_state().items() if k != "statistics"}),
    }


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_golden_trace(name):
    golden = json.loads(GOLDEN.read_text())[name]
    got = json.loads(json.dumps(trace(name)))
    for key in ("probas", "transform", "interactions", "nodes", "feature_nodes"):
        assert got[key] == golden[key], key
    assert got["state"] == golden["state"]


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps({name: trace(name) for name in SCENARIOS}, indent=1) + "\n")
    print(f"wrote {GOLDEN}")
