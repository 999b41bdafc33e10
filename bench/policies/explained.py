"""How much of the rewards the tree-ensemble policy's models explain, as a stream goes on.

Plays the default ``trees`` policy on a stream of the paper's protocol and prints, per block
of events, the block's mean reward and the share of the rewards' variance, beyond each
action's mean, that the models explained out of sample at the last refit
(``TreeEnsemblePolicy.explained``, ``refit.explained_share``): the weight of the optimism
bonus by default.

    python -m bench.policies.explained --data letter --events 10000
    python -m bench.policies.explained --data mooc_course --events 30000
"""
from __future__ import annotations

import argparse

import numpy as np

from bench.common.streams import BanditStream
from bench.policies.compare import TreesPlayer, load


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="letter")
    ap.add_argument("--events", type=int, default=10000)
    ap.add_argument("--block", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    data = load(args.data)
    player = TreesPlayer(data, args.seed)
    done, block = 0, []
    print("events  reward  explained  refits")
    for X, y in BanditStream(data, seed=args.seed).chunks(args.events):
        start = 0
        while start < len(y):  # up to the next multiple of the block (chunks are 4,096 long)
            end = min(len(y), start + args.block - done % args.block)
            block.append(player.play(X[start:end], y[start:end]))
            done += end - start
            start = end
            if done % args.block == 0 or done == args.events:
                policy = player.policy
                print(f"{done:6d}  {np.concatenate(block).mean():.3f}   "
                      f"{policy.explained:.3f}     {policy.n_refits}", flush=True)
                block = []


if __name__ == "__main__":
    main()
