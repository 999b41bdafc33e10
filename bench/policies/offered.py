"""Requests that bring their own actions (a Personalizer app's articles of the day): ``auto``.

Every ``--day`` events a new day starts with ``--pool`` new actions; each request offers
``--offered`` of the day's actions, drawn at random, and the policy decides among those
(``decide(x, actions=offered)``). Reward: 0.3 for the action whose number matches the context's
first feature (``floor(f0 * pool)``), else 0.05 (with ``--popularity s``: the action's own
rate, drawn uniform in 0.05 +- s, as articles differ in how often they are read). The actions
join the policy with their events and are never removed, so the inventory holds every action
played in the last 100,000 events (older ones are forgotten: ``Policy._forget_stale``).

The policy (``auto``, its defaults, refits inline, seed 0) learns in batches of 256, as the
trainer does; with ``--offered-known`` each event carries the actions its request offered (what
the service records since the fifteenth session), and ``auto`` evaluates its candidates over
those instead of over the inventory. Printed: CPU per event (decide + learn, refits included),
the inventory's size, and each candidate's estimate, at every tenth.

    python -m bench.policies.offered --events 60000
    python -m bench.policies.offered --events 60000 --offered-known
    python -m bench.policies.offered --events 60000 --offered-known --popularity 0.04
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from tqdm import tqdm

import online


def run(events: int, day: int, pool: int, offered: int, known: bool,
        popularity: float = 0.0) -> dict:
    rng = np.random.default_rng(0)
    rates = np.random.default_rng(1).uniform(0.05 - popularity, 0.05 + popularity,
                                             (events // day + 1, pool))
    policy = online.make_policy("auto", seed=0)
    batch: list = []
    points = []
    total = 0.0
    start = last = time.process_time()
    for t in tqdm(range(events), desc="offered", unit="ev", mininterval=5):
        today = t // day
        actions = [f"d{today}-{j}" for j in rng.choice(pool, offered, replace=False)]
        f = rng.random(8)
        x = {f"f{j}": float(f[j]) for j in range(8)}
        d = policy.decide(x, actions=actions)
        j = int(d.action.split("-")[1])
        reward = float(rng.random() < (0.3 if j == int(f[0] * pool) else rates[today, j]))
        total += reward
        batch.append((x, d.action, reward, d.probability, actions if known else None))
        if len(batch) == 256:
            policy.learn_many(batch)
            batch = []
        if (t + 1) % max(1, events // 10) == 0:
            now = time.process_time()
            points.append({"events": t + 1, "inventory": len(policy.actions),
                           "us_per_event": (now - last) / (events // 10) * 1e6,
                           "estimates": {e["name"]: e["estimate"]
                                         for e in policy.evaluations()},
                           "serving": policy.serving})
            last = now
    return {"events": events, "day": day, "pool": pool, "offered": offered,
            "offered_known": known, "popularity": popularity, "cpu_s": time.process_time() - start,
            "mean_reward": total / events, "checkpoints": points}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=60_000)
    ap.add_argument("--day", type=int, default=5_000, help="events between two days")
    ap.add_argument("--pool", type=int, default=50, help="new actions a day")
    ap.add_argument("--offered", type=int, default=10, help="actions a request offers")
    ap.add_argument("--offered-known", action="store_true",
                    help="each event carries the actions its request offered")
    ap.add_argument("--popularity", type=float, default=0.0,
                    help="an action's reward off its match: uniform in 0.05 +- this")
    args = ap.parse_args(argv)
    print(json.dumps(run(args.events, args.day, args.pool, args.offered, args.offered_known,
                         args.popularity), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
