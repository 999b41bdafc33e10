"""How fast is Bandit Forest? decide+learn events/s against Vowpal Wabbit, side by side; memory.

Both policies play the same noisy stream (``bench/common/streams.py``; default: a synthetic
stream of 100 binary variables and 7 actions, or ``--data shuttle|letter|adult``), in alternating
blocks of ``--block`` events so that both see the same machine load. Rates are events per second of
CPU time (``time.process_time``: on a shared machine wall time mostly measures the others'
load); the wall-time rates are printed beside them. Timed per event: building the
policy's input from the numpy row (a dict for the forest, VW text for VW), decide, and learn
with the reward of the chosen action. Stream generation is not timed.

  - Bandit Forest: ``BanditForest(n_trees=100, seed)``, ``decide(x)`` + ``learn_one(x, a, r, p)``
  - VW: ``--cb_explore 7 --epsilon 0.05``, ``predict`` + ``learn`` (cost = -reward, logged p)

Then the forest alone keeps learning to ``--memory-events`` (default 1M) and reports the size of
its state (the bytes of the ``to_state()`` arrays plus the JSON of the scalars) at checkpoints,
and the traced Python memory (tracemalloc) of a forest after ``--tracemalloc-events`` events.

    nice -n 10 python -m bench.bandit_forest.speed --data synthetic --events 50000 \
        --memory-events 1000000
"""

from __future__ import annotations

import argparse
import json
import time
import tracemalloc
from pathlib import Path

import numpy as np
from tqdm import tqdm

from bench.bandit_forest.players import ForestPlayer, SparseForestPlayer, VWEpsilonPlayer
from bench.common.paths import OUT
from bench.common.streams import BanditStream, load

#: this topic's figures
PLOTS = Path(__file__).resolve().parent / "plots"

FOREST_PLAYERS = {"sparse": SparseForestPlayer, "dense": ForestPlayer}


def state_nbytes(state) -> int:
    """Bytes of a ``to_state()`` dict: numpy array buffers plus the JSON of everything else."""
    arrays = 0

    def strip(node):
        nonlocal arrays
        if isinstance(node, np.ndarray):
            arrays += node.nbytes
            return None
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [strip(v) for v in node]
        return node

    rest = strip(state)
    return arrays + len(json.dumps(rest, default=str))


def side_by_side(data, seed, events, block, n_trees, forest_params, after=0, context="sparse"):
    """Rates (events/s) of both players on the same blocks: by CPU time (process_time, what
    counts on a shared machine) and by wall time. With ``after``, both first play that many
    events untimed (the forest's cost falls as its paths finish: see the README)."""
    forest = FOREST_PLAYERS[context](data, seed, n_trees=n_trees, **forest_params)
    vw = VWEpsilonPlayer(data, seed, epsilon=0.05)
    times = {"forest": [], "vw": []}
    cpu = {"forest": [], "vw": []}
    rewards = {"forest": 0.0, "vw": 0.0}
    done = 0
    with tqdm(
        total=after + events, desc="forest | vw side by side", unit="ev", mininterval=5
    ) as bar:
        for X, y in BanditStream(data, seed=seed, chunk_size=block).chunks(after + events):
            timed = done >= after
            for name, player in (("forest", forest), ("vw", vw)):
                t, c = time.perf_counter(), time.process_time()
                r = player.play(X, y)
                if timed:
                    cpu[name].append(time.process_time() - c)
                    times[name].append(time.perf_counter() - t)
                    rewards[name] += float(r.sum())
            done += len(y)
            bar.update(len(y))
    # the first block holds the forest's warm-up and the loading of its compiled kernels: the
    # rates leave it out (both policies), "with_first_block" keeps it
    skip = 1 if after == 0 and len(times["forest"]) > 1 else 0
    n = events - block * skip
    rates = {k: n / sum(v[skip:]) for k, v in cpu.items()}
    rates_wall = {k: n / sum(v[skip:]) for k, v in times.items()}
    rates_all = {k: events / sum(v) for k, v in cpu.items()}
    return forest, vw, rates, rates_wall, rates_all, {k: v / events for k, v in rewards.items()}


def whole_stream(data, seed, events, block, n_trees, forest_params, context="sparse"):
    """CPU seconds of both players on every block of a long stream, alternating blocks as in
    :func:`side_by_side`, all timed: the exploring and the exploiting phases as an operator
    sees them. Returns the per-block CPU times, wall times and the forest's explored shares."""
    forest = FOREST_PLAYERS[context](data, seed, n_trees=n_trees, **forest_params)
    vw = VWEpsilonPlayer(data, seed, epsilon=0.05)
    cpu = {"forest": [], "vw": []}
    wall = {"forest": [], "vw": []}
    rewards = {"forest": [], "vw": []}
    with tqdm(total=events, desc="whole stream, forest | vw", unit="ev", mininterval=10) as bar:
        for X, y in BanditStream(data, seed=seed, chunk_size=block).chunks(events):
            for name, player in (("forest", forest), ("vw", vw)):
                t, c = time.perf_counter(), time.process_time()
                r = player.play(X, y)
                cpu[name].append(time.process_time() - c)
                wall[name].append(time.perf_counter() - t)
                rewards[name].append(float(r.sum()))
            bar.update(len(y))
    explored = [steps_explored / steps for steps, steps_explored, *_ in forest.log]
    return forest, {"cpu": cpu, "wall": wall, "rewards": rewards, "explored": explored}


# phases of the whole-stream report: [start, stop) in events learned
PHASES = (
    (0, 20_000),
    (20_000, 100_000),
    (100_000, 300_000),
    (300_000, 1_000_000),
    (1_000_000, 3_000_000),
    (3_000_000, 10_000_000),
)


def whole_stream_report(blocks: dict, block: int, events: int) -> dict:
    """Rates and ratio per phase and overall (the first block, which loads the compiled kernels
    of this process, is left out; ``overall_with_first_block`` keeps it)."""
    cpu = {k: np.asarray(v) for k, v in blocks["cpu"].items()}
    explored = np.asarray(blocks["explored"])
    sizes = np.full(len(cpu["forest"]), block, float)
    sizes[-1] = events - block * (len(sizes) - 1)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])

    def rates(mask):
        n = float(sizes[mask].sum())
        f, v = n / cpu["forest"][mask].sum(), n / cpu["vw"][mask].sum()
        return {
            "events": int(n),
            "forest": f,
            "vw": v,
            "ratio": f / v,
            "explored_share": float((explored[mask] * sizes[mask]).sum() / n),
        }

    out = {"phases": {}}
    timed = starts > 0
    for lo, hi in PHASES:
        mask = timed & (starts >= lo) & (starts < hi)
        if mask.any():
            out["phases"][f"{lo}-{min(hi, events)}"] = rates(mask)
    out["overall"] = rates(timed)
    out["overall_with_first_block"] = rates(np.ones(len(sizes), bool))
    return out


def plot_whole(results: list[dict], path: Path, window: int = 10) -> None:
    """Ratio forest / VW (CPU time, ``window`` blocks at a time) against events learned."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(
        2, 1, figsize=(6.5, 5.5), dpi=90, sharex=True, gridspec_kw={"height_ratios": [2, 1]}
    )
    for res in results:
        # block 0 (loading the compiled kernels) left out, as in the report
        cpu = {k: np.asarray(v[1:]) for k, v in res["blocks"]["cpu"].items()}
        n = len(cpu["forest"]) // window * window
        f = cpu["forest"][:n].reshape(-1, window).sum(axis=1)
        v = cpu["vw"][:n].reshape(-1, window).sum(axis=1)
        x = (np.arange(len(f)) + 1) * window * res["block"] + res["block"]
        label = f"{res['data']}, {res['context']} (overall {res['whole']['overall']['ratio']:.2f})"
        style = "--" if res["context"] == "dense" else "-"
        (line,) = ax.plot(x, v / f, style, label=label)
        e = np.asarray(res["blocks"]["explored"][1 : n + 1]).reshape(-1, window).mean(axis=1)
        ax2.plot(x, e, style, color=line.get_color())
    ax.axhline(1.0, color="k", lw=0.8, ls="--")
    ax.set_ylabel("forest / VW events per CPU second")
    ax.set_title(
        f"Bandit Forest (L=100) vs VW --cb_explore --epsilon 0.05, CPU time on the same "
        f"blocks;\neach point: {window} x {results[0]['block']} events",
        fontsize=9,
    )
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    ax2.set_xscale("log")
    ax2.set_xlabel("events learned")
    ax2.set_ylabel("forest: share\nof explored steps", fontsize=8)
    ax2.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def memory_curve(forest, data, seed, start, stop, checkpoints):
    """Keep the forest learning from event ``start`` to ``stop``; state size at the checkpoints."""
    sizes = {start: state_nbytes(forest.policy.to_state())}
    done = 0
    todo = sorted(c for c in checkpoints if start < c <= stop)
    with tqdm(total=stop, initial=start, desc="forest memory", unit="ev", mininterval=5) as bar:
        for X, y in BanditStream(data, seed=seed, chunk_size=4096).chunks(stop):
            if done + len(y) <= start:  # replayed prefix: the forest already learned it
                done += len(y)
                continue
            lo = max(start - done, 0)
            X, y = X[lo:], y[lo:]
            pos = done + lo
            while len(y):
                cut = min(len(y), (todo[0] - pos) if todo else len(y))
                forest.play(X[:cut], y[:cut])
                X, y, pos = X[cut:], y[cut:], pos + cut
                bar.update(cut)
                if todo and pos == todo[0]:
                    sizes[pos] = state_nbytes(forest.policy.to_state())
                    usage = getattr(forest.policy, "memory_usage", lambda: 0)()
                    tqdm.write(
                        f"forest state after {pos:>10,} events: "
                        f"{sizes[pos] / 2**20:8.2f} MiB to_state(), "
                        f"{usage / 2**20:8.2f} MiB arrays in memory "
                        f"({forest.policy.n_nodes:,} nodes)"
                    )
                    todo.pop(0)
            done = pos
    return sizes


def traced_memory(data, seed, events, n_trees, forest_params, context="sparse") -> tuple[int, int]:
    """(current, peak) bytes traced by tracemalloc while building a forest and playing
    ``events``."""
    tracemalloc.start()
    forest = FOREST_PLAYERS[context](data, seed, n_trees=n_trees, **forest_params)
    for X, y in BanditStream(data, seed=seed, chunk_size=4096).chunks(events):
        forest.play(X, y)
    current, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    del forest
    return current, peak


def plot(sizes: dict[int, int], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = sorted(sizes)
    fig, ax = plt.subplots(figsize=(5.5, 3.5), dpi=90)
    ax.plot(x, [sizes[k] / 2**20 for k in x], marker="o")
    ax.set_xscale("symlog", linthresh=1000)
    ax.set_xlabel("events learned")
    ax.set_ylabel("to_state() size (MiB)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def save(args, result) -> None:
    args.out.mkdir(parents=True, exist_ok=True)
    suffix = f"_after{args.after}" if args.after else ""
    if args.whole:
        suffix = f"_whole{args.whole}"
    (args.out / f"speed_{args.data}_{args.context}_s{args.seed}{suffix}.json").write_text(
        json.dumps(result, indent=1)
    )


def run_whole(args, data) -> None:
    """``--whole N``: the rates of both players over N events, per phase and overall."""
    forest, blocks = whole_stream(
        data, args.seed, args.whole, args.block, args.trees, args.forest_params, args.context
    )
    report = whole_stream_report(blocks, args.block, args.whole)
    policy = forest.policy  # its memory after the whole stream (issue: "after 1M events")
    memory = {
        "state_bytes": state_nbytes(policy.to_state()),
        "array_bytes": policy.memory_usage(),
        "nodes": policy.n_nodes,
    }
    print(
        f"{args.data}, {args.context} contexts, {args.whole:,} events in alternating blocks of "
        f"{args.block} (events/s of CPU time; first block left out):"
    )
    print(f"{'events':>18} {'forest':>9} {'VW':>9} {'ratio':>6} {'forest explored':>16}")
    for name, r in [*report["phases"].items(), ("overall", report["overall"])]:
        print(
            f"{name:>18} {r['forest']:>9,.0f} {r['vw']:>9,.0f} {r['ratio']:>6.2f} "
            f"{r['explored_share']:>16.2f}"
        )
    r = report["overall_with_first_block"]
    print(
        f"with the first block: {r['forest']:,.0f} vs {r['vw']:,.0f} ({r['ratio']:.2f}); "
        f"avg reward forest {sum(blocks['rewards']['forest']) / args.whole:.4f}, "
        f"VW {sum(blocks['rewards']['vw']) / args.whole:.4f}"
    )
    print(
        f"forest after {args.whole:,} events: {memory['state_bytes'] / 2**20:.2f} MiB to_state(), "
        f"{memory['array_bytes'] / 2**20:.2f} MiB arrays in memory, {memory['nodes']:,} nodes"
    )
    result = {
        "data": args.data,
        "context": args.context,
        "events": args.whole,
        "block": args.block,
        "trees": args.trees,
        "forest_params": args.forest_params,
        "whole": report,
        "memory": memory,
        "blocks": blocks,
    }
    save(args, result)
    plot_whole([result], args.plots / f"bandit_forest_speed_stream_{args.data}_{args.context}.png")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--data",
        default="synthetic",
        help="synthetic (100 variables, 7 actions), shuttle, letter or adult",
    )
    p.add_argument("--events", type=int, default=50_000, help="events for the side-by-side timing")
    p.add_argument("--block", type=int, default=1000, help="events per alternating block")
    p.add_argument(
        "--after",
        type=int,
        default=0,
        help="events both play untimed before the timed ones (a forest further on)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trees", type=int, default=100)
    p.add_argument(
        "--memory-events", type=int, default=1_000_000, help="0 to skip the memory curve"
    )
    p.add_argument("--tracemalloc-events", type=int, default=10_000, help="0 to skip tracemalloc")
    p.add_argument("--forest-params", type=json.loads, default={})
    p.add_argument("--out", type=Path, default=OUT / "bandit_forest")
    p.add_argument("--plots", type=Path, default=PLOTS)
    p.add_argument(
        "--context",
        choices=sorted(FOREST_PLAYERS),
        default="sparse",
        help="the forest's input: sparse {name: True} for the variables a row sets (as "
        "VW gets them, the default) or dense {name: 0 or 1} for all of them",
    )
    p.add_argument(
        "--whole",
        type=int,
        default=0,
        help="instead: both players over this many events, all timed, rates per phase",
    )
    p.add_argument(
        "--replot",
        type=Path,
        nargs="+",
        help="instead: one ratio-vs-events PNG from saved --whole results",
    )
    args = p.parse_args(argv)

    if args.replot:
        results = [json.loads(f.read_text()) for f in args.replot]
        plot_whole(results, args.plots / "bandit_forest_speed_stream.png")
        return
    data = load(args.data)
    print(
        f"stream: {args.data}, {data.X.shape[1]} binary variables, {len(data.actions)} actions, "
        f"noise 0.05; forest input: {args.context} contexts"
    )
    if args.whole:
        run_whole(args, data)
        return
    forest, vw, rates, rates_wall, rates_all, avg = side_by_side(
        data,
        args.seed,
        args.events,
        args.block,
        args.trees,
        args.forest_params,
        args.after,
        args.context,
    )
    ratio = rates["forest"] / rates["vw"]
    print(
        f"Bandit Forest (L={args.trees}) decide+learn: "
        f"{rates['forest']:,.0f} events/s of CPU time "
        f"({rates_wall['forest']:,.0f} by wall time; avg reward {avg['forest']:.4f})"
    )
    print(
        f"VW --cb_explore {len(data.actions)} --epsilon 0.05:  "
        f"{rates['vw']:,.0f} events/s of CPU time "
        f"({rates_wall['vw']:,.0f} by wall time; avg reward {avg['vw']:.4f})"
    )
    print(
        f"ratio forest / VW: {ratio:.2f} by CPU time, "
        f"{rates_wall['forest'] / rates_wall['vw']:.2f} by wall time "
        f"({args.events:,} events each after {args.after:,} untimed, "
        f"alternating blocks of {args.block}, "
        f"{'first block not timed; ' if not args.after else ''}"
        f"with it: {rates_all['forest']:,.0f} vs {rates_all['vw']:,.0f} events/s of CPU time)"
    )
    result = {
        "data": args.data,
        "context": args.context,
        "n_features": int(data.X.shape[1]),
        "n_actions": len(data.actions),
        "events": args.events,
        "after": args.after,
        "block": args.block,
        "trees": args.trees,
        "forest_params": args.forest_params,
        "rates": rates,
        "rates_wall": rates_wall,
        "rates_with_first_block": rates_all,
        "ratio": ratio,
        "ratio_wall": rates_wall["forest"] / rates_wall["vw"],
        "avg_reward": avg,
        "vw_args": vw.args,
    }
    save(args, result)  # the side-by-side figures, before the long memory run
    if args.tracemalloc_events:
        current, peak = traced_memory(
            data, args.seed, args.tracemalloc_events, args.trees, args.forest_params, args.context
        )
        print(
            f"tracemalloc after {args.tracemalloc_events:,} events: "
            f"current {current / 2**20:.2f} MiB, peak {peak / 2**20:.2f} MiB"
        )
        result["tracemalloc"] = {
            "events": args.tracemalloc_events,
            "current": current,
            "peak": peak,
        }
        save(args, result)
    if args.memory_events:
        marks = [c for c in (10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000, 10_000_000)]
        marks = sorted({c for c in marks if c <= args.memory_events} | {args.memory_events})
        sizes = memory_curve(
            forest, data, args.seed, args.after + args.events, args.memory_events, marks
        )
        for k in sorted(sizes):
            print(f"forest state after {k:>10,} events: {sizes[k] / 2**20:8.2f} MiB")
        result["state_bytes"] = {str(k): v for k, v in sorted(sizes.items())}
        plot(
            sizes,
            args.plots / f"bandit_forest_memory_{args.data}.png",
            f"Bandit Forest L={args.trees} state size, {args.data} "
            f"({data.X.shape[1]} vars, {len(data.actions)} actions)",
        )
    save(args, result)


if __name__ == "__main__":
    main()
