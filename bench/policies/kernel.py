"""How fast is the decide kernel? ``CompiledEnsemble.predict`` against the kernel it replaced,
side by side on a trained policy's ensemble.

1. Train: ``TreeEnsemblePolicy`` with its defaults plays ``--events`` events of the stream with
   sparse input (as ``bench.policies.speed``'s latency; default Letter, 26 actions: 26 x 100
   trees of up to 63 leaves). The serving state is cached in ``bench/out/policies_kernel/``
   (scratch, delete it to retrain).
2. Kernel alone: for ``--contexts`` contexts of the stream (encoded once), the old kernel
   (``score_models_v1`` below: one tree at a time on LightGBM's node order, the threshold and
   the leaf value in their own arrays) and the new one score all actions, in turns of one
   context (each call finds the caches filled by the other kernel's arrays) and of 1,000
   contexts (each kernel keeps the caches to itself); each call timed in the thread's CPU time
   (``thread_time_ns``). Their outputs must be bit-identical (checked).
3. Decide latency: ``policy.decide`` among all actions, as ``bench.policies.speed`` measures it,
   with the ensemble's ``predict`` swapped between the old kernel and the new one, alternating.

    python -m bench.policies.kernel --data letter --events 60000 --contexts 10000
"""

from __future__ import annotations

import argparse
import json
import pickle
import time

import numba
import numpy as np

from bench.common.paths import OUT
from bench.common.streams import BanditStream
from bench.policies.compare import load
from bench.policies.speed import SparseTreesPlayer
from online.policies.tree_arrays import (
    CATEGORICAL_MASK,
    DEFAULT_LEFT_MASK,
    MISSING_NAN,
    MISSING_ZERO,
    ZERO_THRESHOLD,
    CompiledEnsemble,
)
from online.policies.trees import TreeEnsemblePolicy


def trained(data, name, events, seed):
    """The policy after ``events`` events (cached serving state)."""
    path = OUT / "policies_kernel" / f"{name}_{events}_s{seed}.pkl"
    if not path.exists():
        player = SparseTreesPlayer(data, seed)
        for X, y in BanditStream(data, seed=seed, chunk_size=1000).chunks(events):
            player.play(X, y)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(player.policy.to_state(statistics=False)))
    return TreeEnsemblePolicy.from_state(pickle.loads(path.read_bytes()))


# -- the kernel before bench/policies/kernel.py (commit 1618279), for the comparison -------------


def pack_v1(e: CompiledEnsemble):
    """The old kernel's packed rows: per node (feature, left, right, decision_type), per tree
    (first node, number of nodes, first leaf, first bitset row)."""
    nodes = np.empty((len(e.feature), 4), np.int32)
    nodes[:, 0], nodes[:, 1], nodes[:, 2] = e.feature, e.left, e.right
    nodes[:, 3] = e.decision_type
    trees = np.empty((e.n_trees, 4), np.int64)
    trees[:, 0], trees[:, 1] = e.tree_nodes[:-1], np.diff(e.tree_nodes)
    trees[:, 2], trees[:, 3] = e.tree_leaves[:-1], e.tree_cats[:-1]
    return (e.model_trees, trees, nodes, e.threshold, e.leaf_value, e.cat_boundaries,
            e.cat_threshold)


@numba.njit(cache=True, nogil=True)
def score_models_v1(x, models, model_trees, trees, nodes, threshold, leaf_value, cat_boundaries,
                    cat_threshold, out):
    n_x = x.shape[0]
    for j in range(models.shape[0]):
        m = models[j]
        s = 0.0
        if m >= 0:
            for t in range(model_trees[m], model_trees[m + 1]):
                n0 = trees[t, 0]
                if trees[t, 1] == 0:  # a single leaf
                    s += leaf_value[trees[t, 2]]
                    continue
                node = 0
                while node >= 0:
                    i = n0 + node
                    f = nodes[i, 0]
                    d = nodes[i, 3]
                    v = x[f] if f < n_x else np.nan
                    if d & CATEGORICAL_MASK:
                        go_left = False
                        if not np.isnan(v) and v >= 0.0:
                            iv = np.int64(v)
                            c = trees[t, 3] + np.int64(threshold[i])
                            w0 = cat_boundaries[c]
                            word = iv // 32
                            if word < cat_boundaries[c + 1] - w0:
                                go_left = (cat_threshold[w0 + word] >> np.uint32(iv % 32)) \
                                    & np.uint32(1) == 1
                    else:
                        missing = (d >> 2) & 3
                        if np.isnan(v) and missing != MISSING_NAN:
                            v = 0.0
                        if (missing == MISSING_ZERO and abs(v) <= ZERO_THRESHOLD) or (
                                missing == MISSING_NAN and np.isnan(v)):
                            go_left = (d & DEFAULT_LEFT_MASK) != 0
                        else:
                            go_left = v <= threshold[i]
                    node = nodes[i, 1] if go_left else nodes[i, 2]
                s += leaf_value[trees[t, 2] + ~node]
        out[j] = s


# -- measuring -----------------------------------------------------------------------------------


def percentiles(ns) -> dict:
    return {f"p{q}": float(np.percentile(ns, q)) / 1e3 for q in (50, 99, 99.9)}


def kernel_alone(policy, contexts, block: int = 1) -> dict:
    """CPU time (us) of one call of each kernel per context: in turns of ``block`` contexts
    (block 1: old and new on the same context, alternating which goes first, each evicting the
    other's arrays from the caches; block 1000: each kernel keeps the caches for 1,000 calls)."""
    e = policy._ensemble
    models = policy._candidates(None, ())[1]
    models = np.where(models < e.n_models, models, -1)
    old_args = pack_v1(e)
    xs = [policy._encoder.encode(x)[0] for x in contexts]
    a, b = np.empty(len(models)), np.empty(len(models))
    clock = time.thread_time_ns

    def old(x):
        c = clock()
        score_models_v1(x, models, *old_args, a)
        return clock() - c

    def new(x):
        c = clock()
        e.predict(x, models, b)
        return clock() - c

    for x in xs[:200]:  # compile and warm
        old(x), new(x)
    t_old, t_new = np.empty(len(xs)), np.empty(len(xs))
    for lo in range(0, len(xs), block):
        turns = ((t_old, old), (t_new, new)) if (lo // block) % 2 else ((t_new, new), (t_old, old))
        for times, kernel in turns:
            for i in range(lo, min(lo + block, len(xs))):
                times[i] = kernel(xs[i])
        if not np.array_equal(a, b):  # both scored the block's last context
            raise AssertionError(f"context {lo}: old {a} != new {b}")
    return {"old": percentiles(t_old), "new": percentiles(t_new),
            "p50 old / new": float(np.median(t_old) / np.median(t_new))}


def decide_latency(policy, contexts) -> dict:
    """CPU time (us) of ``policy.decide`` among all actions with each kernel, alternating."""
    e = policy._ensemble
    old_args = pack_v1(e)

    def predict_v1(x, models, out=None):
        out = np.empty(len(models)) if out is None else out
        score_models_v1(np.ascontiguousarray(x, np.float64), np.asarray(models, np.int64),
                        *old_args, out)
        return out

    clock = time.thread_time_ns

    def timed(x, kernel):
        if kernel == "old":
            e.predict = predict_v1  # an instance attribute hides the method
        c = clock()
        policy.decide(x)
        c = clock() - c
        e.__dict__.pop("predict", None)
        return c

    for x in contexts[:200]:
        timed(x, "old"), timed(x, "new")
    t = {"old": np.empty(len(contexts)), "new": np.empty(len(contexts))}
    for i, x in enumerate(contexts):
        for kernel in (("old", "new") if i % 2 else ("new", "old")):
            t[kernel][i] = timed(x, kernel)
    return {k: percentiles(v) for k, v in t.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="letter")
    ap.add_argument("--events", type=int, default=60_000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--contexts", type=int, default=10_000)
    args = ap.parse_args(argv)
    data = load(args.data)
    policy = trained(data, args.data, args.events, args.seed)
    e = policy._ensemble
    names = np.array(data.feature_names, dtype=object)
    X, _ = next(BanditStream(data, seed=args.seed + 1000, chunk_size=args.contexts)
                .chunks(args.contexts))
    report = {"data": args.data, "events": args.events, "seed": args.seed,
              "models": e.n_models, "trees": e.n_trees, "nodes": len(e.feature),
              "leaves": len(e.leaf_value)}
    for kind in ("sparse", "dense"):
        if kind == "sparse":
            contexts = [dict.fromkeys(names[row].tolist(), 1) for row in X.view(bool)]
        else:
            contexts = [dict(zip(data.feature_names, row)) for row in X.tolist()]
        for block in (1, 1000):
            report[f"kernel_us_{kind}_block{block}"] = kernel_alone(policy, contexts, block)
        report[f"decide_us_{kind}"] = decide_latency(policy, contexts)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
