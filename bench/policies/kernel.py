"""How fast is the decide kernel? ``CompiledEnsemble.predict`` against the kernel it replaced,
side by side on a trained policy's ensemble.

1. Train: ``TreeEnsemblePolicy`` with its defaults plays ``--events`` events of the stream with
   sparse input (as ``bench.policies.speed``'s latency; default Letter, 26 actions: 26 x 100
   trees of up to 63 leaves). The serving state is cached in ``bench/out/policies_kernel/``
   (scratch in Grove's codec, msgpack + arrays; delete it to retrain).
2. Kernel alone: for ``--contexts`` contexts of the stream (encoded once), the old kernel
   (``score_models_lanes`` below, the one before commit ab31518's successor: 4 trees walked
   together without data-dependent branches, on the same packed words) and the new one (one
   tree at a time, branching) score all actions, in turns of one
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
import time

import numba
import numpy as np

from bench.common.paths import OUT
from bench.common.streams import BanditStream
from bench.policies.compare import load
from bench.policies.speed import SparseTreesPlayer
from online.policies.tree_arrays import (
    INDEX_BITS,
    N_VIEWS,
    RIGHT_BITS,
    SLOT_BITS,
    SPECIAL,
    ZERO_THRESHOLD,
    CompiledEnsemble,
    Packed,
    _flat_decision,
    pack,
)
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


# -- the kernel before this one (commit ab31518), for the comparison ---------------------------

K = 4  # trees walked together


def pack_lanes(e: CompiledEnsemble) -> Packed:
    """The current layout plus the previous kernel's last word: a node that reads the NaN slot
    (goes right) with right = 0, so that a lane that has reached its leaf loops there."""
    packed = pack(e)
    words = np.append(packed.words, np.uint64(N_VIEWS * packed.n_features))
    return packed._replace(words=words, values=words.view(np.float64))


@numba.njit(cache=True, nogil=True)
def score_models_lanes(x, models, packed, out):
    """The previous kernel: ``K`` trees of a model walked together, one step of each in turn,
    without data-dependent branches; a lane whose tree has reached its leaf loops on the extra
    last word of ``pack_lanes`` until the others have."""
    model_trees, roots, words, values = packed.model_trees, packed.roots, packed.words, \
        packed.values
    thresholds, n_f = packed.thresholds, packed.n_features
    feature, threshold, decision_type = packed.feature, packed.threshold, packed.decision_type
    cat_row, cat_b, cat_t = packed.cat_row, packed.cat_boundaries, packed.cat_threshold
    # the copies of x (see _VIEWS), then one NaN slot
    xs = np.empty(N_VIEWS * n_f + 1)
    for f in range(n_f):
        v = x[f] if f < x.shape[0] else np.nan
        nan = np.isnan(v)
        zero = nan or abs(v) <= ZERO_THRESHOLD
        xs[f] = v
        xs[n_f + f] = -np.inf if nan else v
        xs[2 * n_f + f] = 0.0 if nan else v
        xs[3 * n_f + f] = np.nan if zero else v
        xs[4 * n_f + f] = -np.inf if zero else v
    xs[N_VIEWS * n_f] = np.nan
    loop = words.shape[0] - 1
    slot_mask, index_mask = np.uint64(SPECIAL), np.uint64((1 << INDEX_BITS) - 1)
    right_mask = np.uint64((1 << RIGHT_BITS) - 1)
    index_shift, right_shift = np.uint64(SLOT_BITS), np.uint64(SLOT_BITS + INDEX_BITS)
    cur = np.empty(K, np.int64)  # each lane's node (``loop`` once it has reached its leaf)
    leaf = np.empty(K, np.int64)
    for j in range(models.shape[0]):
        m = models[j]
        s = 0.0
        if m >= 0:
            t, t1 = model_trees[m], model_trees[m + 1]
            while t < t1:
                n_k = min(K, t1 - t)
                done = K
                for q in range(K):
                    r = roots[t + q] if q < n_k else ~loop
                    leaf[q] = 0
                    if r >= 0:
                        cur[q], done = r, done - 1
                    else:
                        cur[q], leaf[q] = loop, ~r
                while done < K:
                    for q in range(K):
                        n = cur[q]
                        w = words[n]
                        slot = np.int64(w & slot_mask)
                        if slot != SPECIAL:
                            go_left = xs[slot] <= thresholds[(w >> index_shift) & index_mask]
                        else:
                            go_left = _flat_decision(
                                x, np.int64((w >> index_shift) & index_mask), feature,
                                threshold, decision_type, cat_row, cat_b, cat_t)
                        # branch-free (a mispredicted branch would flush the other lanes'
                        # loads): left is the next word, right ``right`` words on
                        g = np.int64(go_left)
                        child = n + g + (1 - g) * np.int64((w >> right_shift) & right_mask)
                        at_leaf = np.int64((w >> np.uint64(63 - g)) & np.uint64(1))
                        leaf[q] += at_leaf * (child - leaf[q])
                        cur[q] = child + at_leaf * (loop - child)
                        done += at_leaf
                for q in range(n_k):
                    s += values[leaf[q]]
                t += n_k
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
    lanes = pack_lanes(e)
    xs = [policy._encoder.encode(x)[0] for x in contexts]
    a, b = np.empty(len(models)), np.empty(len(models))
    clock = time.thread_time_ns

    def old(x):
        c = clock()
        score_models_lanes(x, models, lanes, a)
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
    lanes = pack_lanes(e)

    def predict_lanes(x, models, out=None):
        out = np.empty(len(models)) if out is None else out
        score_models_lanes(np.ascontiguousarray(x, np.float64), np.asarray(models, np.int64),
                           lanes, out)
        return out

    clock = time.thread_time_ns

    def timed(x, kernel):
        if kernel == "old":
            e.predict = predict_lanes  # an instance attribute hides the method
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
