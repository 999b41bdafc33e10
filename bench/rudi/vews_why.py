"""Why MCTS-SG does not beat the flat baselines on VEWS: the batch reward at each step of Alg. 1.

    python -m bench.rudi.vews_why --results out.json --split 0 --teacher GRU
    python -m bench.rudi.vews_why --tables bench/out/rudi_full/vews.json --max-events 100

Reads a ``rudi/vews_paired.py`` result (the teacher's scores of that split are in the ``.npy``
file beside it, MCTS-SG's compositions in the JSON), or with ``--tables`` a ``rudi/tables.py``
result (give its data arguments again: ``--dataset``, ``--n-entities``, ``--max-events``,
``--seed``; ``--sg-seed`` 0 is RuDi's own search, 1.. the extra seeds), and replays Algorithm
1's targets: at step k the target is the teacher residualised on MCTS-SG's first k - 1
statistics (eq. 7, train rows).
For the statistic MCTS-SG chose at step k and for every flat aggregate (Select_F o Agg) it
gives the partial correlation on *all* train rows (what a full-data forward selection such as
the Lasso path sees) and the reward of eqs. 8-9 on random batches of B = 128 (what MCTS-SG
sees): mean and standard deviation over ``--batches`` batches, and the chosen statistic's batch
reward after permuting its rows (no relation left: the reward's noise floor). When the best
candidates differ by less than one batch standard deviation, or a many-dimensional statistic's
batch reward is inflated by about sqrt(p / B), the search cannot tell them apart.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

from bench.rudi.data import LOADERS
from bench.rudi.tables import split
from bench.rudi.vews_paired import flat_stats
from online.rules.events import EventTable, infer_schema
from online.rules.mcts_sg import multiple_corr, residualise
from online.rules.operators import Grammar, build_operators


def batch_rewards(X, target, B, n, rng):
    """Eqs. 8-9 on ``n`` random batches of ``B`` rows."""
    out = np.empty(n)
    for i in range(n):
        b = rng.choice(len(target), B, replace=False)
        out[i] = multiple_corr(X[b], target[b])
    return out


def from_paired(args):
    """(train teacher scores, table, train rows, grammar, flat grammar, compositions, labels,
    B) from a rudi/vews_paired.py result."""
    res = json.loads(Path(args.results).read_text())
    a = res["args"]
    rec = next(r for r in res["splits"] if r["split"] == args.split)["teachers"][args.teacher]
    y = np.load(f"{args.results}.split{args.split}.{args.teacher}.npy")
    load, entity_col, order_col = LOADERS[a["dataset"]]
    events, _, _ = load(a["n_entities"], 0)
    if a["max_events"]:
        events = events[events.groupby(entity_col).cumcount().to_numpy() < a["max_events"]]
        events = events.reset_index(drop=True)
    schema = infer_schema(events, entity_col, order_col, max_categories=a["max_categories"])
    table = EventTable.from_events(events, entity_col, schema, order_col)
    grammar = Grammar(build_operators(schema), a["D"])
    g2 = Grammar(build_operators(schema), 2)
    train, valid, _ = split(table.entities, args.split)
    fit_idx = np.sort(np.r_[train, valid])
    sg = rec["sg"][args.sg_seed]
    comps = [tuple(c) for c in sg["compositions"]]
    return y[fit_idx], table, fit_idx, grammar, g2, comps, sg["statistics"], a["B"]


def from_tables(args):
    """The same from a rudi/tables.py result: RuDi's schema (inferred on the fitting events)."""
    res = json.loads(Path(args.tables).read_text())[args.dataset]["teachers"][args.teacher]
    y = np.load(f"{args.tables}.{args.dataset}.{args.teacher}.npy")
    load, entity_col, order_col = LOADERS[args.dataset]
    events, _, _ = load(args.n_entities, args.seed)
    if args.max_events:
        events = events[events.groupby(entity_col).cumcount().to_numpy() < args.max_events]
        events = events.reset_index(drop=True)
    entities = np.unique(events[entity_col].to_numpy())
    train, valid, _ = split(entities, args.seed)
    fit_idx = np.sort(np.r_[train, valid])
    ev_fit = events[np.isin(events[entity_col].to_numpy(), entities[fit_idx])]
    schema = infer_schema(ev_fit, entity_col, order_col, max_categories=args.max_categories)
    table = EventTable.from_events(ev_fit, entity_col, schema, order_col)
    grammar = Grammar(build_operators(schema), args.D)
    g2 = Grammar(build_operators(schema), 2)
    names = (
        res["compositions"]
        if args.sg_seed == 0
        else res["sg_extra"][args.sg_seed - 1]["compositions"]
    )
    comps = [tuple(grammar.index[n] for n in c) for c in names]
    labels = [grammar.label(c) for c in comps]
    return y[fit_idx], table, np.arange(table.n_entities), grammar, g2, comps, labels, args.B or 128


def plot(paths, png):
    """Per step k: the chosen statistic's partial correlation on all train rows and its batch
    reward, beside the best flat aggregate's, for one or more ``--json`` outputs (one panel
    each, titled by the file name)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(paths), figsize=(5.5 * len(paths), 4), squeeze=False)
    for ax, path in zip(axes[0], paths):
        rows = json.loads(Path(path).read_text())
        k = [r["k"] for r in rows]
        cat = [r["chosen_p"] > 2 for r in rows]
        ax.plot(
            k,
            [r["chosen_full"] for r in rows],
            "o-",
            color="tab:red",
            label="MCTS-SG's choice: partial corr., all rows",
        )
        ax.plot(
            k,
            [r["chosen_batch"][0] for r in rows],
            "o--",
            color="tab:red",
            mfc="none",
            label="MCTS-SG's choice: batch reward (B = 128)",
        )
        ax.plot(
            k,
            [r["chosen_null_batch"] for r in rows],
            ":",
            color="grey",
            label="its batch reward, rows permuted (no signal)",
        )
        ax.plot(
            k,
            [r["best_flat_full"] for r in rows],
            "s-",
            color="tab:blue",
            label="best flat aggregate: partial corr., all rows",
        )
        ax.plot(
            k,
            [r["best_flat_batch"][0] for r in rows],
            "s--",
            color="tab:blue",
            mfc="none",
            label="best flat aggregate: batch reward",
        )
        for kk, c in zip(k, cat):
            if c:
                ax.axvspan(kk - 0.4, kk + 0.4, color="tab:red", alpha=0.07, lw=0)
        ax.set_xlabel("step k of Algorithm 1 (shaded: MCTS-SG chose a statistic of > 2 dims)")
        ax.set_ylabel("correlation with the residualised teacher")
        ax.set_title(Path(path).stem, fontsize=9)
        ax.set_ylim(0, 1)
    axes[0][0].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print("wrote", png)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", default=None, help="a rudi/vews_paired.py JSON")
    ap.add_argument("--tables", default=None, help="a rudi/tables.py JSON")
    ap.add_argument("--dataset", default="vews", choices=sorted(LOADERS))
    ap.add_argument("--n-entities", type=int, default=None)
    ap.add_argument("--max-events", type=int, default=None)
    ap.add_argument("--max-categories", type=int, default=10)
    ap.add_argument("--D", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--split", type=int, default=0)
    ap.add_argument("--teacher", default="GRU")
    ap.add_argument("--sg-seed", type=int, default=0)
    ap.add_argument("--batches", type=int, default=200)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--B", type=int, default=None, help="batch size (default: the run's)")
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--plot",
        nargs="+",
        default=None,
        metavar="JSON",
        help="plot these --json outputs (to --png) and exit",
    )
    ap.add_argument("--png", default="bench/rudi/plots/rudi_vews_why.png")
    args = ap.parse_args(argv)
    if args.plot:
        plot(args.plot, args.png)
        return
    ytr, table, fit_idx, grammar, g2, comps, labels, B = (
        from_tables(args) if args.tables else from_paired(args)
    )
    fstats = flat_stats(g2)
    flat = [g2.evaluate(s, table, fit_idx) for s in fstats]
    flat_names = [g2.label(s) for s in fstats]
    chosen = [grammar.evaluate(c, table, fit_idx) for c in comps]
    rng = np.random.default_rng(0)
    B = args.B or B
    rows = []
    print(
        f"{args.dataset}, {args.teacher} teacher, split {args.split}, "
        f"MCTS-SG seed {args.sg_seed}: "
        f"{len(ytr)} train rows, B = {B}, {args.batches} batches per reward"
    )
    print(
        "k | MCTS-SG's statistic (p) | partial corr all rows | batch reward mean +- sd || "
        "best flat by all rows (p) | all rows | batch mean +- sd || flat within 1 sd || "
        "chosen statistic's batch reward with its rows permuted (noise floor)"
    )
    for k in range(min(args.steps, len(comps))):
        target = residualise(ytr, chosen[:k]) if k else ytr.copy()
        full = np.array([multiple_corr(X, target) for X in flat])
        order = np.argsort(-full)
        best = int(order[0])
        c_full = multiple_corr(chosen[k], target)
        c_b = batch_rewards(chosen[k], target, B, args.batches, rng)
        f_b = batch_rewards(flat[best], target, B, args.batches, rng)
        within = int((full >= full[best] - f_b.std()).sum())
        perm = rng.permutation(len(target))  # no relation left: the reward's noise floor
        c_null = batch_rewards(chosen[k][perm], target, B, args.batches, rng)
        row = {
            "k": k + 1,
            "chosen": labels[k],
            "chosen_p": int(chosen[k].shape[1]),
            "chosen_full": float(c_full),
            "chosen_batch": (float(c_b.mean()), float(c_b.std())),
            "best_flat": flat_names[best],
            "best_flat_p": int(flat[best].shape[1]),
            "best_flat_full": float(full[best]),
            "best_flat_batch": (float(f_b.mean()), float(f_b.std())),
            "flat_within_1sd": within,
            "chosen_null_batch": float(c_null.mean()),
            "top5_flat": [(flat_names[j], float(full[j])) for j in order[:5]],
        }
        rows.append(row)
        print(
            f"{k + 1:>2} | {row['chosen']} ({row['chosen_p']}) | {c_full:.3f} | "
            f"{c_b.mean():.3f} +- {c_b.std():.3f} || {row['best_flat']} "
            f"({row['best_flat_p']}) | {full[best]:.3f} | {f_b.mean():.3f} +- "
            f"{f_b.std():.3f} || {within} || null {c_null.mean():.3f}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
