"""Policies on contexts of raw numbers: the supervised-to-bandit protocol of the Bandit Forest
paper (label = best action, reward 1 when played), but each numeric column given as it is in
the data set (sizes, counts, amounts in their own units) instead of recoded into 0/1 bins. This is
what an ad server sends (a price, an age, a count of visits), and where a policy's handling of
scale shows: the binned benchmark streams never leave [0, 1].

Per data set: rows shuffled (seeded) and played in a loop, no noise (the noise of the paper
flips bits); a non-numeric column is a category (a string). Prints the average reward per policy
over the whole run and over its last quarter.

    python -m bench.policies.raw_numbers --data vehicle,german_numeric,spambase,shuttle \
        --steps 20000 --seeds 0,1,2 --kinds linucb
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import pandas as pd

from bench.common.paths import DATA

#: file, label column
DATASETS = {
    "vehicle": ("vehicle.csv.gz", "Class"),
    "german_numeric": ("german_numeric.csv.gz", "class"),
    "spambase": ("spambase.csv.gz", None),  # the last column
    "shuttle": ("shuttle.csv.gz", "Class"),
    "credit_a": ("credit_a_crx.csv.gz", "A16"),
}


def load(name: str) -> tuple[list[dict], np.ndarray, list[str]]:
    """The rows as contexts (numbers as floats, other values as strings; '?' missing), their
    labels as action ids, and the actions."""
    file, target = DATASETS[name]
    frame = pd.read_csv(DATA / file, dtype=str, keep_default_na=False)
    target = target or frame.columns[-1]
    labels = frame.pop(target).to_numpy()
    columns = {}
    for column in frame.columns:
        numbers = pd.to_numeric(frame[column], errors="coerce")
        present = frame[column] != "?"
        columns[column] = (numbers, present, bool(numbers[present].notna().all()))
    contexts = []
    for i in range(len(frame)):
        x = {}
        for column, (numbers, present, numeric) in columns.items():
            if present.iat[i]:
                x[column] = float(numbers.iat[i]) if numeric else frame[column].iat[i]
        contexts.append(x)
    actions = sorted(set(labels))
    return contexts, labels, actions


def play(kind: str, data: tuple, steps: int, seed: int) -> dict:
    from online.policies.registry import make_policy

    contexts, labels, actions = data
    order = np.random.default_rng(seed).permutation(len(contexts))
    policy = make_policy(kind, actions=actions, seed=seed)
    rewards = np.empty(steps)
    t0 = time.process_time()
    for t in range(steps):
        i = order[t % len(order)]
        d = policy.decide(contexts[i])
        rewards[t] = r = float(d.action == labels[i])
        policy.learn_one(contexts[i], d.action, r, d.probability)
    return {"kind": kind, "seed": seed, "steps": steps, "mean": float(rewards.mean()),
            "last_quarter": float(rewards[-steps // 4:].mean()),
            "cpu_s": time.process_time() - t0}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="vehicle,german_numeric,spambase,shuttle")
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--kinds", default="linucb")
    ap.add_argument("--out", default=None, help="JSONL of every run")
    args = ap.parse_args(argv)
    from tqdm import tqdm

    seeds = [int(s) for s in args.seeds.split(",")]
    kinds = args.kinds.split(",")
    rows = []
    for name in args.data.split(","):
        data = load(name)
        runs = [(k, s) for k in kinds for s in seeds]
        for kind, seed in tqdm(runs, desc=name, unit="run"):
            rows.append({"data": name, **play(kind, data, args.steps, seed)})
    if args.out:
        with open(args.out, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in rows)
    print(f"| data | kind | mean reward | last quarter | CPU s | seeds ({args.steps:,} steps) |")
    print("|---|---|---:|---:|---:|---|")
    for name in args.data.split(","):
        for kind in kinds:
            mine = [r for r in rows if r["data"] == name and r["kind"] == kind]
            print(f"| {name} | {kind} | {np.mean([r['mean'] for r in mine]):.4f} | "
                  f"{np.mean([r['last_quarter'] for r in mine]):.4f} | "
                  f"{np.mean([r['cpu_s'] for r in mine]):.1f} | {args.seeds} |")


if __name__ == "__main__":
    main()
