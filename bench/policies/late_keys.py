"""Campaigns that come and go, as keys or as values: does a policy learn the ones it meets late?

A context is ``{"camp.<c>": 1}``: the campaign the request comes from, sent as a key (as a
client that sends ``{"campaign": {"summer-sale": 1}}`` does), or with ``--as-value`` as a
category's value, ``{"campaign": "c<c>"}``. ``--live`` campaigns run at once;
every ``--every`` events the oldest ends and a new one starts, so the stream meets a new key
every ``--every`` events and never sees an ended one again. Each campaign has its best action,
drawn at its start: reward 1 with probability 0.9 for it, 0.1 for every other action.

Before the twentieth session every regression policy froze on its first campaigns: the trees'
linear base coded a category's first 64 values and learned nothing new between refits, the
trees gave a new value old values' corrections, and a key first seen past ``max_columns`` (the
trees' 1,024, LinUCB's 128) was left out for ever (bench/policies/README.md, "Campaigns that
come and go"). With the trees' defaults their bound is reached after ~200k events of the key
stream; a small bound and window show it in a minute:

    python -m bench.policies.late_keys --events 60000 --seed 0 --as-value
    python -m bench.policies.late_keys --events 60000 --kinds trees,linucb,vw_squarecb \\
        --params '{"max_columns": 128, "window": 10000}'

``--params`` go to the trees policy (``trees``); ``linucb`` is the hosted kind with its
defaults, ``vw_squarecb`` VW ``--cb_explore_adf --squarecb -q sa`` (hashed features: VW has no
bound to reach). Prints, per kind, the mean reward per tenth of the stream and over the events
after the ``max_columns``-th campaign started, the columns coded and the features left out;
``--plot`` draws the reward per 2,000 events. The script imports ``online`` from the path, so
an older checkout runs it too (``PYTHONPATH=<checkout> python bench/policies/late_keys.py``).
"""

from __future__ import annotations

import argparse
import json
import random
import time

import numpy as np
from tqdm import tqdm

ACTIONS = [f"a{i}" for i in range(10)]


def campaigns(events: int, live: int, every: int, seed: int, as_value: bool = False):
    """``(context, best action)`` per event; ``as_value``: ``{"campaign": "c<c>"}``."""
    rng = random.Random(seed)
    running = [(c, rng.choice(ACTIONS)) for c in range(live)]
    started = live
    for i in range(events):
        if i and i % every == 0:
            running = running[1:] + [(started, rng.choice(ACTIONS))]
            started += 1
        c, best = rng.choice(running)
        yield ({"campaign": f"c{c}"} if as_value else {f"camp.{c}": 1}), best


class Online:
    """A hosted kind (``online.make_policy``)."""

    def __init__(self, kind: str, seed: int, params: dict):
        from online import make_policy

        self.policy = make_policy(kind, actions=ACTIONS, seed=seed, **params)

    def decide(self, x: dict) -> tuple[str, float]:
        d = self.policy.decide(x)
        return d.action, d.probability

    def learn(self, x: dict, action: str, reward: float, probability: float) -> None:
        self.policy.learn_one(x, action, reward, probability)

    def columns(self) -> dict:
        p = self.policy
        return {"columns": getattr(p, "feature_columns", None),
                "left_out": getattr(p, "features_left_out", None)}


class VW:
    """VW ``--cb_explore_adf --squarecb -q sa``, the context's keys as the shared features."""

    def __init__(self, seed: int):
        import vowpalwabbit

        self.vw = vowpalwabbit.Workspace(
            f"--cb_explore_adf --squarecb -q sa --random_seed {seed} --quiet")
        self.rng = np.random.default_rng(seed)
        self.lines = [f"|a {a}" for a in ACTIONS]
        self.example: list[str] = []

    def decide(self, x: dict) -> tuple[str, float]:
        self.example = ["shared |s " + " ".join(f"{k}={v}" for k, v in x.items()), *self.lines]
        pmf = np.asarray(self.vw.predict(self.example), np.float64)
        k = int(self.rng.choice(len(pmf), p=pmf / pmf.sum()))
        return ACTIONS[k], float(pmf[k])

    def learn(self, x: dict, action: str, reward: float, probability: float) -> None:
        k = ACTIONS.index(action)
        self.example[k + 1] = f"0:{-reward}:{probability} {self.lines[k]}"
        self.vw.learn(self.example)

    def columns(self) -> dict:
        return {"columns": None, "left_out": None}


def run(kind: str, args, params: dict) -> dict:
    player = VW(args.seed) if kind == "vw_squarecb" else \
        Online(kind, args.seed, params if kind == "trees" else {})
    rng = random.Random(args.seed + 1)
    rewards = np.empty(args.events)
    start = time.process_time()
    stream = campaigns(args.events, args.live, args.every, args.seed, args.as_value)
    for i, (x, best) in enumerate(tqdm(stream, total=args.events, desc=kind, unit="ev",
                                       mininterval=5)):
        action, probability = player.decide(x)
        rewards[i] = reward = float(rng.random() < (0.9 if action == best else 0.1))
        player.learn(x, action, reward, probability)
    bound = params.get("max_columns", 1024)
    late = (bound - args.live) * args.every  # the event the bound-th campaign starts at
    tenths = rewards[: len(rewards) // 10 * 10].reshape(10, -1).mean(axis=1)
    return {"kind": kind, "events": args.events, "seed": args.seed,
            "cpu_s": round(time.process_time() - start, 1),
            "tenths": [round(float(r), 4) for r in tenths],
            "late_from": late,
            "late": None if late >= len(rewards) else round(float(rewards[late:].mean()), 4),
            **player.columns(), "curve": rewards.reshape(-1, 2000).mean(axis=1).round(4).tolist()
            if len(rewards) % 2000 == 0 else None}


def plot(results: list[dict], path: str, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for r in results:
        if r["curve"]:
            ax.plot(np.arange(1, len(r["curve"]) + 1) * 2000, r["curve"], label=r["label"])
    late = results[0]["late_from"]
    if late < results[0]["events"]:
        ax.axvline(late, color="grey", linestyle=":", label="max_columns-th campaign starts")
    ax.set_xlabel("events")
    ax.set_ylabel("mean reward per 2,000 events")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=60_000)
    ap.add_argument("--live", type=int, default=20, help="campaigns running at once")
    ap.add_argument("--every", type=int, default=200, help="events between two new campaigns")
    ap.add_argument("--kinds", default="trees,linucb,vw_squarecb")
    ap.add_argument("--params", default="{}", help="JSON parameters of the trees policy")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--as-value", action="store_true",
                    help='the campaign as a value, {"campaign": "c<c>"}, not as a key')
    ap.add_argument("--tag", default="", help="a label for this run's lines (e.g. 'before')")
    ap.add_argument("--out", help="append each kind's JSON line to this file")
    ap.add_argument("--plot", help="draw every line of --out into this PNG")
    args = ap.parse_args(argv)
    params = json.loads(args.params)
    for kind in args.kinds.split(","):
        result = {**run(kind, args, params), "label": f"{kind} {args.tag}".strip()}
        print(json.dumps({k: v for k, v in result.items() if k != "curve"}), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(result) + "\n")
    if args.plot and args.out:
        with open(args.out) as f:
            plot([json.loads(line) for line in f], args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
