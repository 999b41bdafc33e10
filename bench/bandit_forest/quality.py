"""How good is Bandit Forest? The paper's protocol (sec. 5) on Adult, Letter and Shuttle.

Every policy plays the same noisy stream (same data set, same seed: ``bench/common/streams.py``) and
sees only the reward of the action it chose. Reported: the average reward, and the cumulative
regret against the paper's reference (a random forest of 100 trees trained offline with full
information and no noise, playing greedily on the same noisy stream).

Each (data, policy) run writes ``<out>/<data>_s<seed>_<policy>_<steps>.json`` (cumulative reward
every ``--every`` steps); the report step reads every run of the data set and seed in ``<out>``
(the longest run of each policy), prints and writes the table ``<out>/bandit_forest_quality.md``
and draws ``<plots>/bandit_forest_regret_<data>.png``. Policies can therefore run in separate
processes and be reported together (``--report-only``).

    nice -n 10 python -m bench.bandit_forest.quality --data letter --steps 1000000 \
        --policies reference,uniform,vw_eps,vw_squarecb,linucb,forest,tree
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

from bench.bandit_forest.players import PLAYERS
from bench.bandit_forest.speed import state_nbytes
from bench.common.paths import OUT, ROOT
from bench.common.streams import BanditStream, load

#: this topic's figures
PLOTS = Path(__file__).resolve().parent / "plots"

ORDER = [
    "reference",
    "reference_d6",
    "forest",
    "tree",
    "linucb",
    "linucb_river",
    "vw_eps",
    "vw_squarecb",
    "uniform",
]
LABELS = {
    "reference": "reference RF (offline, full info)",
    "reference_d6": "RF depth <= 6 (offline, full info)",
    "forest": "Bandit Forest (L=100)",
    "tree": "Bandit Tree (L=1)",
    "linucb": "LinUCB disjoint (river's maths, numpy)",
    "linucb_river": "LinUCB disjoint (river's class)",
    "vw_eps": "VW cb_explore eps=0.05",
    "vw_squarecb": "VW cb_explore_adf squarecb -q sa",
    "uniform": "uniform random",
}


def code_version() -> str:
    """Commit of the repository, and "+dirty" when online/bandit has uncommitted changes."""
    import subprocess

    root = ROOT
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "online/bandit"],
            cwd=root,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return "unknown"
    return head + ("+dirty" if dirty else "")


def run(
    data_name,
    policy,
    steps,
    seed,
    every,
    out: Path,
    forest_params: dict,
    tag="",
    chunk_size=4096,
    save_every=120.0,
) -> dict:
    data = load(data_name)
    stream = BanditStream(data, noise=0.05, seed=seed, chunk_size=chunk_size)
    t0 = time.perf_counter()
    player = PLAYERS[policy](data, seed, forest_params)
    setup = time.perf_counter() - t0
    cum, total, done, played = [], 0.0, 0, 0.0
    # Bandit Forest: bytes of its arrays (memory_usage()) about 20 times along the run
    memory = [] if hasattr(getattr(player, "policy", None), "memory_usage") else None
    mem_every = max(steps // 20, 1)

    def save() -> None:
        """Write the run so far (a run stopped early keeps what it did: "partial")."""
        nonlocal result
        result = {
            "data": data_name,
            "policy": policy + tag,
            "steps": done,
            "target_steps": steps,
            "partial": done < steps,
            "seed": seed,
            "noise": 0.05,
            "n_features": stream.n_features,
            "n_actions": stream.n_actions,
            "mean_reward": total / max(done, 1),
            "seconds": played,
            "setup_seconds": setup,
            "events_per_s": done / max(played, 1e-9),
            "every": every,
            "cum_reward": cum,
            "params": getattr(getattr(player, "policy", None), "_get_params", dict)()
            if policy in ("forest", "tree")
            else {},
            "vw_args": getattr(player, "args", None),
            "code": code,
        }
        if hasattr(player, "log") and player.log:  # Bandit Forest: exploration and reward by mode
            log = np.asarray(player.log)
            result["explore_log"] = log.tolist()
            n, n_exp, r_exp, r_vote = log.sum(axis=0)
            result["explored_fraction"] = n_exp / n
            result["reward_explored"] = r_exp / max(n_exp, 1)
            result["reward_voted"] = r_vote / max(n - n_exp, 1)
            result["n_nodes"] = int(getattr(player.policy, "n_nodes", -1))
            result["memory_usage"] = memory
            result["to_state_bytes"] = state_nbytes(player.policy.to_state())
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{data_name}_s{seed}_{policy}{tag}_{steps}.json").write_text(json.dumps(result))

    result: dict = {}
    last_save = time.monotonic()
    code = code_version()  # the code the run started with
    with tqdm(
        total=steps, desc=f"{data_name}/{policy}", unit="ev", mininterval=5, smoothing=0.1
    ) as bar:
        for X, y in stream.chunks(steps):
            t = time.perf_counter()
            rewards = player.play(X, y)
            played += time.perf_counter() - t
            c = total + np.cumsum(rewards)
            ends = np.arange(every - done % every, len(y) + 1, every)  # steps that end a window
            cum.extend(c[ends - 1].tolist())
            total, done = float(c[-1]), done + len(y)
            if memory is not None and done >= (len(memory) + 1) * mem_every:
                memory.append([done, int(player.policy.memory_usage())])
            bar.update(len(y))
            post = {"avg": f"{total / done:.4f}"}
            if getattr(player, "log", None):
                post["explored"] = f"{player.log[-1][1] / player.log[-1][0]:.3f}"
            bar.set_postfix(post, refresh=False)
            if time.monotonic() - last_save > save_every:
                save()
                last_save = time.monotonic()
    save()
    return result


def collect(out: Path, data_name: str, seed: int) -> dict[str, dict]:
    """Longest run of each policy for this data set and seed."""
    runs: dict[str, dict] = {}
    for path in sorted(out.glob(f"{data_name}_s{seed}_*.json")):
        r = json.loads(path.read_text())
        if r["policy"] not in runs or r["steps"] > runs[r["policy"]]["steps"]:
            runs[r["policy"]] = r
    rank = {name: i for i, name in enumerate(ORDER)}
    return dict(sorted(runs.items(), key=lambda kv: (rank.get(kv[0].split("+")[0], 99), kv[0])))


def label(name: str) -> str:
    base, _, tag = name.partition("+")
    return LABELS.get(base, base) + (f" [{tag}]" if tag else "")


def table(runs: dict[str, dict]) -> list[str]:
    ref = runs.get("reference")
    lines = [
        "| policy | steps | avg reward | avg reward, last 10% | regret vs reference | events/s |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in runs.items():
        cum = np.asarray(r["cum_reward"])
        k = max(len(cum) // 10, 1)
        last = (cum[-1] - (cum[-k - 1] if len(cum) > k else 0.0)) / (k * r["every"])
        if ref is not None and len(ref["cum_reward"]) >= len(cum) and ref["every"] == r["every"]:
            regret = f"{ref['cum_reward'][len(cum) - 1] - cum[-1]:,.0f}"
        else:
            regret = "n/a"
        lines.append(
            f"| {label(name)} | {r['steps']:,}{' (stopped early)' if r.get('partial') else ''} "
            f"| {r['mean_reward']:.4f} | {last:.4f} "
            f"| {regret} | {r['events_per_s']:,.0f} |"
        )
    return lines


def plot(runs: dict[str, dict], data_name: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ref = runs.get("reference")
    if ref is None:
        return
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=90)
    ref_cum = np.asarray(ref["cum_reward"])
    for name, r in runs.items():
        # linucb_river is a check of linucb; uniform's regret (see the table) would flatten the rest
        if name in ("reference", "linucb_river", "uniform") or r["every"] != ref["every"]:
            continue
        cum = np.asarray(r["cum_reward"])
        n = min(len(cum), len(ref_cum))
        x = (np.arange(n) + 1) * r["every"]
        ax.plot(x, ref_cum[:n] - cum[:n], label=f"{label(name)} ({r['mean_reward']:.3f})")
    ax.set_xlabel("steps")
    ax.set_ylabel("cumulative regret vs reference RF")
    ax.set_title(
        f"{data_name}: noisy stream (flip 0.05), seed {ref['seed']}; "
        f"reference avg {ref['mean_reward']:.3f}"
        + (f", uniform {runs['uniform']['mean_reward']:.3f}" if "uniform" in runs else ""),
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def plot_memory(all_runs: dict[str, dict[str, dict]], path: Path) -> None:
    """Bytes of the forest's arrays (``memory_usage()``) along each Bandit Forest / Tree run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=90)
    for data_name, runs in all_runs.items():
        for name, r in runs.items():
            if r.get("memory_usage"):
                m = np.asarray(r["memory_usage"], dtype=float)
                ax.plot(m[:, 0], m[:, 1] / 2**20, marker=".", label=f"{data_name}: {label(name)}")
    if not ax.lines:
        plt.close(fig)
        return
    ax.set_xlabel("events learned")
    ax.set_ylabel("forest arrays (MiB, memory_usage())")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def report(out: Path, plots: Path, data_names: list[str], seed: int) -> str:
    plots.mkdir(parents=True, exist_ok=True)
    text = []
    all_runs = {}
    for data_name in data_names:
        runs = collect(out, data_name, seed)
        if not runs:
            continue
        all_runs[data_name] = runs
        any_run = next(iter(runs.values()))
        text.append(
            f"### {data_name} ({any_run['n_features']} binary variables, "
            f"{any_run['n_actions']} actions, seed {seed})\n"
        )
        text.extend(table(runs))
        text.append("")
        plot(runs, data_name, plots / f"bandit_forest_regret_{data_name}.png")
    plot_memory(all_runs, plots / "bandit_forest_memory.png")
    md = "\n".join(text)
    (out / "bandit_forest_quality.md").write_text(md + "\n")
    return md


def prefix_stats(r: dict, horizon: int) -> dict | None:
    """Figures of run ``r`` over its first ``horizon`` steps (a shorter run of the same stream and
    seed is a prefix of a longer one): average reward, and for Bandit Forest the share of
    explored steps and the reward of the voted steps over the last 10% of the prefix."""
    cum = np.asarray(r["cum_reward"])
    n = horizon // r["every"]
    if len(cum) < n:
        return None
    out = {
        "avg": cum[n - 1] / horizon,
        "last10": (cum[n - 1] - cum[n - 1 - n // 10]) / (n // 10 * r["every"]),
    }
    if r.get("explore_log"):
        log = np.asarray(r["explore_log"], dtype=float)
        ends = np.cumsum(log[:, 0])
        sel = (ends > 0.9 * horizon) & (ends <= horizon)
        n_all, n_exp, _, r_vote = log[sel].sum(axis=0)
        out["explored"] = n_exp / max(n_all, 1)
        out["voted"] = r_vote / max(n_all - n_exp, 1) if n_all > n_exp else float("nan")
    return out


SWEEP_HORIZONS = {"shuttle": 300_000, "letter": 300_000, "adult": 200_000}


def sweep_report(sweep: Path, base: Path, seed: int = 0, horizons: dict = SWEEP_HORIZONS) -> str:
    """One row per forest variant (``<data>_s<seed>_forest+<tag>_*.json`` in ``sweep``) at the
    sweep horizons, beside the baselines of ``base`` cut at the same horizon ("default" is the
    default forest's run in ``base``, tag "default"). The score that picks a setting
    for all data sets at once: the mean over the data sets of (avg - uniform) / (reference -
    uniform), the share of the reference's gain over uniform play that the variant gets."""
    rows: dict[str, dict] = {}
    for data_name, h in horizons.items():
        for path in list(base.glob(f"{data_name}_s{seed}_*.json")) + list(
            sweep.glob(f"{data_name}_s{seed}_*.json")
        ):
            r = json.loads(path.read_text())
            name = r["policy"]
            if path.parent == base and name.startswith("forest"):
                if name != "forest+default":
                    continue
            elif path.parent == base and "+" in name:
                continue
            st = prefix_stats(r, h)
            if st is not None:
                rows.setdefault(name, {})[data_name] = st
    ref, uni = rows.get("reference", {}), rows.get("uniform", {})

    def score(row):
        vals = [
            (row[d]["avg"] - uni[d]["avg"]) / (ref[d]["avg"] - uni[d]["avg"])
            for d in horizons
            if d in row and d in ref and d in uni
        ]
        return sum(vals) / len(vals) if len(vals) == len(horizons) else float("nan")

    head = " | ".join(
        f"{d} {h // 1000}k: avg (last 10%, explored, voted)" for d, h in horizons.items()
    )
    lines = [f"| variant | {head} | score |", "|---|" + "---:|" * (len(horizons) + 1)]
    order = sorted(
        rows, key=lambda n: (not n.startswith("forest"), -np.nan_to_num(score(rows[n]), nan=-9))
    )
    for name in order:
        row = rows[name]
        cells = []
        for d in horizons:
            st = row.get(d)
            if st is None:
                cells.append("")
            elif "explored" in st:
                cells.append(
                    f"{st['avg']:.4f} ({st['last10']:.3f}, {st['explored']:.2f}, {st['voted']:.3f})"
                )
            else:
                cells.append(f"{st['avg']:.4f} ({st['last10']:.3f})")
        lines.append(f"| {label(name)} | " + " | ".join(cells) + f" | {score(row):.3f} |")
    return "\n".join(lines)


def plot_window(
    long_dir: Path, base: Path, data_name: str, path: Path, seed: int = 0, window: int = 50_000
) -> None:
    """Reward per ``window`` steps of the (long) forest runs in ``long_dir`` and of the runs in
    ``base``, against the step: does the forest's curve reach the others' level?"""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=90)
    runs = {**collect(base, data_name, seed), **collect(long_dir, data_name, seed)}
    for name, r in runs.items():
        if name in ("linucb_river", "uniform", "reference_d6"):
            continue
        cum = np.asarray(r["cum_reward"])
        k = max(1, window // r["every"])  # a run recorded more coarsely: its own step
        ends = np.arange(k, len(cum) + 1, k)
        if not len(ends):
            continue
        rate = np.diff(np.concatenate([[0.0], cum[ends - 1]])) / (k * r["every"])
        ax.plot(
            ends * r["every"],
            rate,
            marker="." if len(ends) < 30 else None,
            label=f"{label(name)} ({r['steps']:,} steps)",
        )
    ax.set_xlabel("steps")
    ax.set_ylabel(f"average reward per {window:,} steps (or per record)")
    ax.set_title(f"{data_name}: reward along the run (seed {seed})", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--data", default="letter,shuttle,adult", help="comma-separated: adult,letter,shuttle"
    )
    p.add_argument(
        "--steps", type=int, default=None, help="default: 1M (letter, shuttle), 200k (adult)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--policies",
        default=",".join(o for o in ORDER if o not in ("linucb_river", "reference_d6")),
        help=f"comma-separated from {sorted(PLAYERS)}",
    )
    p.add_argument("--out", type=Path, default=OUT / "bandit_forest", help="run results + table")
    p.add_argument("--plots", type=Path, default=PLOTS, help="where the PNGs go")
    p.add_argument(
        "--every", type=int, default=1000, help="record the cumulative reward every N steps"
    )
    p.add_argument(
        "--forest-params", type=json.loads, default={}, help="JSON, e.g. '{\"delta\": 0.1}'"
    )
    p.add_argument(
        "--tree-params",
        type=json.loads,
        default={},
        help="JSON for the Bandit Tree (default epsilon 0.6, depth 4)",
    )
    p.add_argument("--tag", default="", help="variant name: runs are stored as <policy>+<tag>")
    p.add_argument("--report-only", action="store_true", help="only rebuild the table and plots")
    p.add_argument(
        "--window-plot",
        type=Path,
        default=None,
        help="with --sweep-report: draw bandit_forest_window_<data>.png (reward per 50k steps) "
        "there",
    )
    p.add_argument(
        "--horizons",
        default=None,
        help="for --sweep-report: data=steps,... "
        "(default shuttle=300000,letter=300000,adult=200000)",
    )
    p.add_argument(
        "--sweep-report",
        type=Path,
        default=None,
        help="print the variants of this folder at the sweep horizons beside --out's baselines",
    )
    args = p.parse_args(argv)
    data_names = args.data.split(",")
    if args.sweep_report is not None:
        horizons = SWEEP_HORIZONS
        if args.horizons:
            horizons = {
                d: int(h) for d, h in (item.split("=") for item in args.horizons.split(","))
            }
        print(sweep_report(args.sweep_report, args.out, args.seed, horizons))
        if args.window_plot is not None:
            for data_name in horizons:
                plot_window(
                    args.sweep_report,
                    args.out,
                    data_name,
                    args.window_plot / f"bandit_forest_window_{data_name}.png",
                    args.seed,
                )
        return
    if not args.report_only:
        for data_name in data_names:
            steps = args.steps or (200_000 if data_name == "adult" else 1_000_000)
            for policy in args.policies.split(","):
                params = args.tree_params if policy == "tree" else args.forest_params
                tag = f"+{args.tag}" if args.tag else ""
                r = run(data_name, policy, steps, args.seed, args.every, args.out, params, tag)
                print(
                    f"{data_name:8s} {policy:12s} steps={steps:,} "
                    f"avg reward={r['mean_reward']:.4f} "
                    f"({r['events_per_s']:,.0f} ev/s)",
                    flush=True,
                )
    print(report(args.out, args.plots, data_names, args.seed))


if __name__ == "__main__":
    main()
