"""Actions that come and go (campaigns end): what a ``trees`` policy spends on removed actions.

An ad inventory changes: every ``--every`` events a new action is added and the oldest removed,
``--live`` actions at a time. A removed action's events stay in the window (100k events), so
until they slide out, its regressor was refitted at every refit and its trees shipped in every
serving snapshot, though no decision reads them. Since the thirteenth session a refit fits the
trees of the inventory's actions only (a removed action that comes back gets its trees from a
refit its return makes due).

The stream: ``--features`` numbers in [0, 1); reward 0.3 for the action whose number matches
the context's first feature (``floor(f0 * live)`` against the action's serial modulo ``live``),
else 0.05. The policy (its defaults, refits inline, seed 0) decides every event and learns it.
Printed: CPU in all and in refits (each refit's job timed with ``time.process_time``), the
trees of the last model, the serving state's bytes (Grove's codec: what the trainer publishes
and every API process loads) and the mean reward (decisions are the same whether removed
actions get trees or not: theirs are never read). ``--kind`` runs another policy (``auto``,
``linucb``) on the same stream.

Memory (``checkpoints``, at every tenth of the run): the actions the policy's state holds, the
trainer's full state in bytes (what it checkpoints: window, statistics) and the serving
state's. Since the fifteenth session a removed action is forgotten once the window has no
event of it left (``Policy._forget_stale``): past the window (100k events), both stay bounded.

    python -m bench.policies.churn --events 30000
    python -m bench.policies.churn --kind auto --events 200000 --live 20 --every 20

``--plot run.json ...`` draws the runs' state bytes against events instead
(``plots/churn_state.png``, one line per run, labelled by its file name).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

import online
import online.policies.refit as refit_module
from service import codec


class _RefitClock:
    """Adds up the CPU time of every refit job the policy runs."""

    def __init__(self):
        self.seconds = 0.0
        self._call = refit_module.RefitJob.__call__

    def __enter__(self):
        clock, call = self, self._call

        def timed(job):
            start = time.process_time()
            try:
                return call(job)
            finally:
                clock.seconds += time.process_time() - start

        refit_module.RefitJob.__call__ = timed
        return self

    def __exit__(self, *exc):
        refit_module.RefitJob.__call__ = self._call


def _sizes(policy, t: int) -> dict:
    state = policy.to_state()
    return {"events": t, "actions_held": len(state["actions"]),
            "forgotten": getattr(policy, "n_forgotten", 0),
            "state_bytes": len(codec.encode(state)),
            "serving_state_bytes": len(codec.encode(policy.to_state(statistics=False)))}


def run(events: int, live: int, every: int, features: int, kind: str = "trees") -> dict:
    rng = np.random.default_rng(0)
    inventory = [f"a{i}" for i in range(live)]
    serial = live
    policy = online.make_policy(kind, actions=inventory, seed=0)
    total = 0.0
    checkpoints = []
    measuring = 0.0  # CPU spent measuring the state's size (left out of cpu_s)
    with _RefitClock() as refits:
        start = time.process_time()
        for t in tqdm(range(events), desc="churn", unit="ev", mininterval=5):
            f = rng.random(features)
            x = {f"f{j}": float(f[j]) for j in range(features)}
            d = policy.decide(x)
            match = int(f[0] * live) == int(d.action[1:]) % live
            reward = float(rng.random() < (0.3 if match else 0.05))
            policy.learn_one(x, d.action, reward, d.probability)
            total += reward
            if t % every == every - 1:
                policy.add_action(f"a{serial}")
                inventory.append(f"a{serial}")
                serial += 1
                policy.remove_action(inventory.pop(0))
            if (t + 1) % max(1, events // 10) == 0:
                clock = time.process_time()
                checkpoints.append(_sizes(policy, t + 1))
                measuring += time.process_time() - clock
        cpu = time.process_time() - start - measuring
    trees = policy.candidate("trees") if kind == "auto" else policy
    return {"kind": kind, "events": events, "live": live, "every": every,
            "actions_ever": serial, "cpu_s": cpu,
            "refits": getattr(trees, "n_refits", 0), "refit_cpu_s": refits.seconds,
            "trees": getattr(trees, "n_trees_fitted", 0),
            "serving_state_bytes": len(codec.encode(policy.to_state(statistics=False))),
            "mean_reward": total / events, "checkpoints": checkpoints}


def plot(runs: list[Path], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for path in runs:
        points = json.loads(path.read_text())["checkpoints"]
        ax.plot([p["events"] for p in points], [p["state_bytes"] / 1e6 for p in points],
                marker="o", label=path.stem)
    ax.set_xlabel("events learned")
    ax.set_ylabel("trainer's state, MB")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=30_000)
    ap.add_argument("--live", type=int, default=20, help="actions in the inventory at a time")
    ap.add_argument("--every", type=int, default=100, help="events between two changes")
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--kind", default="trees", help="the policy kind (trees, auto, linucb)")
    ap.add_argument("--plot", nargs="+", type=Path, help="runs' JSON: draw, do not run")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "plots" /
                    "churn_state.png")
    args = ap.parse_args(argv)
    if args.plot:
        plot(args.plot, args.out)
        return 0
    print(json.dumps(run(args.events, args.live, args.every, args.features, args.kind),
                     indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
