"""When tastes change: how fast each policy earns again after the rewards change mid-stream.

The Bandit Forest paper's protocol (``bench/policies/compare.py``: a labelled data set as a
noisy bandit stream, reward 1 when the action is the row's label), with one change: from step
``--change`` on, the rewarding action of a row is ``perm[label]`` instead of ``label``, where
``perm`` (drawn from the seed) moves ``--moved`` of the labels to another action and keeps the
rest (``--moved 1``: every action's rewards change, as when tastes change; ``0.5``: half of
them, as when some campaigns end and others start). Every policy plays the same stream.

    python -m bench.policies.drift --data letter --steps 60000 --change 30000 --seeds 0,1,2

Policies: ``trees`` (the default tree-ensemble policy, which watches its held-out errors for a
change: ``online.policies.drift``), ``trees_nowatch`` (the same with ``drift_delta=None``: the
window alone forgets), ``auto`` (the default kind: its serving candidate's decisions),
``linucb`` (the hosted ``linucb`` kind, which watches its errors the same way; its restarts:
``linucb_nowatch`` without), ``vw_squarecb`` (VW ``--cb_explore_adf --squarecb -q
sa``, online SGD). Prints the average reward over the 5,000 steps before the change and over
windows after it; draws ``<plots>/drift_<data>_moved<percent>.png`` (reward per 500-step
window, seed 0).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from bench.bandit_forest.players import VWSquareCBPlayer
from bench.common.paths import OUT
from bench.common.streams import BanditStream
from bench.policies.compare import TreesPlayer, load

PLOTS = Path(__file__).parent / "plots"
EVERY = 100  # the runs keep the reward summed over each 100 steps
AFTER = ((0, 1000), (1000, 2000), (2000, 5000), (5000, 10_000), (10_000, 30_000))


class KindPlayer(TreesPlayer):
    """A hosted kind (``online.make_policy``) on dict contexts, played as ``TreesPlayer``."""

    def __init__(self, data, seed: int, kind: str, **params):
        from online.policies.registry import make_policy

        self.name = kind
        self.policy = make_policy(kind, actions=list(data.actions), seed=seed, **params)
        self.index = {a: i for i, a in enumerate(data.actions)}
        self.names = data.feature_names


PLAYERS = {
    "trees": lambda data, seed: TreesPlayer(data, seed),
    "trees_nowatch": lambda data, seed: TreesPlayer(data, seed, drift_delta=None),
    "auto": lambda data, seed: KindPlayer(data, seed, "auto"),
    "linucb": lambda data, seed: KindPlayer(data, seed, "linucb"),
    "linucb_nowatch": lambda data, seed: KindPlayer(data, seed, "linucb", drift_delta=None),
    "vw_squarecb": lambda data, seed: VWSquareCBPlayer(data, seed),
}


def permutation(n_labels: int, moved: float, seed: int) -> np.ndarray:
    """``perm[label]``: a random share ``moved`` of the labels go to another label (a cycle
    among them), the others stay."""
    rng = np.random.default_rng(10_000 + seed)
    perm = np.arange(n_labels)
    chosen = rng.permutation(n_labels)[: max(2, round(moved * n_labels))]
    perm[chosen] = np.roll(chosen, 1)
    return perm


def run(data_name: str, policy: str, steps: int, change: int, moved: float, seed: int,
        out: Path) -> dict:
    from tqdm import tqdm

    data = load(data_name)
    perm = permutation(len(data.actions), moved, seed)
    player = PLAYERS[policy](data, seed)
    rewards, done = [], 0
    with tqdm(total=steps, desc=f"{data_name}/s{seed}/{policy}", unit="ev",
              mininterval=10) as bar:
        for X, y in BanditStream(data, noise=0.05, seed=seed).chunks(steps):
            t = done + np.arange(len(y))
            rewards.append(player.play(X, np.where(t >= change, perm[y], y)))
            done += len(y)
            bar.update(len(y))
    r = np.concatenate(rewards)
    pol = getattr(player, "policy", None)
    result = {"data": data_name, "policy": policy, "seed": seed, "steps": steps,
              "change": change, "moved": moved, "every": EVERY,
              "rewards": r[: len(r) // EVERY * EVERY].reshape(-1, EVERY).sum(axis=1).tolist(),
              "changes_found": getattr(pol, "n_changes", None)}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"drift_{data_name}_s{seed}_{policy}.json").write_text(json.dumps(result))
    return result


def windows(res: dict) -> list[float]:
    """The average reward over the 5,000 steps before the change and each span of ``AFTER``."""
    sums, every, change = np.asarray(res["rewards"], float), res["every"], res["change"]
    spans = [(change - 5000, change)] + [(change + a, change + b) for a, b in AFTER]
    return [sums[a // every:b // every].sum() / (b - a) if b // every <= len(sums) else np.nan
            for a, b in spans]


def report(results: list[dict], plots: Path | None = PLOTS) -> str:
    names = ["before (5k)"] + [f"+{a // 1000}k-{b // 1000}k" for a, b in AFTER]
    lines = ["| policy | " + " | ".join(names) + " | changes found | seeds |",
             "|---|" + "---:|" * (len(names) + 2)]
    by_policy: dict[str, list[dict]] = {}
    for res in results:
        by_policy.setdefault(res["policy"], []).append(res)
    for policy, runs in by_policy.items():
        cols = np.array([windows(res) for res in runs])
        found = [res["changes_found"] for res in runs]
        lines.append(f"| {policy} | " + " | ".join(
            "-" if np.isnan(c).any() else f"{c.mean():.3f}" for c in cols.T)
            + f" | {'-' if found[0] is None else ', '.join(map(str, found))} | {len(runs)} |")
    if plots is not None:
        _plot(by_policy, results[0]["change"], plots)
    return "\n".join(lines)


def _plot(by_policy: dict[str, list[dict]], change: int, plots: Path, width: int = 500) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.5))
    for policy, runs in by_policy.items():
        res = min(runs, key=lambda res: res["seed"])
        per = width // res["every"]
        sums = np.asarray(res["rewards"], float)
        n = len(sums) // per
        ax.plot((np.arange(n) + 1) * width, sums[: n * per].reshape(n, per).sum(axis=1) / width,
                label=policy)
    ax.axvline(change, color="grey", linestyle=":")
    first = next(iter(by_policy.values()))[0]
    ax.set(xlabel="step", ylabel=f"reward per {width}-step window",
           title=f"{first['data']}: {first['moved']:.0%} of the labels move to another action "
                 f"at step {change:,} (seed {first['seed']})")
    ax.legend()
    plots.mkdir(parents=True, exist_ok=True)
    fig.savefig(plots / f"drift_{first['data']}_moved{round(100 * first['moved'])}.png", dpi=100,
                bbox_inches="tight")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="letter")
    ap.add_argument("--steps", type=int, default=60_000)
    ap.add_argument("--change", type=int, default=30_000)
    ap.add_argument("--moved", type=float, default=1.0)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--policies", default=",".join(PLAYERS))
    ap.add_argument("--out", type=Path, default=OUT / "drift")
    ap.add_argument("--plots", type=Path, default=PLOTS)
    ap.add_argument("--report-only", action="store_true")
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    policies = args.policies.split(",")
    results = []
    for seed in seeds:
        for policy in policies:
            path = args.out / f"drift_{args.data}_s{seed}_{policy}.json"
            if args.report_only:
                if path.exists():
                    results.append(json.loads(path.read_text()))
            else:
                results.append(run(args.data, policy, args.steps, args.change, args.moved,
                                   seed, args.out))
    print(report(results, args.plots))


if __name__ == "__main__":
    main()
