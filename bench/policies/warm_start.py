"""What the ``warm-start`` job buys an app that changes its policy: the new policy fresh, or
after learning the log the old one wrote (what ``service/jobs/warm_start.py`` does, in
process here: the same ``learn_many`` over the logged events with their propensities).

The paper protocol's stream (``bench/common/streams.py``). ``--before`` events are played by
the old policy (its decisions, rewards and propensities logged); then the new policy plays the
next ``--after`` events, fresh or warm; the old policy's own next events are the reference.

    python -m bench.policies.warm_start --data letter --before 20000 --after 5000 --seeds 0,1,2
"""

from __future__ import annotations

import argparse

import numpy as np

from bench.common.streams import BanditStream, load, reward
from online import make_policy


def _play(policy, steps, labels, log=None) -> np.ndarray:
    out = []
    for x, _, label in steps:
        d = policy.decide(x)
        r = reward(labels.index(d.action), label)
        policy.learn_one(x, d.action, r, d.probability)
        if log is not None:
            log.append((x, d.action, r, d.probability))
        out.append(r)
    return np.array(out)


def run(data: str, before: int, after: int, seed: int, old: str, new: str) -> dict:
    recoded = load(data)
    labels = [str(a) for a in recoded.actions]
    steps = list(BanditStream(recoded, noise=0.05, seed=seed).steps(before + after))
    log: list[tuple] = []
    first = make_policy(old, actions=labels, seed=seed)
    _play(first, steps[:before], labels, log)
    figures = {"old, before": float(np.mean([e[2] for e in log]))}
    figures["old, after"] = float(_play(first, steps[before:], labels).mean())
    fresh = make_policy(new, actions=labels, seed=seed)
    figures["new fresh, after"] = float(_play(fresh, steps[before:], labels).mean())
    warm = make_policy(new, actions=labels, seed=seed)
    warm.learn_many(log)
    figures["new warm, after"] = float(_play(warm, steps[before:], labels).mean())
    return figures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="letter")
    ap.add_argument("--before", type=int, default=20_000)
    ap.add_argument("--after", type=int, default=5_000)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--old", default="linucb", help="the policy that wrote the log")
    ap.add_argument("--new", default="trees", help="the policy the app switches to")
    args = ap.parse_args(argv)
    rows = [run(args.data, args.before, args.after, int(s), args.old, args.new)
            for s in args.seeds.split(",")]
    print(f"{args.data}: {args.old} for {args.before} events, then {args.after} events of "
          f"{args.new} (mean reward; seeds {args.seeds})")
    for name in rows[0]:
        values = [r[name] for r in rows]
        print(f"  {name:18s} {np.mean(values):.3f}  ({' / '.join(f'{v:.3f}' for v in values)})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
