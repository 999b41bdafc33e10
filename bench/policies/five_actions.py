"""The five-action problem of issue #18: context ``{"favorite": "a3", "device": ..., "hour": ...}``,
five actions, reward 1 when the action is the favorite. Prints each policy's average reward over
events 1,000-2,000 (target >= 0.9) for several seeds.

    python -m bench.policies.five_actions --seeds 0,1,2,3,4,5,6,7,8,9
"""

from __future__ import annotations

import argparse
import random

import numpy as np

ADS = ["a1", "a2", "a3", "a4", "a5"]


def stream(n: int, seed: int):
    rng = random.Random(seed)
    for _ in range(n):
        yield {"favorite": rng.choice(ADS), "device": rng.choice(["mobile", "desktop", "tv"]),
               "hour": rng.random() * 24}


def play(policy, seed: int, n: int = 2000) -> np.ndarray:
    rewards = np.empty(n)
    for i, x in enumerate(stream(n, seed)):
        d = policy.decide(x)
        rewards[i] = r = float(d.action == x["favorite"])
        policy.learn_one(x, d.action, r, d.probability)
    return rewards


def main(argv=None):
    from online.policies.registry import make_policy

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--kinds", default="trees,linucb")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    for kind in args.kinds.split(","):
        values = [play(make_policy(kind, ADS, seed=s), 100 + s)[1000:].mean() for s in seeds]
        print(f"{kind}: events 1,000-2,000 mean {np.mean(values):.4f} "
              f"(min {min(values):.4f}, max {max(values):.4f}, {len(seeds)} seeds)", flush=True)


if __name__ == "__main__":
    main()
