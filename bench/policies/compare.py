"""Tree-ensemble policy vs LinUCB and VW, side by side: the Bandit Forest paper's protocol.

Every policy plays the same noisy stream (``bench/streams.py``: a labelled data set recoded into
binary variables, rows shuffled and replayed, each variable flipped with probability 0.05,
reward 1 when the action is the label) and sees only the reward of the action it chose. A run
of N steps gives the average reward at every shorter horizon too (a shorter run is a prefix).

    python -m bench.policies.compare --data letter,shuttle,adult --steps 100000 --seeds 0,1,2

Policies: ``trees`` (``online.policies.trees.TreeEnsemblePolicy`` through ``decide`` /
``learn_one`` on dict contexts, as the service calls it), ``linucb`` (disjoint LinUCB, river's
maths in numpy: ``bandit_forest_policies.FastLinUCBPlayer``), ``vw_eps`` (VW ``--cb_explore K
--epsilon 0.05``), ``vw_squarecb`` (VW ``--cb_explore_adf --squarecb -q sa``), ``uniform``.
Held-out streams (not the issue's targets; used to choose the policy's settings): vowel,
mfeat_factors, usps, vehicle, waveform40, splice, dna_statlog, kr_vs_kp.

Each run writes ``<out>/<data>_s<seed>_<policy>.json``; the report (``--report-only`` to only
rebuild it) prints a markdown table of mean (min-max over seeds) average reward at each horizon
and draws ``<plots>/policies_<data>.png`` (average reward per 1,000-step window vs step).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bench.bandit_forest.players import (
    FastLinUCBPlayer,
    Player,
    UniformPlayer,
    VWEpsilonPlayer,
    VWSquareCBPlayer,
)
from bench.bandit_forest.speed import state_nbytes
from bench.common.paths import OUT
from bench.common.streams import DATA_DIR, BanditStream, recode
from bench.common.streams import load as load_paper

# held-out streams: name -> (target column, columns that are not variables)
HELD_OUT = {
    "vowel": ("class", ("train_or_test",)),
    "mfeat_factors": ("digit", ()),
    "usps": ("label", ()),
    "vehicle": ("Class", ()),
    "waveform40": ("class", ()),
    "splice": ("class", ("instance_name",)),
    "dna_statlog": ("Class", ()),
    "kr_vs_kp": ("class", ()),
    # low-signal streams (two actions, the best policy far from always right)
    "german_numeric": ("class", ()),
    "credit_a_crx": ("A16", ()),
    # large and low-signal, many actions (Adult's kind: 57k rows, so no row comes back within
    # 50k steps): a MOOC enrolment's course (31 actions) from its activity and dropout
    "mooc_course": ("course", ("enrollment_id",), "mooc_kddcup15_labels"),
}
HORIZONS = (10_000, 100_000, 200_000, 1_000_000)


def load(name: str):
    if name in HELD_OUT:
        target, drop, *file = HELD_OUT[name]
        frame = pd.read_csv(Path(DATA_DIR) / f"{(file or [name])[0]}.csv.gz").drop(
            columns=list(drop))
        return recode(frame, target, name=name)
    return load_paper(name)


class TreesPlayer(Player):
    """``TreeEnsemblePolicy`` with dict contexts (every variable, as numbers 0/1)."""

    name = "trees"

    def __init__(self, data, seed: int = 0, **params):
        from online.policies.trees import TreeEnsemblePolicy

        self.policy = TreeEnsemblePolicy(seed=seed, **params)
        self.actions = list(data.actions)
        for a in self.actions:
            self.policy.add_action(a)
        self.index = {a: i for i, a in enumerate(self.actions)}
        self.names = data.feature_names
        self.refit_seconds = 0.0

    def play(self, X, y):
        out = np.empty(len(y))
        decide, learn = self.policy.decide, self.policy.learn_one
        index, names = self.index, self.names
        for i, (row, label) in enumerate(zip(X.tolist(), y.tolist())):
            x = dict(zip(names, row))
            d = decide(x)
            out[i] = r = 1.0 if index[d.action] == label else 0.0
            learn(x, d.action, r, d.probability)
        return out


PLAYERS = {
    "trees": lambda data, seed, params: TreesPlayer(data, seed, **params),
    "linucb": lambda data, seed, _: FastLinUCBPlayer(data, seed),
    "vw_eps": lambda data, seed, _: VWEpsilonPlayer(data, seed),
    "vw_squarecb": lambda data, seed, _: VWSquareCBPlayer(data, seed),
    "uniform": lambda data, seed, _: UniformPlayer(data, seed),
}


def run(data_name: str, policy: str, steps: int, seed: int, out: Path, params: dict, tag: str = "",
        every: int = 1000) -> dict:
    from tqdm import tqdm

    data = load(data_name)
    stream = BanditStream(data, noise=0.05, seed=seed)
    player = PLAYERS[policy](data, seed, params)
    cum, total, done, played = [], 0.0, 0, 0.0
    name = policy + (f"+{tag}" if tag else "")
    with tqdm(total=steps, desc=f"{data_name}/s{seed}/{name}", unit="ev", mininterval=10) as bar:
        for X, y in stream.chunks(steps):
            t = time.process_time()
            rewards = player.play(X, y)
            played += time.process_time() - t
            c = total + np.cumsum(rewards)
            ends = np.arange(every - done % every, len(y) + 1, every)
            cum.extend(c[ends - 1].tolist())
            total, done = float(c[-1]), done + len(y)
            bar.update(len(y))
            bar.set_postfix({"avg": f"{total / done:.4f}"}, refresh=False)
    pol = getattr(player, "policy", None)
    result = {
        "data": data_name, "policy": name, "seed": seed, "steps": done, "every": every,
        "n_actions": len(data.actions), "n_features": data.X.shape[1],
        "mean_reward": total / done, "cpu_seconds": played, "events_per_cpu_s": done / played,
        "cum_reward": cum, "params": params,
        "refits": getattr(pol, "n_refits", None),
        "memory_bytes": pol.memory_usage() if hasattr(pol, "memory_usage") else None,
    }
    if policy == "trees":
        result["state_bytes"] = state_nbytes(pol.to_state())
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{data_name}_s{seed}_{name}.json").write_text(json.dumps(result))
    return result


def collect(out: Path, data_name: str) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {}
    for path in sorted(out.glob(f"{data_name}_s*_*.json")):
        r = json.loads(path.read_text())
        runs.setdefault(r["policy"], []).append(r)
    return runs


def at(r: dict, h: int) -> float | None:
    cum, n = r["cum_reward"], h // r["every"]
    return cum[n - 1] / h if len(cum) >= n else None


def table(out: Path, data_names: list[str]) -> str:
    lines = []
    for data_name in data_names:
        runs = collect(out, data_name)
        if not runs:
            continue
        longest = max(r["steps"] for rs in runs.values() for r in rs)
        hs = [h for h in HORIZONS if h <= longest]
        any_run = next(iter(runs.values()))[0]
        lines.append(f"\n#### {data_name} ({any_run['n_features']} binary variables, "
                     f"{any_run['n_actions']} actions)\n")
        lines.append("| policy | " + " | ".join(f"{h:,} steps" for h in hs)
                     + " | events / CPU s | seeds |")
        lines.append("|---|" + "---:|" * (len(hs) + 2))
        best = {}
        for h in hs:
            vals = {p: [at(r, h) for r in rs] for p, rs in runs.items()}
            means = {p: np.mean(v) for p, v in vals.items() if v and None not in v}
            best[h] = max((m for p, m in means.items() if not p.startswith("trees")), default=None)
        for p, rs in sorted(runs.items()):
            cells = []
            for h in hs:
                v = [at(r, h) for r in rs]
                v = [x for x in v if x is not None]
                if not v:
                    cells.append("")
                    continue
                m = np.mean(v)
                spread = f" ({min(v):.3f}-{max(v):.3f})" if len(v) > 1 else ""
                top = p.startswith("trees") and best[h] is not None and m >= best[h]
                mark = "**" if top else ""
                cells.append(f"{mark}{m:.4f}{mark}{spread} [{len(v)}]")
            eps = np.mean([r["events_per_cpu_s"] for r in rs])
            seeds = ",".join(str(r["seed"]) for r in sorted(rs, key=lambda r: r["seed"]))
            lines.append(f"| {p} | " + " | ".join(cells) + f" | {eps:,.0f} | {seeds} |")
    return "\n".join(lines)


def plot(out: Path, data_names: list[str], path: Path, window: int = 10_000) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [d for d in data_names if collect(out, d)]
    if not names:
        return
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.4), dpi=90, squeeze=False)
    for ax, data_name in zip(axes[0], names):
        for p, rs in sorted(collect(out, data_name).items()):
            rs = [r for r in rs if r["seed"] == 0]  # one stream for every policy: seed 0's
            if not rs:
                continue
            r = max(rs, key=lambda r: r["steps"])
            cum = np.concatenate([[0.0], np.asarray(r["cum_reward"])])
            k = max(1, min(window, r["steps"] // 20) // r["every"])
            ends = np.arange(k, len(cum), k)
            rate = (cum[ends] - cum[ends - k]) / (k * r["every"])
            ax.plot(ends * r["every"], rate, label=f"{p} ({r['mean_reward']:.3f})")
        ax.set_xscale("log")
        ax.set_title(f"{data_name} (seed 0)", fontsize=9)
        ax.set_xlabel("step")
        ax.set_ylabel("average reward per window")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="letter,shuttle,adult")
    ap.add_argument("--steps", type=int, default=100_000)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--policies", default="trees,linucb,vw_eps,vw_squarecb")
    ap.add_argument("--params", type=json.loads, default={}, help="JSON for trees")
    ap.add_argument("--tag", default="", help="variant name: stored as <policy>+<tag>")
    ap.add_argument("--out", type=Path, default=OUT / "policies")
    ap.add_argument("--plot", type=Path, default=None, help="PNG of reward curves")
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    data_names = args.data.split(",")
    if not args.report_only:
        for data_name in data_names:
            for seed in map(int, args.seeds.split(",")):
                for policy in args.policies.split(","):
                    r = run(data_name, policy, args.steps, seed, args.out,
                            args.params if policy == "trees" else {},
                            args.tag if policy == "trees" else "")
                    print(f"{data_name} s{seed} {r['policy']}: {r['mean_reward']:.4f} "
                          f"({r['events_per_cpu_s']:,.0f} events/CPU s)", flush=True)
    print(table(args.out, data_names))
    if args.plot:
        plot(args.out, data_names, args.plot)


if __name__ == "__main__":
    main()
