"""Does the current MEPSI select exactly what an earlier revision selected?

For each data set of MEPSI's Table 1 and both forest settings (unpruned trees with out-of-bag
pruning sets, as in the timing bench; Table S1's ccp_alpha with the training set), one
200-tree forest (seed 0) is pruned to 20 trees with Table S3's C by the package of the working
tree and by the package of an earlier revision (``git archive <rev> online`` into a temporary
directory, run in a subprocess). Compared: the selected trees in order, every step's objective
(``step_objectives_``, exact float equality), ESM_avg and lambda. Each side's results are kept
in a JSON file (``bench/out/``), so a run resumes and the slow side (the old USPS fit takes
about 12 minutes) runs once. Each side runs ``python -m bench.mepsi.same_selection --record``
in a subprocess whose working directory holds the ``online`` package to measure: the
repository for the current one, a temporary directory (the old ``online`` beside a copy of
``bench/``) for the earlier one; the current directory comes first on ``sys.path``.

    nice -n 10 python -m bench.mepsi.same_selection --rev 84e5a3f
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

import online.pruning as op
from bench.common.paths import DATA, OUT, ROOT
from bench.mepsi.data import TABLE, load


def record(pkg: str, out: str, names: list[str]) -> None:
    """Fit MEPSI on every (setting, data set) with the package under ``pkg`` (which must be
    the ``online`` package imported: the subprocess runs in ``pkg``); append to ``out``."""
    assert Path(op.__file__).resolve().is_relative_to(Path(pkg).resolve()), op.__file__
    path = Path(out)
    res = json.loads(path.read_text()) if path.exists() else {}
    for setting in ("ccp0", "paper"):
        for name in names:
            key = f"{setting}/{name}"
            if key in res:
                continue
            X, y, split = load(name)
            if split is not None:
                Xtr, ytr = X[~split], y[~split]
            else:
                Xtr, _, ytr, _ = train_test_split(X, y, test_size=0.3, random_state=0)
            alpha = 0.0 if setting == "ccp0" else TABLE[name][3]
            # online.pruning.protocol's forest and pruning set, written with the calls every
            # revision has (the old side imports an old online package)
            rf = RandomForestClassifier(
                200, criterion="entropy", ccp_alpha=alpha, random_state=0, n_jobs=1
            ).fit(Xtr, ytr)
            if setting == "ccp0":
                P = op.forest_oob_predictions(rf, Xtr)
            else:
                P = op.forest_predictions(rf, Xtr, scores=True)
            yc = np.searchsorted(rf.classes_, ytr)
            t0, c0 = time.perf_counter(), time.process_time()
            m = op.MEPSI(k=20, C=TABLE[name][4], random_state=0).fit(
                op.from_sklearn_forest(rf), P, yc
            )
            res[key] = dict(
                selected=m.selected_.tolist(),
                steps=[float(v) for v in m.step_objectives_],
                esm_avg=float(m.esm_avg_),
                lam=float(m.lambda_),
                teds=int(m.ted_evaluations_),
                wall=time.perf_counter() - t0,
                cpu=time.process_time() - c0,
            )
            print(f"{key}: TEDs {res[key]['teds']}, {res[key]['wall']:.1f} s", flush=True)
            path.write_text(json.dumps(res))


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--rev", default="84e5a3f", help="earlier revision to compare with")
    p.add_argument("--datasets", default=",".join(TABLE))
    p.add_argument("--record", nargs=2, metavar=("PKG", "OUT"), help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    names = a.datasets.split(",")
    if a.record:
        return record(a.record[0], a.record[1], names)
    OUT.mkdir(exist_ok=True)
    files = {"old": OUT / f"mepsi_selection_{a.rev}.json", "new": OUT / "mepsi_selection_now.json"}
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(
            ["git", "archive", a.rev, "online"], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        shutil.copytree(ROOT / "bench", Path(tmp) / "bench", ignore=shutil.ignore_patterns("out"))
        for side, pkg in (("old", tmp), ("new", str(ROOT))):
            cmd = [
                sys.executable,
                "-m",
                "bench.mepsi.same_selection",
                "--record",
                pkg,
                str(files[side]),
                "--datasets",
                a.datasets,
            ]
            env = {**os.environ, "GROVE_BENCH_DATA": str(DATA)}  # the copy's paths differ
            subprocess.run(cmd, check=True, cwd=pkg, env=env)
    old, new = (json.loads(files[s].read_text()) for s in ("old", "new"))
    print(
        "| setting / data | TEDs (old) | TEDs (now) | wall s (old) | wall s (now) | same selection "
        "| same step objectives | same ESM_avg, lambda |"
    )
    print("|---|---:|---:|---:|---:|---|---|---|")
    all_same = True
    for key in new:
        if key not in old or key.split("/")[1] not in names:
            continue
        o, n = old[key], new[key]
        same = (
            o["selected"] == n["selected"],
            o["steps"] == n["steps"],
            (o["esm_avg"], o["lam"]) == (n["esm_avg"], n["lam"]),
        )
        all_same &= all(same)
        print(
            f"| {key} | {o['teds']} | {n['teds']} | {o['wall']:.1f} | {n['wall']:.1f} "
            f"| {same[0]} | {same[1]} | {same[2]} |"
        )
    print(f"every selection, objective and lambda identical: {all_same}")


if __name__ == "__main__":
    main()
