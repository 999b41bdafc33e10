"""How fast is the tree-ensemble policy? decide+learn events/s against VW, side by side; decide
latency; state size.

1. Whole stream, side by side: the tree-ensemble policy (``TreeEnsemblePolicy`` with its
   defaults, refits inline in ``learn_one`` and timed), VW ``--cb_explore_adf --squarecb -q sa``
   and VW ``--cb_explore K --epsilon 0.05`` play the same noisy stream (default Letter, 26
   actions) in alternating blocks of ``--block`` events, so that all see the same machine load.
   Rates are events per second of CPU time (``time.process_time``); timed per event: building
   the policy's input from the numpy row, decide, learn with the reward of the chosen action.
   The trees get two inputs: ``sparse`` (``{variable: 1}`` for the variables a row sets, VW's
   input; the others are missing) and ``dense`` (every variable, 0 or 1: what
   ``bench/policies/compare.py`` plays).
2. Decide latency: the trained policy decides ``--latency`` contexts of the stream one at a
   time (all 26 actions candidates); p50 / p99 / p99.9 of wall time (``perf_counter_ns``) and of
   the thread's CPU time (``thread_time_ns``: on a shared machine wall time includes the time the
   process waited for a core).
3. State: bytes of ``to_state()`` (arrays + JSON of the rest) with and without the window.

    python -m bench.policies.speed --data letter --events 200000 --block 1000
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from tqdm import tqdm

from bench.bandit_forest.players import VWEpsilonPlayer, VWSquareCBPlayer
from bench.bandit_forest.speed import state_nbytes
from bench.common.paths import OUT
from bench.common.streams import BanditStream
from bench.policies.compare import TreesPlayer, load


class SparseTreesPlayer(TreesPlayer):
    """``TreesPlayer`` with ``{variable: 1}`` for the variables a row sets (VW's input)."""

    name = "trees_sparse"

    def play(self, X, y):
        out = np.empty(len(y))
        decide, learn, index = self.policy.decide, self.policy.learn_one, self.index
        names = np.array(self.names, dtype=object)
        for i, (row, label) in enumerate(zip(X.view(bool), y.tolist())):
            x = dict.fromkeys(names[row].tolist(), 1)
            d = decide(x)
            out[i] = r = 1.0 if index[d.action] == label else 0.0
            learn(x, d.action, r, d.probability)
        return out


PHASES = ((0, 20_000), (20_000, 100_000), (100_000, 300_000), (300_000, 1_000_000))


def whole_stream(data, seed, events, block, params):
    players = {"trees_sparse": SparseTreesPlayer(data, seed, **params),
               "trees_dense": TreesPlayer(data, seed, **params),
               "vw_squarecb": VWSquareCBPlayer(data, seed),
               "vw_eps": VWEpsilonPlayer(data, seed)}
    cpu = {name: [] for name in players}
    rewards = {name: 0.0 for name in players}
    with tqdm(total=events, desc="side by side", unit="ev", mininterval=10) as bar:
        for X, y in BanditStream(data, seed=seed, chunk_size=block).chunks(events):
            for name, player in players.items():
                c = time.process_time()
                r = player.play(X, y)
                cpu[name].append(time.process_time() - c)
                rewards[name] += float(r.sum())
            bar.update(len(y))
    sizes = np.full(len(cpu["vw_eps"]), block, float)
    sizes[-1] = events - block * (len(sizes) - 1)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    report = {"phases": {}, "mean_reward": {k: v / events for k, v in rewards.items()}}

    def rates(mask):
        n = float(sizes[mask].sum())
        r = {name: n / np.asarray(c)[mask].sum() for name, c in cpu.items()}
        for name in ("trees_sparse", "trees_dense"):
            r[f"{name} / vw_squarecb"] = r[name] / r["vw_squarecb"]
        return {"events": int(n), **r}

    for lo, hi in PHASES:
        mask = (starts >= lo) & (starts < hi)
        if mask.any():
            report["phases"][f"{lo}-{min(hi, events)}"] = rates(mask)
    report["overall"] = rates(np.ones(len(sizes), bool))
    trees = players["trees_sparse"].policy
    report["refits"] = trees.n_refits
    return players, report


def latency(player, data, seed, n):
    """Percentiles (microseconds) of one decide among all actions, for sparse and dense input."""
    policy = player.policy
    names = np.array(player.names, dtype=object)
    X, _ = next(BanditStream(data, seed=seed + 1000, chunk_size=n).chunks(n))
    out = {}
    for kind in ("sparse", "dense"):
        if kind == "sparse":
            contexts = [dict.fromkeys(names[row].tolist(), 1) for row in X.view(bool)]
        else:
            contexts = [dict(zip(player.names, row)) for row in X.tolist()]
        for x in contexts[:200]:  # warm the kernels and caches
            policy.decide(x)
        wall, cpu = np.empty(n), np.empty(n)
        for i, x in enumerate(contexts):
            t, c = time.perf_counter_ns(), time.thread_time_ns()
            policy.decide(x)
            cpu[i], wall[i] = time.thread_time_ns() - c, time.perf_counter_ns() - t
        out[kind] = {f"{clock}_p{q}": float(np.percentile(v, q)) / 1e3
                     for clock, v in (("wall", wall), ("cpu", cpu)) for q in (50, 99, 99.9)}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="letter")
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--block", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--latency", type=int, default=20_000)
    ap.add_argument("--params", type=json.loads, default={}, help="JSON for trees")
    ap.add_argument("--out", type=str, default=str(OUT / "policies_speed"))
    args = ap.parse_args(argv)
    data = load(args.data)
    players, report = whole_stream(data, args.seed, args.events, args.block, args.params)
    report["latency_us"] = latency(players["trees_sparse"], data, args.seed, args.latency)
    policy = players["trees_sparse"].policy
    report["state_bytes"] = state_nbytes(policy.to_state())
    report["serving_state_bytes"] = state_nbytes(policy.to_state(statistics=False))
    report["trees"] = policy.n_trees_fitted
    report.update(data=args.data, events=args.events, block=args.block, seed=args.seed,
                  params=args.params)
    from pathlib import Path

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{args.data}_{args.events}_s{args.seed}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
