"""How fast is the decide kernel? QuickScorer against the walk, side by side on a trained
policy's ensemble.

1. Train: ``TreeEnsemblePolicy`` with its defaults plays ``--events`` events of the stream with
   sparse input (as ``bench.policies.speed``'s latency; default Letter, 26 actions: 26 x 100
   trees of up to 63 leaves). The serving state is cached in ``bench/out/policies_kernel/``
   (scratch in Grove's codec, msgpack + arrays; delete it to retrain).
2. Kernel alone: for ``--contexts`` contexts of the stream (encoded once), the walk (the kernel
   before QuickScorer: ``score_models`` on a layout without quick trees, so every tree is walked
   root to leaf) and the current one (QuickScorer for the quick trees) score all actions, in
   turns of one context (each call finds the caches filled by the other kernel's arrays) and of
   1,000 contexts (each kernel keeps the caches to itself); each call timed in the thread's CPU
   time (``thread_time_ns``). Their outputs must be bit-identical (checked).
3. Decide latency: ``policy.decide`` among all actions, as ``bench.policies.speed`` measures it,
   with the ensemble's ``predict`` swapped between the walk and the current kernel, alternating.

    python -m bench.policies.kernel --data letter --events 60000 --contexts 10000
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from bench.common.paths import OUT
from bench.common.streams import BanditStream
from bench.policies.compare import load
from bench.policies.speed import SparseTreesPlayer
from online.policies.tree_arrays import CompiledEnsemble, score_models, to_blob
from online.policies.trees import TreeEnsemblePolicy
from service import codec


def trained(data, name, events, seed):
    """The policy after ``events`` events (cached serving state)."""
    path = OUT / "policies_kernel" / f"{name}_{events}_s{seed}.msgpack"
    if not path.exists():
        player = SparseTreesPlayer(data, seed)
        for X, y in BanditStream(data, seed=seed, chunk_size=1000).chunks(events):
            player.play(X, y)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(codec.encode(player.policy.to_state(statistics=False)))
    return TreeEnsemblePolicy.from_state(codec.decode(path.read_bytes()))


def walk_only(e: CompiledEnsemble) -> tuple[np.ndarray, np.ndarray]:
    """``e``'s layout with no quick tree, as the kernels take it: ``score_models`` walks every
    tree (QuickScorer's pass then reads empty node lists: ~1 us)."""
    packed = e._packed
    qs = packed.qs
    return to_blob(packed._replace(qs=qs._replace(
        leaf0=np.full(e.n_trees, -1, np.int64), slot_nodes=np.zeros_like(qs.slot_nodes),
        threshold=qs.threshold[:0], tree=qs.tree[:0], mask=qs.mask[:0],
        cat_groups=qs.cat_groups[:0], cat_code=qs.cat_code[:0], cat_tree=qs.cat_tree[:0],
        cat_mask=qs.cat_mask[:0], level_start=np.zeros_like(qs.level_start),
        level_threshold=qs.level_threshold[:0], level_row=qs.level_row[:0],
        dense=qs.dense[:0])))


# -- measuring -----------------------------------------------------------------------------------


def percentiles(ns) -> dict:
    return {f"p{q}": float(np.percentile(ns, q)) / 1e3 for q in (50, 99, 99.9)}


def kernel_alone(policy, contexts, block: int = 1) -> dict:
    """CPU time (us) of one call of each kernel per context (old: the walk, new: QuickScorer):
    in turns of ``block`` contexts (block 1: old and new on the same context, alternating which
    goes first, each evicting the other's arrays from the caches; block 1000: each kernel keeps
    the caches for 1,000 calls)."""
    e = policy._ensemble
    models = policy._candidates(None, ())[1]
    models = np.where(models < e.n_models, models, -1)
    walk = walk_only(e)
    xs = [policy._encoder.encode(x)[0] for x in contexts]
    a, b = np.empty(len(models)), np.empty(len(models))
    clock = time.thread_time_ns

    def old(x):
        c = clock()
        score_models(x, models, *walk, a)
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
    """CPU time (us) of ``policy.decide`` among all actions with each kernel (old: the walk),
    alternating."""
    e = policy._ensemble
    walk = walk_only(e)

    def predict_walk(x, models, out=None):
        out = np.empty(len(models)) if out is None else out
        score_models(np.ascontiguousarray(x, np.float64), np.asarray(models, np.int64), *walk,
                     out)
        return out

    clock = time.thread_time_ns

    def timed(x, kernel):
        if kernel == "old":
            e.predict = predict_walk  # an instance attribute hides the method
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
