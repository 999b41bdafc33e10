"""RuDi bench: does eq. 9's reward bias toward many-dimensional statistics cost Table 3?

    nice -n 10 python -m bench.rudi.reward_bias --dataset vews --max-events 100 --seeds 2
    nice -n 10 python -m bench.rudi.reward_bias --dataset vews --max-events 100 --seeds 3 \
        --scores bench/out/rudi_full/vews.json.vews.GRU.npy --variant 128:paper \
        --variant 128:adjusted --variant 1024:paper

The reward of a categorical statistic (eq. 5/9) is the multiple correlation of its p one-hot
dimensions with the (residualised) teacher on a batch of B entities; with no signal at all it
is about sqrt(p / (B - 1)) (0.28 for p = 10, B = 128, against 0.09 for a scalar). This script
runs MCTS-SG as the paper defines it and, as a departure, with the adjusted multiple
correlation (``MCTSSG(adjusted=True)``), on the same teacher, split and budget, and prints
Table 3's figure (train / test / columns) beside the Lasso- and LightGBM-selected flat sets.

``--variant B:reward`` (repeatable) chooses the runs: the batch size B of the reward and
``paper`` (eqs. 4-5/8-9) or ``adjusted``. A larger B is the paper's algorithm with another
value of a Table 2 hyper-parameter: it shrinks the reward's noise (both the sqrt(p / B)
dimension bias and the in-batch leverage of a few extreme entities) at B / 128 times the search
cost. ``--scores`` reuses a teacher's scores saved by ``rudi/tables.py`` (same data arguments)
instead of training it again. MCTS-SG's grammar uses RuDi's schema (inferred on the fitting
events), as in ``rudi/tables.py``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from tqdm import tqdm

from bench.rudi.data import LOADERS
from bench.rudi.tables import (
    bar_progress,
    flat_aggregates,
    mc_train_test,
    select_by_lasso,
    select_by_lightgbm,
    split,
    train_teachers,
)
from online.rules.events import EventTable, infer_schema
from online.rules.mcts_sg import MCTSSG
from online.rules.operators import Grammar, build_operators


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="vews", choices=sorted(LOADERS))
    ap.add_argument("--n-entities", type=int, default=None, help="subsample (default: all)")
    ap.add_argument("--max-events", type=int, default=None)
    ap.add_argument("--teacher", default="GRU", choices=["GRU", "LightGBM", "MLP"])
    ap.add_argument("--K", type=int, default=20)
    ap.add_argument("--D", type=int, default=4)
    ap.add_argument("--sims", type=int, default=500)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--max-categories", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None, help="write the rows here")
    ap.add_argument("--scores", default=None, help="the teacher's scores (.npy of rudi_tables)")
    ap.add_argument(
        "--variant",
        action="append",
        default=None,
        help="B:paper or B:adjusted (default: 128:paper and 128:adjusted)",
    )
    args = ap.parse_args(argv)
    variants = [
        (int(b), r == "adjusted")
        for b, r in (v.split(":") for v in (args.variant or ["128:paper", "128:adjusted"]))
    ]
    print("args:", vars(args), flush=True)
    load, entity_col, order_col = LOADERS[args.dataset]
    events, labels_s, desc = load(args.n_entities, args.seed)
    schema = infer_schema(events, entity_col, order_col, max_categories=args.max_categories)
    if args.max_events:
        events = events[events.groupby(entity_col).cumcount().to_numpy() < args.max_events]
        events = events.reset_index(drop=True)
    table, F, owner = flat_aggregates(events, entity_col, order_col, schema)
    entities = table.entities
    labels = labels_s.loc[entities].to_numpy()
    train, valid, test = split(entities, args.seed)
    fit_idx, test = np.sort(np.r_[train, valid]), np.sort(test)
    if args.scores:
        y = np.load(args.scores)
        assert len(y) == len(entities), "--scores: another data set or subsample"
    else:
        y = train_teachers(F, labels, train, valid, args.seed, (args.teacher,), table)[args.teacher]
    y_fit, y_te = y[fit_idx], y[test]
    ent_col = events[entity_col].to_numpy()
    ev_fit = events[np.isin(ent_col, entities[fit_idx])]
    rschema = infer_schema(ev_fit, entity_col, order_col, max_categories=args.max_categories)
    fit_table = EventTable.from_events(ev_fit, entity_col, rschema, order_col)
    te_table = EventTable.from_events(
        events[np.isin(ent_col, entities[test])], entity_col, rschema, order_col
    )
    grammar = Grammar(build_operators(rschema), args.D)
    rows = {}
    cols = select_by_lasso(F[fit_idx], y_fit, owner, args.K)
    rows["Lasso-selected flat"] = [
        mc_train_test(F[fit_idx][:, cols], y_fit, F[test][:, cols], y_te)
    ]
    cols = select_by_lightgbm(F[fit_idx], y_fit, owner, args.K, args.seed)
    rows["LightGBM-selected flat"] = [
        mc_train_test(F[fit_idx][:, cols], y_fit, F[test][:, cols], y_te)
    ]
    for B, adjusted in variants:
        name = (
            f"MCTS-SG B={B}, adjusted reward (not the paper)"
            if adjusted
            else f"MCTS-SG B={B} (paper's reward)"
        )
        rows[name] = []
        for s in range(args.seeds):
            cpu = time.process_time()
            with tqdm(total=100, desc=f"{name[:20]} seed {s}", leave=False) as bar:
                sg = MCTSSG(
                    args.K, args.D, B, args.sims, adjusted=adjusted, random_state=args.seed + s
                ).fit(fit_table, y_fit, grammar, progress=bar_progress(bar))
            S_te = np.hstack([grammar.evaluate(c, te_table) for c in sg.statistics_])
            rows[name].append(mc_train_test(np.hstack(sg.values_), y_fit, S_te, y_te))
            print(
                f"{name} seed {s}: train {rows[name][-1][0]:.4f} test {rows[name][-1][1]:.4f}"
                f" refit {rows[name][-1][3]:.4f} cols {rows[name][-1][2]} "
                f"({time.process_time() - cpu:.0f}s CPU)",
                flush=True,
            )
            print("   ", [grammar.label(c) for c in sg.statistics_], flush=True)
    print(
        f"\n## {desc}, teacher {args.teacher}: Table 3 (train / test / test refit / "
        f"columns), "
        f"K={args.K}, {args.sims} simulations"
    )
    for name, res in rows.items():
        r = np.array(res, dtype=float)
        print(
            f"  {name:<48} {r[:, 0].mean():.4f} / {r[:, 1].mean():.4f} / "
            f"{r[:, 3].mean():.4f} / {r[:, 2].mean():.0f}"
            + (
                f"   (std {r[:, 0].std():.4f} / {r[:, 1].std():.4f}, {len(r)} seeds)"
                if len(r) > 1
                else ""
            )
        )
    if args.json:
        import json

        Path(args.json).write_text(json.dumps(rows, indent=1, default=float))


if __name__ == "__main__":
    main()
