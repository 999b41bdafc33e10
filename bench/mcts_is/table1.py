"""Table 1 of the MCTS-IS paper on the categorical data sets of ../shared/data (issue 6).

For each data set and seed: 8:1:1 split; fit LightGBM (N_T = number of fields trees, grid over
max leaves as in Appendix B.3) and MCTS-IS (N_T FDTs, ``--iters`` iterations on rows sampled with
replacement from the training part -- the paper samples 1M records -- grid over (c_F, lambda))
on the training part; then a logistic regression on (a) the raw one-hot fields, (b) + the
LightGBM leaf one-hots, (c) + the MCTS-IS leaf one-hots, over a grid of L2 penalties.

Every (model setting, LR penalty) pair is written to ``--out`` (JSON lines) with its validation
and test AUC and log loss; the summary then picks, per data set, seed and method, the pair with
the best validation AUC as sec. 5 does (ties: validation log loss), and also, as a second view,
the pair with the best validation log loss.

    nice -n 10 python -m bench.mcts_is.table1 --seeds 5 --full-grid

The LR: the paper trains it with SGD with momentum (20 epochs, learning rate 0.1 halved every 5)
and an L2 penalty in {1e-5, 1e-6, 1e-7, 1e-8} on the mean loss (B.3), i.e. nearly no
regularization: in scikit-learn's terms C = 1 / (2 penalty n_train) >= 1.3 on these data sets.
We fit it to convergence with liblinear and search C over ``LR_C`` (0.01 .. 100), which holds
both that weak end and the stronger penalties that small data sets with thousands of leaf
features need.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time

import numpy as np
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss, roc_auc_score
from sklearn.preprocessing import OneHotEncoder
from tqdm import tqdm

from bench.common.paths import ROOT
from bench.mcts_is.data import NAMES, load, split
from online import MCTSInteractions

LGBM_LEAVES = (100, 500, 1000, 2000)  # Appendix B.3
C_F = (0.05, 0.005, 0.0005)  # Appendix B.3
LAMBDA = (5e-3, 5e-4, 5e-5)
# reduced grid: the screen keeps a node roughly when P(S) > (lambda / c_F)^2, so these three
# span strong (1%), weak (0.01%) and "positive mass only" (mu P > lambda) screening
SMALL_GRID = ((0.05, 5e-3), (0.05, 5e-4), (0.005, 5e-3))
LR_C = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 100.0)
METHODS = ("LR", "LR+LightGBM", "LR+MCTS-IS")


def onehot(train, *others):
    enc = OneHotEncoder(handle_unknown="ignore").fit(train)
    return [enc.transform(a) for a in (train, *others)]


def _next_c(C, up):
    """The next C beyond an edge of the grid, on the 1, 3, 10, 30 ... ladder of ``LR_C``."""
    lead = float(f"{C:.0e}"[0])
    step = (3.0 if lead == 1 else 10 / 3) if up else (0.3 if lead == 1 else 1 / 3)
    return float(f"{C * step:.0e}")


def lr_grid(blocks, y, parts, extend=0):
    """LR for every C on hstack(blocks): [(C, val AUC, val log loss, test AUC, test log loss)].

    With ``extend`` > 0 the grid grows past an edge (up to ``extend`` more values on each side)
    while the C chosen by validation AUC or by validation log loss sits on that edge.
    """
    out = [_lr_fit(blocks, y, parts, C) for C in LR_C]
    for _ in range(extend):
        cs = [g[0] for g in out]
        chosen = {
            max(out, key=lambda g: (g[1], -g[2]))[0],
            min(out, key=lambda g: (g[2], -g[1]))[0],
        }
        grown = False
        if min(cs) in chosen:
            out.append(_lr_fit(blocks, y, parts, _next_c(min(cs), up=False)))
            grown = True
        if max(cs) in chosen:
            out.append(_lr_fit(blocks, y, parts, _next_c(max(cs), up=True)))
            grown = True
        if not grown:
            break
    return sorted(out)


def _lr_fit(blocks, y, parts, C):
    tr, va, te = parts
    lr = LogisticRegression(C=C, max_iter=5000, solver="liblinear")
    lr.fit(blocks[0], y[tr])
    p_va = np.clip(lr.predict_proba(blocks[1])[:, 1], 1e-7, 1 - 1e-7)
    p_te = np.clip(lr.predict_proba(blocks[2])[:, 1], 1e-7, 1 - 1e-7)
    return (
        C,
        roc_auc_score(y[va], p_va),
        log_loss(y[va], p_va),
        roc_auc_score(y[te], p_te),
        log_loss(y[te], p_te),
    )


def lightgbm_leaves(Xc, y, tr, n_trees, leaves, seed):
    import lightgbm as lgb

    model = lgb.LGBMClassifier(
        n_estimators=n_trees,
        num_leaves=leaves,
        num_threads=1,
        verbose=-1,
        random_state=seed,
        max_cat_to_onehot=64,
    )
    model.fit(Xc[tr], y[tr], categorical_feature=list(range(Xc.shape[1])))
    return model.predict(Xc, pred_leaf=True).reshape(len(Xc), -1)


def mcts_leaves(X, y, tr, iters, batch, seed, **params):
    rng = np.random.default_rng(seed)
    idx = tr[rng.integers(0, len(tr), iters)]
    model = MCTSInteractions(seed=seed, **params)
    t0 = time.process_time()
    for start in range(0, iters, batch):
        rows = idx[start : start + batch]
        model.learn_many(X.iloc[rows], y[rows])
    fit_cpu = time.process_time() - t0
    return model.leaves_many(X), fit_cpu, model


def n_features(L, tr):
    return int(sum(len(np.unique(L[tr][:, k])) for k in range(L.shape[1])))


def unit_key(rec):
    """What one fit (a method at one setting, its whole C grid) is known by in ``--out``."""
    return (
        rec["data"],
        rec["seed"],
        rec["method"],
        rec.get("leaves"),
        rec.get("c_f"),
        rec.get("lambda_"),
        rec.get("iters"),
        rec.get("max_nodes"),
        rec.get("grace_period"),
    )


def done_units(path):
    """Units already in ``path`` (``--resume``): a run stopped mid-way starts where it stopped."""
    if not os.path.exists(path):
        return set()
    with open(path) as fh:
        return {unit_key(json.loads(line)) for line in fh if line.strip()}


def git_commit():
    """The commit the run's code comes from: ``GROVE_BENCH_COMMIT`` (a run from an exported
    snapshot), else ``git rev-parse --short HEAD``, with "+dirty" when ``online/`` differs from
    it in the working tree (then the figures are not those of any commit)."""
    if os.environ.get("GROVE_BENCH_COMMIT"):
        return os.environ["GROVE_BENCH_COMMIT"]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "online"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty.strip() else "")


def run(name, seed, args, out, done=frozenset(), commit="unknown"):
    X, y = load(name)
    tr, va, te = split(len(X), seed)
    parts = (tr, va, te)
    raw = onehot(X.iloc[tr], X.iloc[va], X.iloc[te])
    Xc = np.stack([X[c].astype("category").cat.codes.to_numpy() for c in X.columns], axis=1)
    n_trees = X.shape[1]

    def todo(method, **setting):
        return unit_key({"data": name, "seed": seed, "method": method, **setting}) not in done

    def emit(method, grid, **setting):
        for C, va_auc, va_ll, te_auc, te_ll in grid:
            rec = {
                "data": name,
                "seed": seed,
                "method": method,
                "C": C,
                "val_auc": va_auc,
                "val_logloss": va_ll,
                "test_auc": te_auc,
                "test_logloss": te_ll,
                **setting,
                "commit": commit,
            }
            out.write(json.dumps(rec) + "\n")
        out.flush()
        best = max(grid, key=lambda g: (g[1], -g[2]))
        print(
            f"{name:12s} seed={seed} {method:12s} {setting} best val AUC: C={best[0]} "
            f"test AUC={best[3]:.4f} logloss={best[4]:.4f}",
            flush=True,
        )

    def timed_grid(blocks):
        t0 = time.process_time()
        grid = lr_grid(blocks, y, parts, args.lr_extend)
        return grid, round(time.process_time() - t0, 2)

    if todo("LR"):
        grid, lr_cpu = timed_grid(raw)
        emit("LR", grid, lr_cpu_s=lr_cpu)

    seen = {}  # on small data sets several max-leaves settings give the same trees
    for leaves in LGBM_LEAVES:
        if not todo("LR+LightGBM", leaves=leaves):
            continue
        t0 = time.process_time()
        L = lightgbm_leaves(Xc, y, tr, n_trees, leaves, seed)
        fit_cpu = time.process_time() - t0
        key = L.tobytes()
        if key not in seen:
            hot = onehot(L[tr], L[va], L[te])
            seen[key] = timed_grid([sp.hstack([r, h]).tocsr() for r, h in zip(raw, hot)])
        grid, lr_cpu = seen[key]
        emit(
            "LR+LightGBM",
            grid,
            leaves=leaves,
            n_leaf_features=n_features(L, tr),
            fit_cpu_s=round(fit_cpu, 2),
            lr_cpu_s=lr_cpu,
        )

    settings = [(c, lam) for c in C_F for lam in LAMBDA] if args.full_grid else SMALL_GRID
    for c_f, lam in settings:
        setting = dict(
            c_f=c_f,
            lambda_=lam,
            iters=args.iters,
            max_nodes=args.max_nodes,
            grace_period=args.grace_period,
        )
        if not todo("LR+MCTS-IS", **setting):
            continue
        L, fit_cpu, model = mcts_leaves(
            X,
            y,
            tr,
            args.iters,
            args.batch,
            seed,
            c_f=c_f,
            lambda_=lam,
            grace_period=args.grace_period,
            max_nodes=args.max_nodes,
        )
        hot = onehot(L[tr], L[va], L[te])
        grid, lr_cpu = timed_grid([sp.hstack([r, h]).tocsr() for r, h in zip(raw, hot)])
        emit(
            "LR+MCTS-IS",
            grid,
            **setting,
            n_leaf_features=n_features(L, tr),
            fit_cpu_s=round(fit_cpu, 2),
            data_nodes=model.n_nodes["data_nodes"],
            lr_cpu_s=lr_cpu,
        )


def pick(rows, rule):
    """The row a validation rule chooses: 'auc' (sec. 5; ties by log loss) or 'logloss'."""
    if rule == "auc":
        return max(rows, key=lambda r: (r["val_auc"], -r["val_logloss"]))
    return min(rows, key=lambda r: (r["val_logloss"], -r["val_auc"]))


def sign_test(wins, losses):
    """Two-sided sign test over seeds (ties dropped): P(a split at least this uneven | p = 1/2)."""
    from scipy.stats import binomtest

    n = wins + losses
    return 1.0 if n == 0 else binomtest(wins, n, 0.5).pvalue


def summarize(path, rule="auc", small_grid=False):
    with open(path) as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    if small_grid:  # compare runs of the full and of the reduced grid on the same settings
        rows = [
            r for r in rows if r["method"] != "LR+MCTS-IS" or (r["c_f"], r["lambda_"]) in SMALL_GRID
        ]
    print(f"\nchosen by validation {rule}: test AUC / log loss (mean +- sd over seeds)")
    print(
        "| data | seeds | "
        + " | ".join(f"{m} AUC | {m} log loss" for m in METHODS)
        + " | (c) vs (b): AUC >= / log loss <= (seeds) |"
    )
    print("|---" * (2 + 2 * len(METHODS) + 1) + "|")
    tests, means, edges = [], {}, []
    for name in NAMES:
        chosen = {}
        seeds = sorted({r["seed"] for r in rows if r["data"] == name})
        for seed in seeds:
            for method in METHODS:
                sel = [
                    r
                    for r in rows
                    if r["data"] == name and r["seed"] == seed and r["method"] == method
                ]
                if sel:
                    chosen[method, seed] = pick(sel, rule)
                    cs = [r["C"] for r in sel if unit_key(r) == unit_key(chosen[method, seed])]
                    if chosen[method, seed]["C"] in (min(cs), max(cs)):
                        edges.append((name, seed, method, chosen[method, seed]["C"]))
        # a seed counts once every method has all its settings (a run stopped mid-seed does
        # not); the C grid may differ between settings (--lr-extend)
        size = {
            s: len({unit_key(r) for r in rows if r["data"] == name and r["seed"] == s})
            for s in seeds
        }
        seeds = [
            s
            for s in seeds
            if all((m, s) in chosen for m in METHODS) and size[s] == max(size.values())
        ]
        if not seeds:
            continue
        cells = []
        for method in METHODS:
            auc = np.array([chosen[method, s]["test_auc"] for s in seeds])
            ll = np.array([chosen[method, s]["test_logloss"] for s in seeds])
            means[name, method] = (auc.mean(), ll.mean())
            cells.append(f"{auc.mean():.4f} ± {auc.std():.4f} | {ll.mean():.4f} ± {ll.std():.4f}")
        b = [chosen["LR+LightGBM", s] for s in seeds]
        c = [chosen["LR+MCTS-IS", s] for s in seeds]
        auc_ok = sum(ci["test_auc"] >= bi["test_auc"] for bi, ci in zip(b, c))
        ll_ok = sum(ci["test_logloss"] <= bi["test_logloss"] for bi, ci in zip(b, c))
        print(
            f"| {name} | {len(seeds)} | "
            + " | ".join(cells)
            + f" | {auc_ok}/{len(seeds)} / {ll_ok}/{len(seeds)} |"
        )
        for metric, sign in (("test_auc", 1), ("test_logloss", -1)):
            d = [sign * (ci[metric] - bi[metric]) for bi, ci in zip(b, c)]
            tests.append(
                (
                    name,
                    metric,
                    sum(x > 0 for x in d),
                    sum(x < 0 for x in d),
                    sum(x == 0 for x in d),
                    float(np.mean(d)),
                )
            )
    print(
        "\n(c) vs (b), per seed: wins / losses / ties of (c), mean gain of (c) "
        "(AUC up, log loss down), two-sided sign test"
    )
    print("| data | metric | (c) better | (c) worse | tie | mean gain | sign test p |")
    print("|---|---|---|---|---|---|---|")
    for metric in ("test_auc", "test_logloss"):
        rows_m = [t for t in tests if t[1] == metric]
        for name, _, w, l, t, g in rows_m:
            print(f"| {name} | {metric[5:]} | {w} | {l} | {t} | {g:+.4f} | {sign_test(w, l):.2f} |")
        w, l, t = (sum(x[k] for x in rows_m) for k in (2, 3, 4))
        print(f"| all seeds pooled | {metric[5:]} | {w} | {l} | {t} | | {sign_test(w, l):.3f} |")
    names = sorted({n for n, _ in means})
    if names:
        auc_ok = [n for n in names if means[n, "LR+MCTS-IS"][0] >= means[n, "LR+LightGBM"][0]]
        ll_ok = [n for n in names if means[n, "LR+MCTS-IS"][1] <= means[n, "LR+LightGBM"][1]]
        both = [n for n in auc_ok if n in ll_ok]
        need = len(names) // 2 + 1
        print(
            f"\ntarget on means, (c) >= (b): AUC on {len(auc_ok)}/{len(names)} {auc_ok}; "
            f"log loss on {len(ll_ok)}/{len(names)} {ll_ok}; both on {len(both)}/{len(names)}: "
            f"{'MET' if len(both) >= need else 'NOT met'} (most = {need})"
        )
    if edges:
        print(
            f"chosen C on an edge of its grid ({len(edges)}): "
            + ", ".join(f"{n} s{s} {m} C={c}" for n, s, m, c in edges)
        )
    print(
        "\nchosen settings (seed: LightGBM leaves, features; MCTS-IS (c_F, lambda), features, "
        "C, fit CPU s, data nodes)"
    )
    for name in NAMES:
        for seed in sorted({r["seed"] for r in rows if r["data"] == name}):

            def sel(method, name=name, seed=seed):
                return [
                    r
                    for r in rows
                    if r["data"] == name and r["seed"] == seed and r["method"] == method
                ]

            if not sel("LR+MCTS-IS") or not sel("LR+LightGBM"):
                continue
            g, m = pick(sel("LR+LightGBM"), rule), pick(sel("LR+MCTS-IS"), rule)
            print(
                f"- {name} seed {seed}: LightGBM {g['leaves']} leaves, {g['n_leaf_features']} "
                f"features, C={g['C']}; MCTS-IS ({m['c_f']}, {m['lambda_']}), "
                f"{m['n_leaf_features']} features, C={m['C']}, {m['fit_cpu_s']} s, "
                f"{m['data_nodes']} data nodes"
            )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--iters", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=65536)
    ap.add_argument("--grace-period", type=int, default=20)
    ap.add_argument("--max-nodes", type=int, default=1_000_000)
    ap.add_argument("--data", nargs="*", default=list(NAMES))
    ap.add_argument("--full-grid", action="store_true")
    ap.add_argument("--out", default="/tmp/mcts_is_table1.jsonl")
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument(
        "--lr-c", type=float, nargs="*", default=None, help="the LR's C grid (default: LR_C)"
    )
    ap.add_argument(
        "--lr-extend",
        type=int,
        default=0,
        help="grow the C grid by up to this many values past an edge while a "
        "validation rule chooses the edge (default 0: the grid as given)",
    )
    ap.add_argument(
        "--resume",
        action="store_true",
        help="skip the fits already recorded in --out (same data, seed, method and setting)",
    )
    ap.add_argument(
        "--summary-small-grid",
        action="store_true",
        help="summary: MCTS-IS chosen among the reduced (c_F, lambda) grid only",
    )
    ap.add_argument(
        "--rule",
        choices=("auc", "logloss"),
        default=None,
        help="summary's validation rule (default: both)",
    )
    args = ap.parse_args()
    if args.lr_c:
        global LR_C
        LR_C = tuple(args.lr_c)
    if not args.summary_only:
        done = done_units(args.out) if args.resume else frozenset()
        commit = git_commit()
        print(f"commit {commit}", flush=True)
        with open(args.out, "a") as out:
            jobs = [
                (n, s)
                for s in range(args.first_seed, args.first_seed + args.seeds)
                for n in args.data
            ]
            for name, seed in tqdm(jobs, desc="table 1"):
                run(name, seed, args, out, done, commit)
    for rule in [args.rule] if args.rule else ["auc", "logloss"]:
        summarize(args.out, rule, args.summary_small_grid)


if __name__ == "__main__":
    main()
