"""Does Bandit Forest ever serve inside ``auto``? auto with trees, LinUCB and Bandit Forest on
the held-out streams.

``auto`` with the three kinds as candidates (Bandit Forest third: the default set before the
twelfth session) plays the paper's protocol on a stream (``bench/common/streams.py``), deciding
one event at a time and learning in batches of 256 (as the trainer does), and prints one JSON
line: average reward, the serving candidate at the end, the switches, and each candidate's IPS
estimate with its band ([lower, upper]; for a candidate that learns the band bounds the best
and worst values it has had, so it may be inverted).

    for d in vowel vehicle waveform40 splice mooc_course german_numeric credit_a_crx; do
        python -m bench.policies.auto_heldout $d 20000; done

Figures: bench/policies/AUTO.md, "The default candidates".
"""

from __future__ import annotations

import json
import sys

from bench.common.streams import BanditStream
from bench.policies.compare import load
from online.policies.registry import make_policy

CANDIDATES = [{"kind": "trees"}, {"kind": "linucb"}, {"kind": "bandit-forest"}]


def main(argv=None):
    name, steps, seed = (argv or sys.argv[1:]) + ["0"] * (3 - len(argv or sys.argv[1:]))
    steps, seed = int(steps), int(seed)
    data = load(name)
    policy = make_policy("auto", actions=list(data.actions), seed=seed, candidates=CANDIDATES)
    batch, total = [], 0.0
    for x, _, label in BanditStream(data, seed=seed).steps(steps):
        d = policy.decide(x)
        reward = float(d.action == data.actions[label])
        total += reward
        batch.append((x, d.action, reward, d.probability))
        if len(batch) == 256:
            policy.learn_many(batch)
            batch = []
    policy.learn_many(batch)
    bands = {e["name"]: (round(e["estimate"], 3), round(e["lower"], 3), round(e["upper"], 3))
             for e in policy.evaluations()}
    print(json.dumps({"data": name, "steps": steps, "reward": round(total / steps, 4),
                      "serving": policy.serving,
                      "switches": [(s["at"], s["from"], s["to"]) for s in policy.switches],
                      "estimates": bands}))


if __name__ == "__main__":
    main()
