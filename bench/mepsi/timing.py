"""Time MEPSI pruning 200 -> 20 trees per data set (issue target: at most 60 s on 2 cores).

One forest per data set (Table S1 ccp_alpha, or ``--ccp 0`` for unpruned trees), MEPSI with the
paper's C (Table S3) or ``--C``, the error term on the training set or (``--prune-on oob``) on
each tree's out-of-bag samples. For each ``--n-jobs`` value, one fresh MEPSI fit (fresh tree
objects, no cache) in the same run; the selections must be identical. Reported per fit:

- wall-clock and CPU seconds (``process_time``, all threads; numba's compilation, about 1-2 s,
  falls on the first fit, which is why a warm-up fit on 30 trees runs first);
- the CPU seconds inside the compiled kernels (TED and its bound), in total and along the
  busiest thread of each call (``ted_compiled.KERNEL_CPU``), and from them the wall time the
  fit takes on an idle machine: CPU outside the kernels + the kernels' critical path (on a
  shared machine the measured wall time is several times that);
- the number of TEDs computed;
- the 1-minute load average before and after the fit (other processes on the machine) and the
  clock time at its end.

Reduce-error ordering is timed beside it as the peer; ``--full-matrix`` also times all 19,900
TEDs with one thread.

    nice -n 10 python -m bench.mepsi.timing --ccp 0 --prune-on oob --n-jobs 1,2
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from sklearn.model_selection import train_test_split
from tqdm import tqdm

from bench.mepsi.data import TABLE, load
from online.pruning import (
    MEPSI,
    from_sklearn_forest,
    reduce_error,
    ted_compiled,
    ted_matrix,
)
from online.pruning.protocol import paper_forest, pruning_set


def clocks():
    return time.perf_counter(), time.process_time()


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--datasets", default=",".join(TABLE))
    p.add_argument("--ccp", type=float, default=None)
    p.add_argument("--esm-samples", type=int, default=200)
    p.add_argument("--esm-avg", choices=["term", "subset"], default="term")
    p.add_argument("--C", type=float, default=None, help="override Table S3's C")
    p.add_argument("--prune-on", choices=["train", "oob"], default="train")
    p.add_argument("--backend", choices=["auto", "numba", "numpy"], default="auto")
    p.add_argument("--n-jobs", default="1,2", help="comma-separated thread counts")
    p.add_argument("--full-matrix", action="store_true")
    p.add_argument(
        "--kernels", action="store_true", help="only time the TED / SED kernels (same run)"
    )
    a = p.parse_args(argv)
    jobs = [int(j) for j in a.n_jobs.split(",")]
    rows = []
    for name in tqdm(a.datasets.split(","), desc="mepsi timing"):
        X, y, split = load(name)
        if split is not None:
            Xtr, ytr = X[~split], y[~split]
        else:
            Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.3, random_state=0)
        alpha = TABLE[name][3] if a.ccp is None else a.ccp
        rf = paper_forest(200, alpha, random_state=0).fit(Xtr, ytr)
        P, yc = pruning_set(rf, Xtr, ytr, prune_on=a.prune_on)
        C = TABLE[name][4] if a.C is None else a.C
        if a.kernels:
            kernels(name, from_sklearn_forest(rf))
            continue

        def fit(trees, n_jobs, C=C, P=P, yc=yc):
            n = len(trees)
            return MEPSI(
                k=20,
                C=C,
                n_esm_samples=a.esm_samples,
                esm_avg=a.esm_avg,
                ted_backend=a.backend,
                n_jobs=n_jobs,
                random_state=0,
            ).fit(trees, P[:n], yc)

        fit(from_sklearn_forest(rf)[:30], 1)  # warm-up: numba compiles here, not in a timed fit
        selections = []
        for n_jobs in jobs:
            trees = from_sklearn_forest(rf)  # fresh: no cached flattening from the last fit
            ted_compiled.KERNEL_CPU.update(total=0.0, critical=0.0)
            load0 = os.getloadavg()[0]
            w0, c0 = clocks()
            m = fit(trees, n_jobs)
            w1, c1 = clocks()
            load1 = os.getloadavg()[0]
            k_tot, k_crit = ted_compiled.KERNEL_CPU["total"], ted_compiled.KERNEL_CPU["critical"]
            idle = (c1 - c0) - k_tot + k_crit
            selections.append(m.selected_.tolist())
            nodes = np.mean([t.n_nodes for t in trees])
            row = dict(
                name=name,
                nodes=nodes,
                m=len(ytr),
                n_jobs=n_jobs,
                wall=w1 - w0,
                cpu=c1 - c0,
                kernel=k_tot,
                critical=k_crit,
                idle=idle,
                teds=m.ted_evaluations_,
                load=(load0, load1),
                clock=time.strftime("%H:%M:%S"),
            )
            w2, c2 = clocks()
            reduce_error(P, yc, 20)
            w3, c3 = clocks()
            row.update(re_wall=w3 - w2, re_cpu=c3 - c2, full=float("nan"))
            if a.full_matrix and n_jobs == jobs[0]:
                ted_matrix(from_sklearn_forest(rf), backend=a.backend, n_jobs=1)
                row["full"] = time.process_time() - c3
            rows.append(row)
            print(
                f"{name} n_jobs={n_jobs}: MEPSI wall {w1 - w0:.1f}s cpu {c1 - c0:.1f}s"
                f" (kernels {k_tot:.1f}s, critical path {k_crit:.1f}s; idle-machine wall"
                f" {idle:.1f}s) TEDs {m.ted_evaluations_}, nodes {nodes:.1f}",
                flush=True,
            )
        same = all(s == selections[0] for s in selections)
        print(f"{name}: selections identical across n_jobs {jobs}: {same}", flush=True)
        if not same:
            raise SystemExit(f"{name}: the selection depends on n_jobs")
    print(
        "| data | mean internal nodes | m (pruning set) | threads | MEPSI CPU s | in kernels CPU s"
        " | kernels' critical path s | idle-machine wall s (est.) | measured wall s (shared)"
        " | TEDs computed | OA-RE CPU s | all 19,900 TEDs CPU s (1 thread)"
        " | load avg before / after | end |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['name']} | {r['nodes']:.1f} | {r['m']} | {r['n_jobs']} | {r['cpu']:.1f}"
            f" | {r['kernel']:.1f} | {r['critical']:.1f} | {r['idle']:.1f} | {r['wall']:.1f}"
            f" | {r['teds']} | {r['re_cpu']:.2f} | {r['full']:.1f}"
            f" | {r['load'][0]:.2f} / {r['load'][1]:.2f} | {r['clock']} |"
        )


def kernels(name, trees, n_pairs=150, n_sed=40):
    """CPU ms per TED pair: the AVX-512 kernel (integer costs, where the CPU has it) vs the
    scalar kernel on int32 tables vs float64 tables (costs 0.5: twice the distance), 1 vs 2
    threads; CPU s of the SED bound on ``n_sed`` trees: bit-parallel vs compiled DP vs numpy."""
    rng = np.random.default_rng(0)
    I, J = rng.integers(0, len(trees), (2, n_pairs))
    flat = (ted_compiled.flatten(trees), ted_compiled.flatten(trees, mirror=True))
    half = dict(insert=0.5, remove=0.5, update=0.5)
    out = {}
    for label, costs, n_jobs, vector in [
        ("AVX-512 int16, 1 thread", {}, 1, True),
        ("scalar int32, 1 thread", {}, 1, False),
        ("scalar float64, 1 thread", half, 1, False),
        ("AVX-512 int16, 2 threads", {}, 2, True),
    ]:
        ted_compiled.USE_AVX512 = vector
        ted_compiled.pairs(trees, I[:2], J[:2], flat=flat, **costs)  # compile / load the cache
        w0, c0 = clocks()
        d = ted_compiled.pairs(trees, I, J, flat=flat, n_jobs=n_jobs, **costs)
        w1, c1 = clocks()
        out[label] = (d * (2 if costs else 1), (c1 - c0) / n_pairs * 1e3, (w1 - w0) / n_pairs * 1e3)
        print(
            f"{name} TED {label}: {out[label][1]:.2f} ms CPU / pair, "
            f"{out[label][2]:.2f} ms wall / pair"
        )
    ted_compiled.USE_AVX512 = True
    first = next(iter(out.values()))[0]
    print(f"{name}: same distances: {all(np.array_equal(v[0], first) for v in out.values())}")
    from online.pruning import sed_bits
    from online.pruning.ted import postorder_sed_matrix

    postorder_sed_matrix(trees[:3])
    bits = sed_bits.usable
    for label, kw in (("bit-parallel", {}), ("compiled DP", {}), ("numpy", dict(backend="numpy"))):
        sed_bits.usable = bits if label == "bit-parallel" else (lambda *a: False)
        postorder_sed_matrix(trees[:3], **kw)
        c0 = time.process_time()
        postorder_sed_matrix(trees[:n_sed], n_jobs=1, **kw)
        print(f"{name} SED bound, {label}, {n_sed} trees: {time.process_time() - c0:.2f} s CPU")
    sed_bits.usable = bits


if __name__ == "__main__":
    main()
