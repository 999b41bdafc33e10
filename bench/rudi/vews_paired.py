"""RuDi Table 3 on VEWS, settled: several splits, several MCTS-SG seeds, paired comparisons.

    nice -n 10 python -m bench.rudi.vews_paired --splits 5 --sg-seeds 3 --json out.json
    python -m bench.rudi.vews_paired --summarise out.json

Per split seed s (80/20 by entity, 1000 of the 80% validate the teacher's early stopping, as
sec. 4.1 and ``rudi/tables.py``) the teacher is retrained (GRU on the raw edits; LightGBM on the
flat aggregates), and every method sees the same thing: the teacher's score and the statistics'
values on the fitting 80% ("train") only. The held-out 20% ("test") is used only to score.

Methods (each gives K = 20 *statistics*; a categorical statistic brings all its one-hot
dimensions, for every method):

- Random: K random valid compositions (eq. 3 from the empty composition), mean of 3 draws.
- Lasso(teacher) / Lasso(label): the K flat aggregates (Select_F o Agg, eq. 1) entering the
  Lasso path first, fitted to the teacher's score / to the 0-1 label on train.
- LightGBM(teacher) / LightGBM(label): the K flat aggregates of highest total gain of a
  LightGBM regressor fitted to the teacher's score / to the label on train.
- MCTS-SG (``--sg-seeds`` seeds, the paper's defaults K = 20, D = 4, B = 128, 500
  simulations): reward batches are drawn from the train rows, eq. 7 is solved on the train rows.
- All flat aggregates (not a K-subset): the headroom of depth-2 statistics; and all flat
  aggregates plus MCTS-SG seed 0's statistics (what deeper statistics add to all flat ones).

Scores, for every method alike:
- train: eq. 5 on the train rows (the paper's measure; in-sample for every method);
- train_adj: the same with the adjusted R^2 for the number of columns p (R_adj^2 = 1 - (1 -
  R^2)(n - 1)/(n - p - 1)), since the methods bring different numbers of columns;
- test: the OLS fit on train applied to the test rows, |corr| with the teacher there;
- test_refit: eq. 5 refitted on the test rows (the statistics were chosen on train only; this
  separates "the chosen statistics hold the teacher's information" from "the train OLS
  transfers").
Also the curve of train / test versus the number k of statistics (Lasso's order of entry,
MCTS-SG's order of generation) and each MCTS-SG run's search CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from tqdm import tqdm

from bench.rudi.data import LOADERS
from bench.rudi.tables import bar_progress, split
from online.rules.events import EventTable, infer_schema
from online.rules.mcts_sg import MCTSSG, multiple_corr, random_statistics
from online.rules.operators import Grammar, build_operators


def flat_stats(grammar2: Grammar) -> list[tuple]:
    """Every depth-2 statistic Select_F o Agg (the flat aggregates of eq. 1), deduplicated."""
    stats, keys = [], set()
    for i in grammar2.next_ops(()):
        for j in grammar2.next_ops((i,)):
            s = (i, j)
            if grammar2.canonical_key(s) not in keys:
                keys.add(grammar2.canonical_key(s))
                stats.append(s)
    return stats


def lasso_order(F, y, owner):
    """Statistics (owners) in the order their first column enters the Lasso path."""
    from sklearn.linear_model import lasso_path

    Fs = (F - F.mean(0)) / np.maximum(F.std(0), 1e-12)
    _, coefs, _ = lasso_path(Fs, y - y.mean(), alphas=100)
    active = coefs != 0
    entry = np.where(active.any(1), active.argmax(1), coefs.shape[1])
    order = []
    for j in np.argsort(entry, kind="stable"):
        if owner[j] not in order:
            order.append(int(owner[j]))
    return order


def lightgbm_order(F, y, owner, seed):
    import lightgbm as lgb

    reg = lgb.LGBMRegressor(
        n_estimators=300,
        learning_rate=0.05,
        random_state=seed,
        importance_type="gain",
        n_jobs=1,
        verbose=-1,
    ).fit(F, y)
    per_stat = np.bincount(owner, weights=reg.feature_importances_, minlength=owner.max() + 1)
    return [int(k) for k in np.argsort(-per_stat, kind="stable")]


def scores(Xtr, ytr, Xte, yte):
    """train, train_adj, test, test_refit, columns (see the module docstring)."""
    n, p = Xtr.shape
    A = np.column_stack([np.ones(n), Xtr])
    beta, *_ = np.linalg.lstsq(A, ytr, rcond=None)
    r = abs(np.corrcoef(A @ beta, ytr)[0, 1])
    adj = np.sqrt(max(0.0, 1 - (1 - r * r) * (n - 1) / (n - p - 1)))
    te = abs(np.corrcoef(np.column_stack([np.ones(len(yte)), Xte]) @ beta, yte)[0, 1])
    return {
        "train": float(r),
        "train_adj": float(adj),
        "test": float(te),
        "test_refit": float(multiple_corr(Xte, yte)),
        "cols": int(p),
    }


def curve(blocks_tr, blocks_te, ytr, yte):
    """train / test multiple correlation of the first k statistics, k = 1..K."""
    out = []
    for k in range(1, len(blocks_tr) + 1):
        s = scores(np.hstack(blocks_tr[:k]), ytr, np.hstack(blocks_te[:k]), yte)
        out.append((s["train"], s["test"]))
    return out


def teacher_scores(name, table, F, labels, train, valid, seed):
    tic, cpu = time.perf_counter(), time.process_time()
    if name == "GRU":
        from bench.rudi.gru import EventEncoder, GRUTeacher, table_sequences

        seqs = table_sequences(table, EventEncoder().fit(table))
        gru = GRUTeacher(hidden=32, epochs=30, random_state=seed)
        gru.fit(
            [seqs[i] for i in train],
            labels[train].astype(float),
            valid=([seqs[i] for i in valid], labels[valid].astype(float)),
        )
        y = gru.decision_function(seqs)
    else:
        import lightgbm as lgb

        gbm = lgb.LGBMClassifier(
            n_estimators=2000,
            learning_rate=0.05,
            num_leaves=31,
            random_state=seed,
            n_jobs=1,
            verbose=-1,
        )
        gbm.fit(
            F[train],
            labels[train],
            eval_set=[(F[valid], labels[valid])],
            callbacks=[lgb.early_stopping(50, verbose=False)],
        )
        y = gbm.predict(F, raw_score=True)
    print(
        f"teacher {name} (split {seed}): {time.perf_counter() - tic:.0f}s wall, "
        f"{time.process_time() - cpu:.0f}s CPU",
        flush=True,
    )
    return y


def run(args):
    load, entity_col, order_col = LOADERS[args.dataset]
    events, labels_s, desc = load(args.n_entities, 0)
    if args.max_events:
        events = events[events.groupby(entity_col).cumcount().to_numpy() < args.max_events]
        events = events.reset_index(drop=True)
    schema = infer_schema(events, entity_col, order_col, max_categories=args.max_categories)
    table = EventTable.from_events(events, entity_col, schema, order_col)
    grammar = Grammar(build_operators(schema), args.D)
    g2 = Grammar(build_operators(schema), 2)
    fstats = flat_stats(g2)
    blocks = [g2.evaluate(s, table) for s in fstats]
    F = np.hstack(blocks)
    owner = np.concatenate([[k] * b.shape[1] for k, b in enumerate(blocks)])
    entities = table.entities
    labels = labels_s.loc[entities].to_numpy()
    ent_col = events[entity_col].to_numpy()
    print(
        f"{desc}: {len(entities)} entities, {len(events)} events, {F.shape[1]} flat columns "
        f"({len(fstats)} statistics)",
        flush=True,
    )
    from sklearn.metrics import roc_auc_score

    out = {
        "args": vars(args),
        "n_entities": int(len(entities)),
        "n_events": int(len(events)),
        "flat_labels": [g2.label(s) for s in fstats],
        "splits": [],
    }
    for s in range(args.split0, args.split0 + args.splits):
        train, valid, test = split(entities, s)
        fit_idx, test = np.sort(np.r_[train, valid]), np.sort(test)
        fit_table = EventTable.from_events(
            events[np.isin(ent_col, entities[fit_idx])], entity_col, schema, order_col
        )
        assert np.array_equal(fit_table.entities, entities[fit_idx])
        rec = {"split": s, "teachers": {}}
        for tname in args.teacher:
            y = teacher_scores(tname, table, F, labels, train, valid, s)
            ytr, yte = y[fit_idx], y[test]
            res = {"teacher_auc": float(roc_auc_score(labels[test], yte)), "methods": {}}
            M = res["methods"]

            np.save(f"{args.json or 'rudi_paired'}.split{s}.{tname}.npy", y)
            orders = {}

            def flat(
                order,
                key,
                n=args.K,
                M=M,
                orders=orders,
                fit_idx=fit_idx,
                test=test,
                ytr=ytr,
                yte=yte,
            ):
                orders[key] = order
                chosen = order[:n]
                cols = np.isin(owner, chosen)
                M[key] = scores(F[fit_idx][:, cols], ytr, F[test][:, cols], yte)
                M[key]["statistics"] = [g2.label(fstats[k]) for k in chosen]
                M[key]["curve"] = curve(
                    [blocks[k][fit_idx] for k in chosen],
                    [blocks[k][test] for k in chosen],
                    ytr,
                    yte,
                )

            flat(lasso_order(F[fit_idx], ytr, owner), "Lasso(teacher)")
            flat(lasso_order(F[fit_idx], labels[fit_idx].astype(float), owner), "Lasso(label)")
            flat(lightgbm_order(F[fit_idx], ytr, owner, s), "LightGBM(teacher)")
            flat(
                lightgbm_order(F[fit_idx], labels[fit_idx].astype(float), owner, s),
                "LightGBM(label)",
            )
            draws = []
            for d in range(3):
                st = random_statistics(grammar, args.K, random_state=1000 * s + d)
                X = np.hstack([grammar.evaluate(c, table) for c in st])
                draws.append(scores(X[fit_idx], ytr, X[test], yte))
            M["Random"] = {k: float(np.mean([d[k] for d in draws])) for k in draws[0]}
            M["All flat"] = scores(F[fit_idx], ytr, F[test], yte)
            single = sorted(
                (
                    (multiple_corr(b[fit_idx], ytr), g2.label(fstats[k]))
                    for k, b in enumerate(blocks)
                ),
                reverse=True,
            )[:5]
            res["best_single_flat"] = single
            res["orders"] = orders
            res["sg"] = []
            for m in range(args.sg_seeds):
                with tqdm(
                    total=100,
                    desc=f"split {s} {tname} MCTS-SG seed {m}",
                    leave=False,
                    mininterval=5,
                ) as bar:
                    sg = MCTSSG(args.K, args.D, args.B, args.sims, random_state=10_000 * s + m).fit(
                        fit_table, ytr, grammar, progress=bar_progress(bar)
                    )
                Ste = [grammar.evaluate(c, table)[test] for c in sg.statistics_]
                r = scores(np.hstack(sg.values_), ytr, np.hstack(Ste), yte)
                r.update(
                    seed=m,
                    search_cpu_seconds=sg.search_cpu_seconds_,
                    search_seconds=sg.search_seconds_,
                    statistics=[grammar.label(c) for c in sg.statistics_],
                    curve=curve(sg.values_, Ste, ytr, yte),
                )
                r["compositions"] = [list(map(int, c)) for c in sg.statistics_]
                if m == 0:
                    # the Lasso order, as many statistics as it takes to reach MCTS-SG's columns
                    csum = np.cumsum([blocks[k].shape[1] for k in orders["Lasso(teacher)"]])
                    n = int(min(np.searchsorted(csum, r["cols"]) + 1, len(csum)))
                    flat(orders["Lasso(teacher)"], "Lasso(teacher), MCTS-SG's columns", n)
                    M["All flat + MCTS-SG"] = scores(
                        np.hstack([F[fit_idx]] + sg.values_), ytr, np.hstack([F[test]] + Ste), yte
                    )
                res["sg"].append(r)
                print(
                    f"  split {s} {tname} MCTS-SG seed {m}: train {r['train']:.4f} "
                    f"test {r['test']:.4f} refit {r['test_refit']:.4f} cols {r['cols']} "
                    f"search {r['search_cpu_seconds']:.0f}s CPU",
                    flush=True,
                )
            for k, v in M.items():
                print(
                    f"  split {s} {tname} {k:<20} train {v['train']:.4f} "
                    f"adj {v['train_adj']:.4f} test {v['test']:.4f} "
                    f"refit {v['test_refit']:.4f} cols {v['cols']}",
                    flush=True,
                )
            rec["teachers"][tname] = res
        out["splits"].append(rec)
        if args.json:  # after every split, so that a bounded run keeps what it finished
            Path(args.json).write_text(json.dumps(out, indent=1, default=float))
    return out


def load_results(paths):
    """One or more --json files of this script (e.g. splits 0-4 and 5-9), splits merged."""
    outs = [json.loads(Path(p).read_text()) for p in paths]
    out = outs[0]
    for o in outs[1:]:
        out["splits"] += o["splits"]
    return out


def summarise(paths):
    """Per-split values and paired differences MCTS-SG - flat baseline (mean over MCTS-SG
    seeds within a split, then over splits; t = mean / (sd / sqrt(splits)))."""
    from scipy import stats as st

    out = load_results(paths)
    teachers = list(out["splits"][0]["teachers"]) if out["splits"] else []
    for tname in teachers:
        recs = [r["teachers"][tname] for r in out["splits"] if tname in r["teachers"]]
        print(
            f"\n### VEWS, {tname} teacher: {len(recs)} splits x "
            f"{len(recs[0]['sg'])} MCTS-SG seeds ({out['n_entities']} users)"
        )
        print("teacher test AUC per split:", " ".join(f"{r['teacher_auc']:.4f}" for r in recs))
        names = list(recs[0]["methods"])
        for measure in ("train", "train_adj", "test", "test_refit"):
            print(f"\n{measure}: per split (MCTS-SG: each seed)")
            for nm in names:
                vals = [r["methods"][nm][measure] for r in recs]
                print(
                    f"  {nm:<20} "
                    + " ".join(f"{v:.4f}" for v in vals)
                    + f"   mean {np.mean(vals):.4f}"
                )
            sgv = [[x[measure] for x in r["sg"]] for r in recs]
            print(
                f"  {'MCTS-SG':<20} "
                + " | ".join(" ".join(f"{v:.4f}" for v in row) for row in sgv)
                + f"   mean {np.mean([np.mean(r) for r in sgv]):.4f}"
            )
            for nm in (
                "Lasso(teacher)",
                "Lasso(label)",
                "LightGBM(teacher)",
                "LightGBM(label)",
                "All flat",
            ):
                d = np.array(
                    [np.mean(row) - r["methods"][nm][measure] for row, r in zip(sgv, recs)]
                )
                d_all = [x - r["methods"][nm][measure] for row, r in zip(sgv, recs) for x in row]
                t = (d.mean() / (d.std(ddof=1) / np.sqrt(len(d)))) if len(d) > 1 else np.nan
                p = 2 * st.t.sf(abs(t), len(d) - 1) if len(d) > 1 else np.nan
                print(
                    f"    MCTS-SG - {nm:<18} mean {d.mean():+.4f} "
                    f"sd {d.std(ddof=1) if len(d) > 1 else 0:.4f}"
                    f"  t {t:+.2f} (p {p:.3f}, {len(d)} splits)  runs above: "
                    f"{sum(x > 0 for x in d_all)}/{len(d_all)}"
                )
        cols = {nm: np.mean([r["methods"][nm]["cols"] for r in recs]) for nm in names}
        cols["MCTS-SG"] = np.mean([x["cols"] for r in recs for x in r["sg"]])
        print("\ncolumns:", {k: round(float(v)) for k, v in cols.items()})
        print(
            "search CPU s per MCTS-SG run:",
            [round(x["search_cpu_seconds"]) for r in recs for x in r["sg"]],
        )
        print(
            "best single flat statistics (train multiple corr.), split 0:",
            [(round(c, 3), n) for c, n in recs[0]["best_single_flat"][:3]],
        )


def plot(paths, png):
    """Test multiple correlation vs the number k of statistics, per teacher: Lasso(teacher)'s
    order of entry and each MCTS-SG run (all splits, thin lines), means bold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = load_results(paths)
    teachers = list(out["splits"][0]["teachers"])
    fig, axes = plt.subplots(1, len(teachers), figsize=(6 * len(teachers), 4.2), squeeze=False)
    for ax, tname in zip(axes[0], teachers):
        recs = [r["teachers"][tname] for r in out["splits"] if tname in r["teachers"]]
        for key, colour in (("Lasso(teacher)", "tab:blue"), ("LightGBM(teacher)", "tab:green")):
            cs = np.array([r["methods"][key]["curve"] for r in recs])[:, :, 1]
            for c in cs:
                ax.plot(range(1, len(c) + 1), c, color=colour, lw=0.5, alpha=0.5)
            ax.plot(range(1, cs.shape[1] + 1), cs.mean(0), color=colour, lw=2, label=key)
        cs = np.array([x["curve"] for r in recs for x in r["sg"]])[:, :, 1]
        for c in cs:
            ax.plot(range(1, len(c) + 1), c, color="tab:red", lw=0.5, alpha=0.5)
        ax.plot(range(1, cs.shape[1] + 1), cs.mean(0), color="tab:red", lw=2, label="MCTS-SG")
        allf = np.mean([r["methods"]["All flat"]["test"] for r in recs])
        ax.axhline(allf, color="k", ls="--", lw=1, label=f"all 71 flat aggregates ({allf:.4f})")
        ax.set_ylim(max(0.85, cs[:, 0].min() - 0.01), 1.0)
        ax.set_xlabel("number of statistics k")
        ax.set_ylabel("multiple correlation with the teacher (test)")
        ax.set_title(f"VEWS, {tname} teacher: {len(recs)} splits, {out['n_entities']} users")
        ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    print("wrote", png)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", default="vews", choices=sorted(LOADERS))
    ap.add_argument("--n-entities", type=int, default=None, help="subsample (default: all)")
    ap.add_argument("--max-events", type=int, default=100)
    ap.add_argument("--teacher", action="append", choices=["GRU", "LightGBM"])
    ap.add_argument("--splits", type=int, default=5)
    ap.add_argument("--split0", type=int, default=0)
    ap.add_argument("--sg-seeds", type=int, default=3)
    ap.add_argument("--K", type=int, default=20)
    ap.add_argument("--D", type=int, default=4)
    ap.add_argument("--B", type=int, default=128)
    ap.add_argument("--sims", type=int, default=500)
    ap.add_argument("--max-categories", type=int, default=10)
    ap.add_argument("--json", default=None)
    ap.add_argument(
        "--summarise",
        nargs="+",
        default=None,
        help="print the tables of --json files (their splits merged)",
    )
    ap.add_argument("--plot", default=None, help="with --summarise: write this PNG")
    args = ap.parse_args(argv)
    if args.summarise:
        summarise(args.summarise)
        if args.plot:
            plot(args.summarise, args.plot)
        return
    args.teacher = args.teacher or ["GRU", "LightGBM"]
    print("args:", vars(args), flush=True)
    run(args)
    if args.json:
        summarise([args.json])


if __name__ == "__main__":
    main()
