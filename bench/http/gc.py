"""Garbage-collection pauses in Grove's API under wrk: with ``gc.freeze()`` after startup (as
shipped) and without it, alternating, one command.

    python -m bench.http.gc --rounds 2 --seconds 8

Each round starts a fresh stack (redis-server, trainer, ``grove api``; ``bench.http.wrk``'s
``Bench``) with the probe of ``bench/http/gc_probe`` loaded into the API (it times every
collection from the start of the load on; in the ``no-freeze`` arm it makes ``gc.freeze()`` a
no-op), creates an app (10 actions, Bandit Forest with 100 trees), runs wrk's load (16
connections; decide then reward by default, so that the trainer publishes snapshots and the API
loads them) and reports requests/s, p50, p99 and the collections of each generation: how many,
their longest and total pause (wall and the thread's CPU time). Figures: bench/http/README.md.

Run from another checkout (copy ``bench/http/{gc.py,wrk.py,gc_probe}`` into it and run there)
to measure an older commit: the probe needs nothing of the code it measures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path

from bench.http.wrk import Bench, _wrk_env, run_wrk

HERE = Path(__file__).resolve().parent
ARMS = ("freeze", "no-freeze")


def one_round(arm: str, args: argparse.Namespace, work: Path) -> dict:
    out = work / f"gc-{arm}.json"
    env = {"PYTHONPATH": f"{HERE / 'gc_probe'}{os.pathsep}{HERE.parent.parent}",
           "GROVE_GC_PROBE": str(out)}
    if arm == "no-freeze":
        env["GROVE_GC_PROBE_NO_FREEZE"] = "1"
    bench = Bench(work / arm, trees=100, extra_env=env)
    try:
        app, key = bench.create_app(10)
        bench.procs["grove"].send_signal(signal.SIGUSR2)  # the probe counts from here
        figures = run_wrk(bench.grove, _wrk_env(app, key, args.mode, 10), args.conns,
                          args.seconds)
        bench.procs["grove"].send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 10
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(0.2)
        probe = json.loads(out.read_text())
    finally:
        bench.stop()
    return {"arm": arm, "rps": figures["rps"], "p50_ms": figures["p50_us"] / 1e3,
            "p99_ms": figures["p99_us"] / 1e3, "errors": figures["errors"], **probe}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--conns", type=int, default=16)
    p.add_argument("--mode", choices=("decide", "reward"), default="reward",
                   help="wrk's workload: decide only, or decide then reward (the trainer "
                        "publishes snapshots, which the API loads)")
    p.add_argument("--json", help="write every round's figures here")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="grove-gc-") as tmp:
        for r in range(args.rounds):
            for arm in ARMS:
                (Path(tmp) / str(r)).mkdir(exist_ok=True)
                row = one_round(arm, args, Path(tmp) / str(r))
                rows.append(row)
                full = row["by_generation"]["2"]
                print(f"round {r + 1} {arm:9s} {row['rps']:6.0f} req/s p50 {row['p50_ms']:5.1f} "
                      f"ms p99 {row['p99_ms']:6.1f} ms | full collections {full['collections']}"
                      f", longest {full['wall_ms_max']:.1f} ms wall / {full['cpu_ms_max']:.1f} ms"
                      f" CPU | objects tracked {row['tracked_objects']}, frozen "
                      f"{row['frozen_objects']}", flush=True)
    print(f"\nwrk -t1 -c{args.conns}, {args.mode}, 10 actions, {args.rounds} rounds x "
          f"{args.seconds:g} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
          "cores; medians:")
    print(f"{'arm':9s} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'gen-2 runs':>10} "
          f"{'longest ms':>10} {'gen-2 total ms':>14} {'gen-0/1 total ms':>16}")
    def young(r: dict) -> float:  # generations 0 and 1
        return sum(r["by_generation"][g]["wall_ms_total"] for g in ("0", "1"))

    for arm in ARMS:
        mine = [row for row in rows if row["arm"] == arm]

        def med(get, mine=mine):
            return statistics.median(get(row) for row in mine)

        def gen(r: dict, g: str) -> dict:
            return r["by_generation"][g]

        print(f"{arm:9s} {med(lambda r: r['rps']):7.0f} {med(lambda r: r['p50_ms']):7.1f} "
              f"{med(lambda r: r['p99_ms']):7.1f} "
              f"{med(lambda r: gen(r, '2')['collections']):10.0f} "
              f"{med(lambda r: gen(r, '2')['wall_ms_max']):10.1f} "
              f"{med(lambda r: gen(r, '2')['wall_ms_total']):14.1f} "
              f"{med(young):16.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rounds": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
