"""Choosing the tree-ensemble policy's defaults on held-out streams (not Letter, Shuttle, Adult).

Each variant (a name and the JSON of ``TreeEnsemblePolicy`` parameters that differ from the
defaults of the time) plays the paper's protocol on each stream; a name that is a peer of
``compare.PLAYERS`` (linucb, vw_eps, vw_squarecb) plays that peer. Prints the average reward at
1k, 3k, 10k, 30k, 100k steps and over the last 10k steps. Streams with more than 300 variables
get sparse contexts ({variable: 1} for the set ones). Seeds: $SEEDS (default 0).
Held-out streams: ``compare.HELD_OUT`` (german_numeric and credit_a_crx are the two-action,
noisier ones, added for the ``optimism`` choice).

    python -m bench.policies.tune 30000 vowel,vehicle 'base={}' 'nl63={"num_leaves": 63}' linucb={}
"""
from __future__ import annotations

import json
import os
import sys
import time

import numpy as np

from bench.common.streams import BanditStream
from bench.policies.compare import PLAYERS, TreesPlayer, load
from bench.policies.speed import SparseTreesPlayer

HORIZONS = (1000, 3000, 10000, 30000, 100000, 300000)


def main(argv: list[str]) -> None:
    steps, datas = int(argv[0]), argv[1].split(",")
    seeds = [int(s) for s in os.environ.get("SEEDS", "0").split(",")]
    variants = [(v.split("=", 1)[0], json.loads(v.split("=", 1)[1])) for v in argv[2:]]
    hs = [h for h in HORIZONS if h <= steps]
    for d in datas:
        data = load(d)
        for name, params in variants:
            for seed in seeds:
                if name in PLAYERS and name != "trees":
                    p = PLAYERS[name](data, seed, {})
                else:
                    params = dict(params)
                    sparse = params.pop("sparse", data.X.shape[1] > 300)
                    p = (SparseTreesPlayer if sparse else TreesPlayer)(data, seed, **params)
                t = time.process_time()
                r = np.concatenate([p.play(X, y)
                                    for X, y in BanditStream(data, seed=seed).chunks(steps)])
                cpu = time.process_time() - t
                c = np.cumsum(r)
                refits = getattr(getattr(p, "policy", None), "n_refits", None)
                at = " ".join(f"{h // 1000}k={c[h - 1] / h:.4f}" for h in hs)
                print(f"{d:10s} {name:14s} s{seed} {at} last10k={r[-10000:].mean():.4f} "
                      f"cpu={cpu:.0f}s refits={refits}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
