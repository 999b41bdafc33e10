"""RuDi bench: the shape of Tables 3-4 of the paper on VEWS and MOOC, and the scaling run.

    nice -n 10 python -m bench.rudi.tables --dataset vews --dataset mooc
    nice -n 10 python -m bench.rudi.tables --scaling

Per data set: entities are split 80/20 (1000 of the 80% validate the teachers' early stopping).
Teachers (``--teacher``, log-odds scores): GRU, a small numpy GRU on the raw event sequences
(``rudi/gru.py``; the paper's Table 3 teacher); LightGBM and MLP, on the labels over *flat
aggregates* (every Select_F o Agg of eq. 1, as the paper builds LightGBM's input).
``--max-events`` keeps the first events of each entity for every model; ``--sg-seeds`` adds
MCTS-SG runs with other seeds to Table 3.

Table 3 (statistics generation): coefficient of multiple correlation (eq. 5) between the
teacher's scores and K statistics, on the training split (as the paper) and, with the OLS fit
on train, on the test split: Random (K random valid compositions, mean of 3 draws), Lasso and
LightGBM (the K flat aggregates entering the Lasso path first / with the highest LightGBM gain
fitted to the teacher), MCTS-SG. A categorical statistic counts once with all its one-hot
dimensions, for every method.

Table 4 (rule distillation, on MCTS-SG's statistics, test split): fidelity (sec. 4.3) to the
teacher and AUC against the labels for Lasso (about R non-zero weights), Lasso on the
binarised statistics (eq. 10), CART with R leaves, and RuDi's GS-NLN (mean +- std over seeds
of the GS-NLN stage, on one MCTS-SG run).

Scaling: MCTS-SG with the same K, D, B and simulations on N and 10 N entities: the tree search
costs K x D x B x simulations statistic evaluations whatever N (sec. 3.2.5); only the final
evaluation of the K statistics and eq. 7 grow with N.

Long runs: ``--json out.json`` is rewritten after every (data set, teacher) and ``--resume``
skips the pairs already in it; each teacher's scores on all entities are saved beside it
(``out.json.<dataset>.<teacher>.npy``, aligned with the sorted entity ids). Run it with one
BLAS / OpenMP thread (``OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
import tracemalloc
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # small matrices: threads only contend

import numpy as np
import pandas as pd
from tqdm import tqdm

from bench.rudi.data import LOADERS
from online.rules.events import EventTable, infer_schema
from online.rules.gs_nln import GSNLN, Binarizer
from online.rules.mcts_sg import MCTSSG, multiple_corr, random_statistics
from online.rules.metrics import fidelity
from online.rules.operators import Grammar, build_operators
from online.rules.rudi import RuDi


def bar_progress(bar):
    def progress(fraction, message):
        bar.n = round(100 * fraction, 1)
        bar.set_description(message[:60])
        bar.refresh()

    return progress


def flat_aggregates(events, entity_col, order_col, schema):
    """Every depth-2 statistic Select_F o Agg: (entities, X, owner statistic of each column)."""
    table = EventTable.from_events(events, entity_col, schema, order_col)
    g = Grammar(build_operators(schema), 2)
    stats, keys = [], set()
    for i in g.next_ops(()):
        for j in g.next_ops((i,)):
            s = (i, j)
            if g.canonical_key(s) not in keys:
                keys.add(g.canonical_key(s))
                stats.append(s)
    cols, owner = [], []
    for k, s in enumerate(stats):
        X = g.evaluate(s, table)
        cols.append(X)
        owner += [k] * X.shape[1]
    return table, np.hstack(cols), np.array(owner)


def split(entities, seed):
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(entities))
    n_train = int(0.8 * len(entities))
    valid = perm[:1000]
    train = perm[1000:n_train]
    test = perm[n_train:]
    return train, valid, test


def logit(p):
    p = np.clip(p, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def train_gru(table, labels, train, valid, seed, epochs=30):
    """The sequence teacher (numpy GRU, ``rudi/gru.py``) on the raw events of each entity."""
    from bench.rudi.gru import EventEncoder, GRUTeacher, table_sequences

    seqs = table_sequences(table, EventEncoder().fit(table))
    gru = GRUTeacher(hidden=32, epochs=epochs, random_state=seed)
    with tqdm(total=epochs, desc="GRU teacher", leave=False) as bar:

        def progress(epoch, vloss):
            bar.n = epoch
            bar.set_postfix(valid_loss=f"{vloss:.4f}")
            bar.refresh()

        gru.fit(
            [seqs[i] for i in train],
            labels[train].astype(float),
            valid=([seqs[i] for i in valid], labels[valid].astype(float)),
            progress=progress,
        )
    print(
        f"GRU teacher: {gru.n_epochs_} epochs, valid log-loss {min(gru.history_):.4f}", flush=True
    )
    return gru.decision_function(seqs)


def train_teachers(F, labels, train, valid, seed, which=("LightGBM", "MLP"), table=None):
    import lightgbm as lgb
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import QuantileTransformer

    out = {}
    for name in which:
        tic, cpu = time.perf_counter(), time.process_time()
        if name == "GRU":
            out[name] = train_gru(table, labels, train, valid, seed)
        elif name == "LightGBM":
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
                eval_X=(F[valid],),
                eval_y=(labels[valid],),
                callbacks=[lgb.early_stopping(50, verbose=False)],
            )
            out[name] = gbm.predict(F, raw_score=True)
        else:
            mlp = make_pipeline(
                QuantileTransformer(
                    n_quantiles=200, output_distribution="normal", random_state=seed
                ),
                MLPClassifier((64, 32), early_stopping=True, max_iter=300, random_state=seed),
            )
            mlp.fit(F[np.r_[train, valid]], labels[np.r_[train, valid]])
            out[name] = logit(mlp.predict_proba(F)[:, 1])
        print(
            f"teacher {name} trained: {time.perf_counter() - tic:.0f}s wall, "
            f"{time.process_time() - cpu:.0f}s CPU",
            flush=True,
        )
    return out


def select_by_lasso(F, y, owner, K):
    from sklearn.linear_model import lasso_path

    Fs = (F - F.mean(0)) / np.maximum(F.std(0), 1e-12)
    _, coefs, _ = lasso_path(Fs, y - y.mean(), alphas=100)
    active = coefs != 0
    entry = np.where(active.any(1), active.argmax(1), coefs.shape[1])
    chosen = []
    for j in np.argsort(entry, kind="stable"):
        if owner[j] not in chosen:
            chosen.append(owner[j])
        if len(chosen) == K:
            break
    return np.isin(owner, chosen)


def select_by_lightgbm(F, y, owner, K, seed):
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
    return np.isin(owner, np.argsort(-per_stat)[:K])


def mc_train_test(Xtr, ytr, Xte, yte):
    """(train, test, columns, test refit): eq. 5 on train (the paper's measure); the train OLS
    fit correlated with the teacher on test; the number of columns; eq. 5 refitted on the test
    rows (do the chosen statistics hold the teacher's information there, whatever the train
    coefficients?)."""
    A = np.column_stack([np.ones(len(ytr)), Xtr])
    beta, *_ = np.linalg.lstsq(A, ytr, rcond=None)
    fit_te = np.column_stack([np.ones(len(yte)), Xte]) @ beta
    return (
        multiple_corr(Xtr, ytr),
        abs(np.corrcoef(fit_te, yte)[0, 1]),
        Xtr.shape[1],
        multiple_corr(Xte, yte),
    )


def lasso_with_about(X, y, R):
    """Lasso whose number of non-zero weights is the largest <= R on its path."""
    from sklearn.linear_model import Lasso, lasso_path

    mu, sd = X.mean(0), np.maximum(X.std(0), 1e-12)
    Xs = (X - mu) / sd
    alphas, coefs, _ = lasso_path(Xs, y - y.mean(), alphas=100)
    nnz = (coefs != 0).sum(0)
    ok = np.flatnonzero(nnz <= R)
    alpha = alphas[ok[np.argmax(nnz[ok])]]
    model = Lasso(alpha=alpha).fit(Xs, y)
    return lambda Xn: model.predict((Xn - mu) / sd), int((model.coef_ != 0).sum())


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_dataset(name, args, done=None, save=None):
    """Tables 3-4 on one data set. ``done``: an earlier result of this data set (its teachers
    are skipped, ``--resume``); ``save(out)`` is called after every teacher."""
    load, entity_col, order_col = LOADERS[name]
    t0 = time.perf_counter()
    events, labels_s, desc = load(args.n_entities, args.seed)
    schema = infer_schema(events, entity_col, order_col, max_categories=args.max_categories)
    if args.max_events:  # the first max_events events of each entity, for every model
        events = events[events.groupby(entity_col).cumcount().to_numpy() < args.max_events]
        events = events.reset_index(drop=True)
        desc += f", first {args.max_events} events per entity"
    table, F, owner = flat_aggregates(events, entity_col, order_col, schema)
    entities = table.entities
    labels = labels_s.loc[entities].to_numpy()
    train, valid, test = split(entities, args.seed)
    # sorted, so that rows line up with RuDi's outputs (sorted entity ids)
    fit_idx, test = np.sort(np.r_[train, valid]), np.sort(test)  # students see the whole 80%
    print(
        f"\n## {desc}: {len(entities)} entities, {len(events)} events, "
        f"{F.shape[1]} flat aggregates ({owner.max() + 1} statistics); "
        f"load {time.perf_counter() - t0:.0f}s",
        flush=True,
    )
    out = {
        "dataset": desc,
        "n_entities": len(entities),
        "n_events": len(events),
        "teachers": dict((done or {}).get("teachers", {})),
    }
    todo = [t for t in (args.teacher or ("LightGBM", "MLP")) if t not in out["teachers"]]
    if len(todo) < len(args.teacher or ("LightGBM", "MLP")):
        print(f"resume: teachers already done: {sorted(out['teachers'])}", flush=True)
    teachers = train_teachers(F, labels, train, valid, args.seed, todo, table)
    from sklearn.metrics import roc_auc_score

    ent_col = events[entity_col].to_numpy()
    ev_fit = events[np.isin(ent_col, entities[fit_idx])]
    ev_test = events[np.isin(ent_col, entities[test])]
    for tname, y in teachers.items():
        if args.json:
            np.save(f"{args.json}.{name}.{tname}.npy", y)
        res = {"teacher_auc": float(roc_auc_score(labels[test], y[test]))}
        print(f"\n### teacher {tname}: test AUC {res['teacher_auc']:.4f}", flush=True)
        y_fit, y_te = y[fit_idx], y[test]
        with tqdm(total=100, desc=f"RuDi {name}/{tname}", leave=False) as bar:
            tic, cpu = time.perf_counter(), time.process_time()
            model = RuDi(
                K=args.K,
                D=args.D,
                R=args.R,
                B=args.B,
                n_simulations=args.sims,
                epochs=args.epochs,
                max_categories=args.max_categories,
                random_state=args.seed,
            )
            model.fit(
                ev_fit,
                entity_col,
                pd.Series(y_fit, index=entities[fit_idx]),
                labels=pd.Series(labels[fit_idx], index=entities[fit_idx]),
                order_col=order_col,
                progress=bar_progress(bar),
            )
            res["rudi_seconds"] = time.perf_counter() - tic
            res["rudi_cpu_seconds"] = time.process_time() - cpu
            res["search_seconds"] = model.search_seconds_
            res["search_cpu_seconds"] = model.search_cpu_seconds_
        Xtr, Xte = model.transform(ev_fit), model.transform(ev_test)
        # -- Table 3 ---------------------------------------------------------------------
        t3 = {}
        fit_table = EventTable.from_events(ev_fit, entity_col, model.schema_, order_col)
        te_table = EventTable.from_events(ev_test, entity_col, model.schema_, order_col)
        draws = []
        for d in range(3):
            stats = random_statistics(model.grammar_, args.K, random_state=args.seed + d)
            R_tr = np.hstack([model.grammar_.evaluate(s, fit_table) for s in stats])
            R_te = np.hstack([model.grammar_.evaluate(s, te_table) for s in stats])
            draws.append(mc_train_test(R_tr, y_fit, R_te, y_te))
        t3["Random"] = tuple(np.mean(draws, axis=0))
        cols = select_by_lasso(F[fit_idx], y_fit, owner, args.K)
        t3["Lasso"] = mc_train_test(F[fit_idx][:, cols], y_fit, F[test][:, cols], y_te)
        cols = select_by_lightgbm(F[fit_idx], y_fit, owner, args.K, args.seed)
        t3["LightGBM"] = mc_train_test(F[fit_idx][:, cols], y_fit, F[test][:, cols], y_te)
        t3["MCTS-SG"] = mc_train_test(Xtr, y_fit, Xte, y_te)
        sg_runs = [t3["MCTS-SG"]]
        res["sg_extra"] = []
        for s in range(1, args.sg_seeds):  # more MCTS-SG runs (other seeds), same budget
            cpu = time.process_time()
            with tqdm(total=100, desc=f"MCTS-SG seed {args.seed + s}", leave=False) as bar:
                sg = MCTSSG(args.K, args.D, args.B, args.sims, random_state=args.seed + s).fit(
                    fit_table, y_fit, model.grammar_, progress=bar_progress(bar)
                )
            S_te = np.hstack([model.grammar_.evaluate(c, te_table) for c in sg.statistics_])
            sg_runs.append(mc_train_test(np.hstack(sg.values_), y_fit, S_te, y_te))
            res["sg_extra"].append(
                {
                    "seed": args.seed + s,
                    "table3": sg_runs[-1],
                    "search_cpu_seconds": time.process_time() - cpu,
                    "statistics": [model.grammar_.label(c) for c in sg.statistics_],
                    "compositions": [
                        [model.grammar_.operators[i].name for i in c] for c in sg.statistics_
                    ],
                }
            )
        if len(sg_runs) > 1:
            t3[f"MCTS-SG (mean of {len(sg_runs)} seeds)"] = tuple(np.mean(sg_runs, axis=0))
            res["sg_std"] = tuple(np.std(sg_runs, axis=0))
        t3["All flat aggregates"] = mc_train_test(F[fit_idx], y_fit, F[test], y_te)
        res["table3"] = t3
        res["statistics"] = [(s["name"], s["correlation"]) for s in model.statistics_]
        res["compositions"] = [st["operators"] for st in model.statistics_]
        # -- Table 4 ---------------------------------------------------------------------
        t4 = {}
        from sklearn.tree import DecisionTreeRegressor

        pred, nnz = lasso_with_about(Xtr, y_fit, args.R)
        p = pred(Xte)
        t4["Lasso"] = (fidelity(y_te, p), roc_auc_score(labels[test], p), nnz)
        binz = Binarizer().fit(Xtr)
        Ztr, Zte = binz.transform(Xtr), binz.transform(Xte)
        pred, nnz = lasso_with_about(Ztr, y_fit, args.R)
        p = pred(Zte)
        t4["Lasso (binary)"] = (fidelity(y_te, p), roc_auc_score(labels[test], p), nnz)
        cart = DecisionTreeRegressor(max_leaf_nodes=args.R, random_state=args.seed)
        p = cart.fit(Xtr, y_fit).predict(Xte)
        t4["CART"] = (fidelity(y_te, p), roc_auc_score(labels[test], p), args.R)
        runs = [
            model.score(
                ev_test,
                pd.Series(y_te, index=entities[test]),
                pd.Series(labels[test], index=entities[test]),
            )
        ]
        res["gsnln_extra_cpu_seconds"] = []
        for s in range(1, args.seeds):
            cpu = time.process_time()
            with tqdm(total=100, desc=f"GS-NLN seed {args.seed + s}", leave=False) as bar:
                net = GSNLN(args.R, 20, 2, args.epochs, random_state=args.seed + s).fit(
                    Ztr, y_fit, progress=bar_progress(bar)
                )
            res["gsnln_extra_cpu_seconds"].append(time.process_time() - cpu)
            p = net.predict(Zte)
            runs.append({"fidelity": fidelity(y_te, p), "auc": roc_auc_score(labels[test], p)})
        res["rudi_runs"] = runs
        fid = [r["fidelity"] for r in runs]
        auc = [r["auc"] for r in runs]
        t4["RuDi"] = (
            float(np.mean(fid)),
            float(np.mean(auc)),
            args.R,
            float(np.std(fid)),
            float(np.std(auc)),
        )
        res["table4"] = t4
        res["rules"] = model.rules_
        res["max_literals"] = max(r["n_literals"] for r in model.rules_)
        res["peak_rss_mb"] = peak_rss_mb()
        out["teachers"][tname] = res
        print_teacher(res)
        if save is not None:
            save(out)
    return out


def print_teacher(res):
    print("\nTable 3 (multiple correlation with the teacher; train / test / test refit):")
    for k, (a, b, ncol, *refit) in res["table3"].items():
        extra = f" / {refit[0]:.4f}" if refit else ""
        print(f"  {k:<30} {a:.4f} / {b:.4f}{extra}   ({ncol:.0f} columns)")
    if "sg_std" in res:
        print(f"  MCTS-SG std over seeds: {res['sg_std'][0]:.4f} / {res['sg_std'][1]:.4f}")
    for extra in res.get("sg_extra", []):
        print(
            f"  MCTS-SG seed {extra['seed']}: {extra['table3'][0]:.4f} / "
            f"{extra['table3'][1]:.4f} ({extra['search_cpu_seconds']:.0f}s CPU)"
        )
    print("Table 4 (test split):  fidelity   AUC")
    for k, v in res["table4"].items():
        extra = f" +- {v[3]:.4f} / {v[4]:.4f}" if len(v) > 3 else ""
        print(f"  {k:<16} {v[0]:.4f}   {v[1]:.4f}   (size {v[2]}){extra}")
    if res.get("gsnln_extra_cpu_seconds"):
        print("GS-NLN extra seeds CPU s:", [round(c) for c in res["gsnln_extra_cpu_seconds"]])
    print(f"peak RSS so far {res.get('peak_rss_mb', 0):.0f} MB")
    print(
        f"RuDi fit {res['rudi_seconds']:.0f}s wall, {res['rudi_cpu_seconds']:.0f}s CPU "
        f"(tree search {res['search_seconds']:.0f}s wall, "
        f"{res['search_cpu_seconds']:.0f}s CPU); "
        f"max literals per rule {res['max_literals']}"
    )
    print("Statistics (correlation with the teacher):")
    for n, c in res["statistics"]:
        print(f"  {c:.3f}  {n}")
    print("Rules:")
    for r in res["rules"]:
        print(f"  {r['rule']}    weight {r['weight']:+.2f}    support {r['support']:.2f}")


def run_scaling(args):
    """Same search budget on N and 10 N entities, runs interleaved (N, 10N, N, 10N, ...) so that
    the load of the shared machine hits both alike; the best of the repeats is reported. The
    timed runs are not traced; one more run per size under ``tracemalloc`` gives the peak
    memory (tracing slows allocation-heavy code, so its times are not used)."""
    load, entity_col, order_col = LOADERS[args.scaling_dataset]
    setups = []
    for n in (args.scaling_n, 10 * args.scaling_n):
        events, labels_s, desc = load(n, args.seed)
        schema = infer_schema(events, entity_col, order_col, max_categories=args.max_categories)
        table = EventTable.from_events(events, entity_col, schema, order_col)
        y = labels_s.loc[table.entities].to_numpy().astype(float)
        setups.append((table, y, Grammar(build_operators(schema), args.D), len(events)))

    def one(table, y, grammar, traced):
        if traced:
            tracemalloc.start()
        tic, cpu = time.perf_counter(), time.process_time()
        sg = MCTSSG(args.scaling_K, args.D, args.B, args.sims, random_state=args.seed)
        with tqdm(total=100, desc=f"MCTS-SG N={table.n_entities}", leave=False) as bar:
            sg.fit(table, y, grammar, progress=bar_progress(bar))
        out = {"total_s": time.perf_counter() - tic, "total_cpu_s": time.process_time() - cpu}
        if traced:
            out["peak_MB"] = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
        return sg, out

    runs = {0: [], 1: []}
    for _rep in range(args.scaling_repeats):
        for which, (table, y, grammar, n_events) in enumerate(setups):
            sg, r = one(table, y, grammar, traced=False)
            r.update(
                {
                    "n_entities": int(table.n_entities),
                    "n_events": int(n_events),
                    "search_s": sg.search_seconds_,
                    "search_cpu_s": sg.search_cpu_seconds_,
                    "evaluate_s": sg.evaluation_seconds_,
                    "n_rewards": sg.n_rewards_,
                    "reward_entities": sg.reward_entities_,
                    "reward_events": sg.reward_events_,
                    "table_MB": sum(c.nbytes for c in table.columns.values()) / 2**20,
                    "statistics": [grammar.label(s) for s in sg.statistics_],
                }
            )
            runs[which].append(r)
    rows = [dict(min(runs[w], key=lambda r: r["search_cpu_s"])) for w in (0, 1)]
    for w, (table, y, grammar, _) in enumerate(setups):
        rows[w]["peak_MB"] = one(table, y, grammar, traced=True)[1]["peak_MB"]
    print(
        f"\n## Scaling on {desc}: K={args.scaling_K}, D={args.D}, B={args.B}, "
        f"simulations={args.sims}, best of {args.scaling_repeats} interleaved runs (by CPU)"
    )
    print(
        "  entities    events  search s (CPU s)  evaluate s  total s (CPU s)  rewards  "
        "reward entities  reward events  peak MB (table MB)"
    )
    for r in rows:
        print(
            f"  {r['n_entities']:>8} {r['n_events']:>9} {r['search_s']:>8.1f} "
            f"({r['search_cpu_s']:>5.1f}) {r['evaluate_s']:>10.2f} {r['total_s']:>8.1f} "
            f"({r['total_cpu_s']:>5.1f}) {r['n_rewards']:>8} {r['reward_entities']:>16} "
            f"{r['reward_events']:>14} {r['peak_MB']:>8.0f} ({r['table_MB']:.0f})"
        )
    print(
        f"  search CPU ratio 10N / N: {rows[1]['search_cpu_s'] / rows[0]['search_cpu_s']:.2f}"
        f"; K x D x B x simulations = "
        f"{args.scaling_K * args.D * args.B * args.sims}"
    )
    per = [1e3 * r["search_cpu_s"] / max(r["n_rewards"], 1) for r in rows]
    print(f"  search CPU per simulation: {per[0]:.2f} ms (N), {per[1]:.2f} ms (10 N)")
    print(
        "  all runs (search CPU s):",
        {runs[w][0]["n_entities"]: [round(r["search_cpu_s"], 1) for r in runs[w]] for w in (0, 1)},
    )
    print("  statistics found (N, 10N):", rows[0]["statistics"], rows[1]["statistics"])
    return {"best": rows, "runs": runs}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dataset", action="append", choices=sorted(LOADERS))
    ap.add_argument("--n-entities", type=int, default=None, help="subsample (default: all)")
    ap.add_argument(
        "--teacher",
        action="append",
        choices=["GRU", "LightGBM", "MLP"],
        help="teachers to distil (default: LightGBM and MLP)",
    )
    ap.add_argument(
        "--max-events",
        type=int,
        default=None,
        help="keep the first events of each entity (every model sees the same)",
    )
    ap.add_argument(
        "--sg-seeds", type=int, default=1, help="MCTS-SG runs (seeds) for the +- of Table 3"
    )
    ap.add_argument("--K", type=int, default=20)
    ap.add_argument("--D", type=int, default=4)
    ap.add_argument("--R", type=int, default=20)
    ap.add_argument("--B", type=int, default=128)
    ap.add_argument("--sims", type=int, default=500)
    ap.add_argument("--epochs", type=int, default=500)
    ap.add_argument("--seeds", type=int, default=3, help="GS-NLN seeds for the +- of RuDi")
    ap.add_argument("--max-categories", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scaling", action="store_true")
    ap.add_argument("--scaling-dataset", default="mooc", choices=sorted(LOADERS))
    ap.add_argument("--scaling-n", type=int, default=5000)
    ap.add_argument("--scaling-K", type=int, default=5)
    ap.add_argument("--scaling-repeats", type=int, default=2)
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument(
        "--resume",
        action="store_true",
        help="keep the (data set, teacher) results already in --json, run the rest",
    )
    args = ap.parse_args(argv)
    print("args:", vars(args), flush=True)
    results = {}
    if args.resume and args.json and Path(args.json).exists():
        results = json.loads(Path(args.json).read_text())

    def save():
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1, default=float))

    for name in args.dataset or []:

        def save_dataset(out, name=name):
            results[name] = out
            save()

        results[name] = run_dataset(name, args, results.get(name), save_dataset)
    if args.scaling:
        results["scaling"] = run_scaling(args)
    save()


if __name__ == "__main__":
    main()
