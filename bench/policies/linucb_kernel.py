"""How fast are LinUCB's scores? The compiled kernel against numpy's batched products, side by
side on a trained policy.

1. Train: ``make_policy("linucb")`` (the hosted kind, its defaults) decides and learns
   ``--events`` events of the stream with dense input (every variable, 0 or 1, as
   ``bench/policies/compare.py`` plays; default Letter: 26 actions, 77 columns with the
   intercept).
2. Scores of all actions for ``--contexts`` contexts of the stream (encoded once), in turns:
   the kernel (``ucb_scores``) and numpy (``A_inv[k] @ x`` for every action at once, then the
   same formula), each call timed in the thread's CPU time. Their scores must agree to 1e-9
   (checked).
3. ``policy.decide`` among all actions, each call timed the same way.

    python -m bench.policies.linucb_kernel --data letter --events 20000 --contexts 10000
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from tqdm import tqdm

from bench.common.paths import OUT
from bench.common.streams import BanditStream
from bench.policies.compare import load
from bench.policies.kernel import percentiles
from online import make_policy
from online.policies.linucb import ucb_scores


def numpy_scores(x, known, A_inv, b, alpha):
    """The kernel's formula by numpy (every action seen: ``known`` >= 0)."""
    d = len(x)
    u = A_inv[known, :d, :d] @ x
    return np.einsum("kd,kd->k", b[known, :d], u) + alpha * np.sqrt(np.maximum(u @ x, 0.0))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="letter")
    ap.add_argument("--events", type=int, default=20_000)
    ap.add_argument("--contexts", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    data = load(args.data)
    policy = make_policy("linucb", actions=list(data.actions), seed=args.seed)
    names = data.feature_names
    for X, y in tqdm(BanditStream(data, seed=args.seed).chunks(args.events), desc="train",
                     unit="chunk"):
        for row, label in zip(X.tolist(), y.tolist()):
            x = dict(zip(names, row))
            d = policy.decide(x)
            policy.learn_one(x, d.action, float(d.action == data.actions[label]), d.probability)
    X, _ = next(BanditStream(data, seed=args.seed + 1000, chunk_size=args.contexts).chunks(
        args.contexts))
    contexts = [dict(zip(names, row)) for row in X.tolist()]
    vectors = [policy._vector(policy._encoder.encode(x)[0]) for x in contexts]
    known = np.arange(len(data.actions), dtype=np.int64)
    A_inv, b, alpha, ridge = policy._A_inv, policy._b, policy.alpha, policy.ridge
    out = np.empty(len(known))
    times = {"kernel": [], "numpy": [], "decide": []}
    for x, context in zip(vectors, contexts):
        t = time.thread_time_ns()
        ucb_scores(x, known, A_inv, b, alpha, ridge, out)
        times["kernel"].append(time.thread_time_ns() - t)
        t = time.thread_time_ns()
        expected = numpy_scores(x, known, A_inv, b, alpha)
        times["numpy"].append(time.thread_time_ns() - t)
        np.testing.assert_allclose(out, expected, rtol=1e-9, atol=1e-12)
        t = time.thread_time_ns()
        policy.decide(context)
        times["decide"].append(time.thread_time_ns() - t)
    report = {name: percentiles(ns[200:]) for name, ns in times.items()}  # 200 to warm up
    report["numpy / kernel (p50)"] = report["numpy"]["p50"] / report["kernel"]["p50"]
    report.update(data=args.data, events=args.events, contexts=args.contexts,
                  columns=len(vectors[0]), mean_nonzero=float(np.mean(
                      [np.count_nonzero(v) for v in vectors])))
    out_dir = OUT / "policies_linucb_kernel"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"{args.data}_{args.events}_s{args.seed}.json").write_text(
        json.dumps(report, indent=1))
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
