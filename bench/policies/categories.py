"""Contexts with categories: QuickScorer on categorical nodes against the walk, side by side.

Ad contexts carry categories (site, device, country). The trees split on a category's codes
with a bitset, and until the twelfth session every tree holding such a node was walked root to
leaf; now QuickScorer lists, per code, the nodes a value makes false (``online/policies/
tree_arrays.py``, ``_categorical_entries``).

1. Train: ``TreeEnsemblePolicy`` with its defaults learns ``--events`` events of the HTTP
   benches' stream (``bench.http.trainer_lag``'s feeder: four numbers ``f0..f3`` in [0, 1) and
   a ``site`` among five; ``--actions`` actions logged uniformly; reward 1 for the action
   ``ad<floor(f0 * K)>``, else 1 in 10), refits inline. The serving state is cached in
   ``bench/out/policies_categories/`` (Grove's codec; delete it to retrain).
2. Two layouts of the same ensemble: ``old``, categorical nodes walked (the layout packed with
   ``MAX_QUICK_CODES = 0``: the kernel before this change), and ``new``. Outputs must be
   bit-identical (checked).
3. Timed in the thread's CPU time, alternating old and new: one context's scores for all
   actions (``score_models``: what ``decide`` runs), and the rows of a batch of ``--batch``
   contexts (``score_rows``: what ``auto``'s evaluator runs per candidate and batch), per row.

    python -m bench.policies.categories --events 100000 --contexts 5000
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
from tqdm import tqdm

from bench.common.paths import OUT
from online.policies import tree_arrays
from online.policies.tree_arrays import pack, score_models, score_rows, to_blob
from online.policies.trees import TreeEnsemblePolicy
from service import codec

SITES = "abcde"


def stream(n: int, actions: int, seed: int) -> list[tuple]:
    """``bench.http.trainer_lag``'s events: (context, action, reward, propensity)."""
    rng = np.random.default_rng(seed)
    f, site = rng.random((n, 4)).round(5), rng.integers(len(SITES), size=n)
    chosen, lucky = rng.integers(actions, size=n), rng.random(n) < 0.1
    return [({"f0": f[i, 0], "f1": f[i, 1], "f2": f[i, 2], "f3": f[i, 3],
              "site": SITES[site[i]]}, f"ad{chosen[i]}",
             1.0 if int(f[i, 0] * actions) == chosen[i] or lucky[i] else 0.0, 1.0 / actions)
            for i in range(n)]


def trained(events: int, actions: int, seed: int) -> TreeEnsemblePolicy:
    path = OUT / "policies_categories" / f"site_{actions}_{events}_s{seed}.msgpack"
    if not path.exists():
        policy = TreeEnsemblePolicy(seed=seed)
        for a in range(actions):
            policy.add_action(f"ad{a}")
        log = stream(events, actions, seed)
        for lo in tqdm(range(0, events, 1000), desc="training", unit="k events"):
            policy.learn_many(log[lo:lo + 1000])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(codec.encode(policy.to_state(statistics=False)))
    return TreeEnsemblePolicy.from_state(codec.decode(path.read_bytes()))


def walked_layout(e) -> tuple[np.ndarray, np.ndarray]:
    """``e``'s layout with every tree that has a categorical node walked."""
    keep = tree_arrays.MAX_QUICK_CODES
    tree_arrays.MAX_QUICK_CODES = 0
    try:
        return to_blob(pack(e))
    finally:
        tree_arrays.MAX_QUICK_CODES = keep


def percentiles(ns) -> dict:
    return {f"p{q}": round(float(np.percentile(ns, q)) / 1e3, 1) for q in (50, 99, 99.9)}


def compare(policy, contexts: list[dict], batch: int) -> dict:
    e = policy._ensemble
    models = policy._candidate_models(policy._candidates(None, ())[1]).models
    X = np.vstack([policy._encoder.encode(x)[0] for x in contexts])
    layouts = {"old": walked_layout(e), "new": e._blob}
    quick = {k: int((tree_arrays.from_blob(*b).qs.leaf0 >= 0).sum()) for k, b in layouts.items()}
    clock = time.thread_time_ns
    one = {k: np.empty(len(X)) for k in layouts}
    out = {k: np.empty(len(models)) for k in layouts}
    for i in range(len(X) + 100):  # the first 100: compile and warm
        for k in (("old", "new") if i % 2 else ("new", "old")):
            c = clock()
            score_models(X[i % len(X)], models, *layouts[k], out[k])
            if i >= 100:
                one[k][i - 100] = clock() - c
        if not np.array_equal(out["old"], out["new"]):
            raise AssertionError(f"context {i}: old {out['old']} != new {out['new']}")
    rows = {k: [] for k in layouts}
    for j, lo in enumerate(range(0, len(X) - batch + 1, batch)):
        got = {}
        for k in (("old", "new") if j % 2 else ("new", "old")):
            got[k] = np.empty((batch, len(models)))
            c = clock()
            score_rows(X[lo:lo + batch], models, *layouts[k], got[k])
            rows[k].append((clock() - c) / batch)
        if not np.array_equal(got["old"], got["new"]):
            raise AssertionError(f"batch at {lo}: old and new rows differ")
    return {"trees": e.n_trees, "quick trees": quick,
            "decide kernel us (one context)": {k: percentiles(v) for k, v in one.items()},
            "rows us per row (median over batches)": {
                k: round(float(np.median(v)) / 1e3, 1) for k, v in rows.items()},
            "p50 old / new (one context)": round(float(np.median(one["old"]) /
                                                       np.median(one["new"])), 2)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=100_000)
    ap.add_argument("--actions", type=int, default=26)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--contexts", type=int, default=5_000)
    ap.add_argument("--batch", type=int, default=256)
    args = ap.parse_args(argv)
    policy = trained(args.events, args.actions, args.seed)
    contexts = [x for x, _, _, _ in stream(args.contexts, args.actions, args.seed + 1000)]
    report = {"events": args.events, "actions": args.actions, "seed": args.seed,
              **compare(policy, contexts, args.batch)}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
