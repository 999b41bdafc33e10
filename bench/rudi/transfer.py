"""Why a Table 3 figure drops from train to test: the OLS fit of eq. 5 and how it transfers.

    python -m bench.rudi.transfer --results bench/out/rudi_full/vews.json --dataset vews \\
        --max-events 100 --teacher GRU

Reads a ``rudi/tables.py`` result (the same data arguments: ``--dataset``, ``--n-entities``,
``--max-events``, ``--seed``; the teacher's scores come from the ``.npy`` saved beside the
JSON) and rebuilds the split, the Lasso- and LightGBM-selected flat aggregates and every
MCTS-SG seed's statistics. For each set of K statistics, with the OLS of eq. 5 fitted on the
train rows (the fitting 80%), it prints:

- ``train``: eq. 5 on the train rows (the paper's measure);
- ``test``: |corr| of the train fit with the teacher on the test rows (Table 3's test column);
- ``refit``: eq. 5 refitted on the test rows (do the statistics hold the teacher's information
  there, whatever the train coefficients?);
- ``clip``: ``test`` with every test column clipped to its train [min, max] (a diagnostic: is
  the drop extrapolation of the linear fit beyond the train range?);
- ``spear``: Spearman's rank correlation of the train fit with the teacher on test (robust to
  a few extreme fitted values);
- ``out``: test entities with some column outside its train range; ``test_in``: ``test`` on
  the other test entities;
- ``worst``: the test entity with the largest |fit - teacher| (its residual, in teacher
  standard deviations), and the statistic with the largest term |beta_j (x_j - mean_j)| for it.
None of these changes the method; they say where the test figure is lost.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from scipy.stats import spearmanr

from bench.rudi.data import LOADERS
from bench.rudi.tables import flat_aggregates, select_by_lasso, select_by_lightgbm, split
from online.rules.events import EventTable, infer_schema
from online.rules.mcts_sg import multiple_corr
from online.rules.operators import Grammar, build_operators


def ols(Xtr, ytr):
    A = np.column_stack([np.ones(len(ytr)), Xtr])
    beta, *_ = np.linalg.lstsq(A, ytr, rcond=None)
    return beta


def corr(a, b):
    return abs(float(np.corrcoef(a, b)[0, 1]))


def transfer(Xtr, ytr, Xte, yte, names=None):
    """The measures of the module docstring for one set of columns."""
    beta = ols(Xtr, ytr)
    fit_te = beta[0] + Xte @ beta[1:]
    lo, hi = Xtr.min(0), Xtr.max(0)
    fit_clip = beta[0] + np.clip(Xte, lo, hi) @ beta[1:]
    outside = ((Xte < lo) | (Xte > hi)).any(1)
    res = {
        "train": multiple_corr(Xtr, ytr),
        "test": corr(fit_te, yte),
        "refit": multiple_corr(Xte, yte),
        "clip": corr(fit_clip, yte),
        "spear": abs(float(spearmanr(fit_te, yte)[0])),
        "out": int(outside.sum()),
        "test_in": corr(fit_te[~outside], yte[~outside]),
        "cols": int(Xtr.shape[1]),
    }
    err = np.abs(fit_te - yte)
    i = int(err.argmax())
    terms = np.abs(beta[1:] * (Xte[i] - Xtr.mean(0)))
    j = int(terms.argmax())
    res["worst"] = {
        "residual_sd": float(err[i] / yte.std()),
        "column": names[j] if names else j,
        "term_sd": float(terms[j] / yte.std()),
        "value": float(Xte[i, j]),
        "train_range": (float(lo[j]), float(hi[j])),
    }
    return res


def load(args):
    loader, entity_col, order_col = LOADERS[args.dataset]
    events, labels_s, _ = loader(args.n_entities, args.seed)
    schema = infer_schema(events, entity_col, order_col, max_categories=args.max_categories)
    if args.max_events:  # as rudi/tables.py: the schema of the flat aggregates comes first
        events = events[events.groupby(entity_col).cumcount().to_numpy() < args.max_events]
        events = events.reset_index(drop=True)
    table, F, owner = flat_aggregates(events, entity_col, order_col, schema)
    g2 = Grammar(build_operators(schema), 2)  # the flat aggregates' names, in their order
    flat_names, keys = [], set()
    for i in g2.next_ops(()):
        for j in g2.next_ops((i,)):
            if g2.canonical_key((i, j)) not in keys:
                keys.add(g2.canonical_key((i, j)))
                flat_names += g2.dimension_labels((i, j))
    assert len(flat_names) == F.shape[1]
    train, valid, test = split(table.entities, args.seed)
    fit_idx, test = np.sort(np.r_[train, valid]), np.sort(test)
    ent = events[entity_col].to_numpy()
    ev_fit = events[np.isin(ent, table.entities[fit_idx])]
    ev_te = events[np.isin(ent, table.entities[test])]
    # RuDi's schema: inferred on the fitting events (as RuDi.fit does)
    rschema = infer_schema(ev_fit, entity_col, order_col, max_categories=args.max_categories)
    grammar = Grammar(build_operators(rschema), args.D)
    t_fit = EventTable.from_events(ev_fit, entity_col, rschema, order_col)
    t_te = EventTable.from_events(ev_te, entity_col, rschema, order_col)
    return F, owner, np.array(flat_names), fit_idx, test, grammar, t_fit, t_te


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--results", required=True)
    ap.add_argument("--dataset", required=True, choices=sorted(LOADERS))
    ap.add_argument("--teacher", default="GRU")
    ap.add_argument("--n-entities", type=int, default=None)
    ap.add_argument("--max-events", type=int, default=None)
    ap.add_argument("--max-categories", type=int, default=10)
    ap.add_argument("--K", type=int, default=20)
    ap.add_argument("--D", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    res = json.loads(Path(args.results).read_text())[args.dataset]["teachers"][args.teacher]
    y = np.load(f"{args.results}.{args.dataset}.{args.teacher}.npy")
    F, owner, flat_names, fit_idx, test, grammar, t_fit, t_te = load(args)
    ytr, yte = y[fit_idx], y[test]
    sets = {}
    cols = select_by_lasso(F[fit_idx], ytr, owner, args.K)
    sets["Lasso"] = (F[fit_idx][:, cols], F[test][:, cols], list(flat_names[cols]))
    cols = select_by_lightgbm(F[fit_idx], ytr, owner, args.K, args.seed)
    sets["LightGBM"] = (F[fit_idx][:, cols], F[test][:, cols], list(flat_names[cols]))
    sets["All flat"] = (F[fit_idx], F[test], list(flat_names))
    runs = [(args.seed, res["compositions"])]
    runs += [(e["seed"], e["compositions"]) for e in res.get("sg_extra", [])]
    for seed, comps in runs:
        seqs = [tuple(grammar.index[n] for n in c) for c in comps]
        names = [lab for s in seqs for lab in grammar.dimension_labels(s)]
        sets[f"MCTS-SG seed {seed}"] = (
            np.hstack([grammar.evaluate(s, t_fit) for s in seqs]),
            np.hstack([grammar.evaluate(s, t_te) for s in seqs]),
            names,
        )
    out = {}
    print(f"{args.dataset}, {args.teacher} teacher: {len(ytr)} train rows, {len(yte)} test rows")
    print(
        f"{'set':<18} {'cols':>4} {'train':>7} {'test':>7} {'refit':>7} {'clip':>7} "
        f"{'spear':>7} {'out':>4} {'test_in':>7}  worst test entity"
    )
    for name, (Xtr, Xte, names) in sets.items():
        r = transfer(Xtr, ytr, Xte, yte, names)
        out[name] = r
        w = r["worst"]
        print(
            f"{name:<18} {r['cols']:>4} {r['train']:.4f} {r['test']:.4f} {r['refit']:.4f} "
            f"{r['clip']:.4f} {r['spear']:.4f} {r['out']:>4} {r['test_in']:.4f}  "
            f"residual {w['residual_sd']:.1f} sd; {w['column']}: value {w['value']:.4g} "
            f"(train {w['train_range'][0]:.4g}..{w['train_range'][1]:.4g}), "
            f"term {w['term_sd']:.1f} sd",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
