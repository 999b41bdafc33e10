"""How much does the tree-ensemble policy still explore on a low-signal stream? The mean
probability of the greedy action over the last ``--window`` of ``--steps`` events (default:
events 20k-30k of ``mooc_course``, seed 0, the policy's defaults).

    python -m bench.policies.explore_share --data mooc_course --steps 30000 --window 10000
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from bench.common.streams import BanditStream
from bench.policies.compare import load
from online.policies.trees import TreeEnsemblePolicy


def greedy_share(data_name: str, steps: int, window: int, seed: int, params: dict) -> float:
    """Mean probability of the most probable action over the last ``window`` decisions."""
    data = load(data_name)
    policy = TreeEnsemblePolicy(seed=seed, **params)
    for a in data.actions:
        policy.add_action(a)
    greedy = []
    for i, (x, _, label) in enumerate(BanditStream(data, seed=seed).steps(steps)):
        d = policy.decide(x)
        if i >= steps - window:
            greedy.append(max(d.probabilities.values()))
        policy.learn_one(x, d.action, float(d.action == data.actions[label]), d.probability)
    return float(np.mean(greedy))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="mooc_course")
    ap.add_argument("--steps", type=int, default=30_000)
    ap.add_argument("--window", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--params", type=json.loads, default={}, help="JSON for trees")
    args = ap.parse_args(argv)
    share = greedy_share(args.data, args.steps, args.window, args.seed, args.params)
    print(f"{args.data} seed {args.seed}: mean probability of the greedy action over events "
          f"{args.steps - args.window:,}-{args.steps:,}: {share:.3f}")


if __name__ == "__main__":
    main()
