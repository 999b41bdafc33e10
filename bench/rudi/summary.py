"""Markdown Tables 3-4 from ``rudi/tables.py`` results (the tables of README.md).

    python -m bench.rudi.summary bench/out/rudi_full/vews.json bench/out/rudi_full/mooc.json

Table 3: multiple correlation (eq. 5) with the teacher, train (the paper's measure) / test, and
the number of one-hot columns of the K statistics; MCTS-SG as seed 0 (RuDi's own search), the
mean +- std and the range over all seeds, and how many seeds are above the best flat K-subset.
Table 4: fidelity and AUC on the test split (in brackets: Lasso's non-zero weights, CART's
leaves); RuDi as mean +- std over the GS-NLN seeds, R = 20 rules.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

FLAT = ("Random", "Lasso", "LightGBM")


def sg_runs(res):
    """(train, test, cols) of every MCTS-SG seed, seed 0 first."""
    return [res["table3"]["MCTS-SG"][:3]] + [e["table3"][:3] for e in res.get("sg_extra", [])]


def table3(name, res):
    t3 = res["table3"]
    runs = np.array(sg_runs(res), dtype=float)
    best = max(("Lasso", "LightGBM"), key=lambda k: t3[k][0])
    lines = [
        f"\n**{name}** (teacher test AUC {res['teacher_auc']:.4f})\n",
        "| method | train | test | columns |",
        "| --- | --- | --- | --- |",
    ]
    for k in FLAT:
        label = "Random (mean of 3 draws)" if k == "Random" else f"{k}-selected flat aggregates"
        lines.append(f"| {label} | {t3[k][0]:.4f} | {t3[k][1]:.4f} | {t3[k][2]:.0f} |")
    lines.append(f"| MCTS-SG, seed 0 | {runs[0, 0]:.4f} | {runs[0, 1]:.4f} | {runs[0, 2]:.0f} |")
    if len(runs) > 1:
        lines.append(
            f"| MCTS-SG, {len(runs)} seeds: mean +- std (min..max) | {runs[:, 0].mean():.4f} +- "
            f"{runs[:, 0].std():.4f} ({runs[:, 0].min():.4f}..{runs[:, 0].max():.4f}) | "
            f"{runs[:, 1].mean():.4f} +- {runs[:, 1].std():.4f} ({runs[:, 1].min():.4f}.."
            f"{runs[:, 1].max():.4f}) | {runs[:, 2].mean():.0f} |"
        )
    a = t3["All flat aggregates"]
    lines.append(
        f"| (all flat aggregates, not a K-subset) | {a[0]:.4f} | {a[1]:.4f} | {a[2]:.0f} |"
    )
    above = [int((runs[:, i] > t3[best][i]).sum()) for i in (0, 1)]
    lines.append(
        f"\nMCTS-SG seeds above {best} (the best flat K-subset): {above[0]}/{len(runs)} "
        f"on train, {above[1]}/{len(runs)} on test."
    )
    return lines


def table4(results):
    names = [(ds, t) for ds, r in results.items() for t in r["teachers"]]
    head = "| student | " + " | ".join(f"{ds.upper()} {t}: fidelity / AUC" for ds, t in names)
    lines = [head + " |", "| --- |" + " --- |" * len(names)]
    for student in ("Lasso", "Lasso (binary)", "CART", "RuDi"):
        cells = []
        for ds, t in names:
            v = results[ds]["teachers"][t]["table4"][student]
            cell = f"{v[0]:.4f} / {v[1]:.4f} ({v[2]})"  # non-zero weights or leaves
            if len(v) > 3:
                cell = f"**{v[0]:.4f} +- {v[3]:.4f}** / {v[1]:.4f} +- {v[4]:.4f}"
            cells.append(cell)
        lines.append(f"| {student} | " + " | ".join(cells) + " |")
    lits = [str(results[ds]["teachers"][t]["max_literals"]) for ds, t in names]
    lines.append("| RuDi: most literals in a rule | " + " | ".join(lits) + " |")
    return lines


def main(paths):
    results = {}
    for p in paths:
        for ds, r in json.loads(Path(p).read_text()).items():
            if ds != "scaling":
                results[ds] = r
    out = ["### Table 3"]
    for ds, r in results.items():
        for t, res in r["teachers"].items():
            out += table3(f"{ds.upper()}, {t} teacher: {r['n_entities']} entities", res)
    out += ["\n### Table 4 (test split)\n"] + table4(results)
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])
