"""A category with an id per event, and a value that becomes popular late: how big the trees get.

A context is ``{"page": p, "hour": h}``: 70 % of the pages are ids seen once (``id<i>``), 30 %
one of five popular pages, and from event ``--hot-at`` on 30 % of the events are a new page,
``hot``, that the second action earns on (five actions; the best action is a function of the
page). A tree-ensemble policy (seed 0, refits inline, ``--window`` events) decides and learns
every event. LightGBM writes a split on a category as a bitset as long as the largest code it
sends left, so what ``hot`` costs depends on the code it gets: until the thirtieth session codes
were never given twice and grew with the stream; now the codes of values forgotten at a refit
are given again, smallest first (``FeatureEncoder.forget_codes``).

    python -m bench.policies.late_popular --events 100000 --hot-at 80000 --window 20000

Printed: the code ``hot`` got, the trees' bitset words (``cat_threshold``), how many trees the
decide's QuickScorer takes (a tree whose bitsets are too long is scored node by node), the
serving state's bytes (``to_state(statistics=False)``: what every snapshot carries), the mean
reward over the events after ``--hot-at``, and the decide's wall us over 3,000 contexts.
"""

from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np
from tqdm import tqdm

ACTIONS = ["a1", "a2", "a3", "a4", "a5"]
POPULAR = [f"p{i}" for i in range(5)]


def page(rng: random.Random, i: int, hot_at: int) -> str:
    if i >= hot_at and rng.random() < 0.3:
        return "hot"
    return rng.choice(POPULAR) if rng.random() < 0.3 else f"id{i}"


def best(p: str) -> str:
    return "a2" if p == "hot" else "a1" if p in POPULAR[:2] else "a3"


def run(events: int, hot_at: int, window: int) -> dict:
    from bench.bandit_forest.speed import state_nbytes
    from online.policies.trees import TreeEnsemblePolicy

    policy = TreeEnsemblePolicy(seed=0, window=window)
    for a in ACTIONS:
        policy.add_action(a)
    rng = random.Random(0)
    earned = []
    for i in tqdm(range(events), desc="trees", unit="ev", mininterval=5):
        x = {"page": page(rng, i, hot_at), "hour": rng.random() * 24}
        d = policy.decide(x)
        reward = float(d.action == best(x["page"]))
        policy.learn_one(x, d.action, reward, d.probability)
        if i >= hot_at:
            earned.append(reward)
    ensemble = policy._ensemble
    contexts = [{"page": rng.choice(["hot", "p1", f"id{events + i}"]), "hour": rng.random() * 24}
                for i in range(3000)]
    for x in contexts[:300]:
        policy.decide(x)
    wall = []
    for x in contexts:
        start = time.perf_counter_ns()
        policy.decide(x)
        wall.append(time.perf_counter_ns() - start)
    hot = policy._encoder.encode({"page": "hot"})[0]
    return {"events": events, "hot_at": hot_at, "window": window,
            "hot_code": None if np.isnan(hot[0]) else int(hot[0]),
            "largest_code": int(policy._encoder.code_counts()[1].max(initial=0)) - 1,
            "bitset_words": len(ensemble.cat_threshold),
            "quick_trees": int((ensemble._packed.qs.leaf0 >= 0).sum()),
            "trees": ensemble.n_trees,
            "serving_state_bytes": state_nbytes(policy.to_state(statistics=False)),
            "reward_after_hot": round(float(np.mean(earned)), 4) if earned else None,
            "decide_us_p50": round(float(np.percentile(wall, 50)) / 1e3, 1),
            "decide_us_p99": round(float(np.percentile(wall, 99)) / 1e3, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--hot-at", type=int, default=80_000)
    ap.add_argument("--window", type=int, default=20_000, help="the trees' window")
    args = ap.parse_args(argv)
    print(json.dumps(run(args.events, args.hot_at, args.window)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
