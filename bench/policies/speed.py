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
   time (all 26 actions candidates), sparse and dense; beside them, VW squarecb decides the
   same contexts, a fixed-work loop runs as long as the trees' median decision (the
   machine's own tail: what any computation of that length shows here) and so does a loop of
   random reads over 9 MB (``fixed_reads``, since the twenty-eighth session: the tail of a
   computation that, like a decide, reads memory beyond a core's L2), in turns of 1,000
   calls of each (100 before the eighteenth session). p50 / p99 / p99.9 of wall time
   (``perf_counter_ns``) and of the thread's CPU time (``thread_time_ns``: on a shared machine
   wall time includes the time the process waited for a core). Each turn starts with one call
   timed apart (``cold_wall_p50``): it finds the caches as the other kinds left them, which a
   process deciding for one app would not. Before the eighteenth session that call was timed
   with the rest, and in turns of 100 whichever kind came right after VW's turn showed a p99
   of twice its own (the sparse input's 171 us; 99.6 us when it came second).
3. State: bytes of ``to_state()`` (arrays + JSON of the rest) with and without the window.

    python -m bench.policies.speed --data letter --events 200000 --block 1000
"""

from __future__ import annotations

import argparse
import json
import time

import numba
import numpy as np
from tqdm import tqdm

from bench.bandit_forest.players import VWEpsilonPlayer, VWSquareCBPlayer, _draw, vw_features
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


@numba.njit(cache=True)
def _fixed_work(words: np.ndarray, rounds: int) -> int:
    """The same arithmetic on the same L1-resident words every call: its time varies only with
    the machine (interrupts, the other core's load, a VM's neighbours), never with the data."""
    h = np.uint64(0)
    for _ in range(rounds):
        for w in words:
            h ^= w * np.uint64(2654435761)
    return int(h)


@numba.njit(cache=True)
def _fixed_reads(table: np.ndarray, positions: np.ndarray, first: int, rounds: int) -> float:
    """``rounds`` reads of one float at ``positions[first:]`` (wrapping), one per cache line of
    ``table``: a computation that reads memory as a decide does, spread over arrays larger than
    a core's L2, so that it pays as a decide does when something else took the caches."""
    s, n = 0.0, positions.shape[0]
    for k in range(rounds):
        s += table[positions[(first + k) % n]]
    return s


#: the random reads' table: about the trees' kernel layout on Letter at 100k events (8.9 MB)
READ_TABLE_BYTES = 9 << 20

#: calls of one kind in a row in the latency turns: each kind keeps the caches as a server that
#: decides for one app keeps them (VW's weights, 4 MB, would evict the trees' between calls).
#: 1,000 since the eighteenth session (100 before): the trees' arrays (~4.5 MB for 26 x 100
#: trees) are back in the caches only some calls into a turn, and with 100 a turn those calls
#: were the p99 of whichever kind came after VW
TURN = 1000


def _cpu_ns(f, *args) -> int:
    t = time.thread_time_ns()
    f(*args)
    return time.thread_time_ns() - t


def latency(players, data, seed, n):
    """Percentiles (microseconds) of one decide among all actions: the trees with sparse and
    dense input, VW squarecb's (its ADF example built, ``predict``, an action drawn), and a
    fixed-work loop and a loop of random reads, each of the trees' median time, in turns of
    ``TURN`` calls of each (close moments of the machine). The fixed work is the machine's
    floor for arithmetic: what a computation of that length that reads no memory shows at p99
    here. The fixed reads are its floor for a computation of that length that reads memory at
    random, as a decide's tree leaves and masks are read."""
    trees, vw = players["trees_sparse"], players["vw_squarecb"]
    policy = trees.policy
    names = np.array(trees.names, dtype=object)
    X, _ = next(BanditStream(data, seed=seed + 1000, chunk_size=n).chunks(n))
    sparse = [dict.fromkeys(names[row].tolist(), 1) for row in X.view(bool)]
    dense = [dict(zip(trees.names, row)) for row in X.tolist()]
    lines = vw.action_lines

    def vw_decide(row):
        _draw(vw.rng, vw.vw.predict(["shared |s " + vw_features(row), *lines]))

    words = np.arange(256, dtype=np.uint64)
    for x in sparse[:200]:  # warm the kernels and caches, then time the trees' decide
        policy.decide(x)
    target = np.median([_cpu_ns(policy.decide, x) for x in sparse[:200]])
    _fixed_work(words, 1)  # compiled (or loaded) here, not timed
    rounds = 100
    for _ in range(3):  # rescaled until its median is the decide's
        rounds = max(1, round(rounds * target / np.median(
            [_cpu_ns(_fixed_work, words, rounds) for _ in range(100)])))
    table = np.ones(READ_TABLE_BYTES // 8)
    positions = np.random.default_rng(seed).integers(0, len(table) // 8, 1 << 20) * 8
    reads = 100
    for _ in range(5):  # (the table warmed as the turns find it: positions move on each call)
        for k in range(300):
            _fixed_reads(table, positions, k * reads, reads)
        reads = max(1, round(reads * target / np.median(
            [_cpu_ns(_fixed_reads, table, positions, k * reads, reads)
             for k in range(300, 600)])))
    calls = {"sparse": lambda i: policy.decide(sparse[i]),
             "dense": lambda i: policy.decide(dense[i]),
             "vw_squarecb": lambda i: vw_decide(X[i]),
             "fixed_work": lambda i: _fixed_work(words, rounds),
             "fixed_reads": lambda i: _fixed_reads(table, positions, i * reads, reads)}
    for i in range(200):
        for call in calls.values():
            call(i)
    wall = {k: np.empty(n) for k in calls}
    cpu = {k: np.empty(n) for k in calls}
    cold = {k: [] for k in calls}
    for lo in range(0, n, TURN):  # each kind in turn, TURN calls at a time
        for k, call in calls.items():
            # a turn's first call finds the caches as the other kinds left them (VW's 4 MB
            # of weights evict the trees'): timed apart, on a context of the other half
            t = time.perf_counter_ns()
            call((lo + n // 2) % n)
            cold[k].append(time.perf_counter_ns() - t)
            for i in range(lo, min(lo + TURN, n)):
                t, c = time.perf_counter_ns(), time.thread_time_ns()
                call(i)
                cpu[k][i], wall[k][i] = time.thread_time_ns() - c, time.perf_counter_ns() - t
    return {k: {**{f"{clock}_p{q}": float(np.percentile(v[k], q)) / 1e3
                   for clock, v in (("wall", wall), ("cpu", cpu)) for q in (50, 99, 99.9)},
                "cold_wall_p50": float(np.percentile(cold[k], 50)) / 1e3}
            for k in calls}


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
    report["latency_us"] = latency(players, data, args.seed, args.latency)
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
