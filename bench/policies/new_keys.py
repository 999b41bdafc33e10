"""A new key with every event (an id sent as a key): what a policy's memory and CPU become.

A context is ``{"user.<i>": 1, "hour": h}``, ``i`` the event's number: every event brings a
feature no earlier event had, as when a client sends an id as a key instead of as a value. The
trees policy codes a column per key, and its window holds events x columns; before the
nineteenth session the columns grew without bound (and each refit's linear base decomposes a
matrix of columns^2 per action). Since then it codes at most ``max_columns`` (1,024): keys
first seen after that are left out. Each kind (its defaults, three actions, refits inline,
seed 0) decides every event and learns it, reward 1 with probability 0.3 whatever it does.
Printed per kind: CPU s, the columns its encoder coded, the process's peak RSS (one process
per kind: run a kind alone for its own peak).

    python -m bench.policies.new_keys --events 10000 --kinds trees

``--as-value``: the id as a category's value instead (``{"user": "u<i>", "hour": h}``): one
column, and a new code with every event. Printed too: the codes the encoder holds and the
bytes of the policy's state (``to_state()`` without the window: what a serving copy gets),
after the stream (with ``--window W``, the trees' window; the twentieth session's forgetting of
values no event of the window has shows after W events).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import time

from tqdm import tqdm


def run(kind: str, events: int, as_value: bool = False, window: int | None = None) -> dict:
    from bench.bandit_forest.speed import state_nbytes
    from online import make_policy

    params = {} if window is None or kind != "trees" else {"window": window}
    policy = make_policy(kind, actions=["a", "b", "c"], seed=0, **params)
    rng = random.Random(0)
    start = time.process_time()
    for i in tqdm(range(events), desc=kind, unit="ev", mininterval=5):
        hour = rng.random() * 24
        x = {"user": f"u{i}", "hour": hour} if as_value else {f"user.{i}": 1, "hour": hour}
        d = policy.decide(x)
        policy.learn_one(x, d.action, float(rng.random() < 0.3), d.probability)
    encoder = getattr(policy, "_encoder", None)
    codes = None if encoder is None else sum(len(c) for c in encoder.to_state()["codes"].values())
    return {"kind": kind, "events": events, "as_value": as_value,
            "cpu_s": round(time.process_time() - start, 1),
            "columns": None if encoder is None else encoder.n_columns, "codes": codes,
            "serving_state_bytes": state_nbytes(policy.to_state(statistics=False)),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--events", type=int, default=10_000)
    ap.add_argument("--kinds", default="trees", help="comma-separated policy kinds")
    ap.add_argument("--as-value", action="store_true", help="the id as a value, not a key")
    ap.add_argument("--window", type=int, help="the trees' window (default: theirs)")
    args = ap.parse_args(argv)
    for kind in args.kinds.split(","):
        print(json.dumps(run(kind, args.events, args.as_value, args.window)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
