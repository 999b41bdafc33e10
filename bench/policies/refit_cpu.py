"""How much CPU do the tree-ensemble policy's refits take, and the stream around them?

Plays ``--events`` events of the stream (``bench.policies.compare``'s ``TreesPlayer``: the
defaults, dense input, refits inline in ``learn_one``) and times every refit
(``RefitJob.__call__``) in process CPU time (every thread of the process: LightGBM's and
OpenBLAS's too) and on the clock; prints the totals as JSON, with the file of the ``online``
package that ran (for an A/B, run this file with ``PYTHONPATH`` at another checkout: that
checkout's ``online`` is timed, ``bench`` is this one's).

    python -m bench.policies.refit_cpu --data letter --events 150000
    PYTHONPATH=/tmp/old python bench/policies/refit_cpu.py --events 150000   # a worktree
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a file: this checkout's bench, PYTHONPATH's online
    sys.path.append(str(Path(__file__).resolve().parents[2]))

from bench.common.streams import BanditStream  # noqa: E402
from bench.policies.compare import TreesPlayer, load  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="letter")
    ap.add_argument("--events", type=int, default=150_000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from online.policies import refit

    spent = {"refits": 0, "refit_cpu_s": 0.0, "refit_wall_s": 0.0}
    call = refit.RefitJob.__call__

    def timed(job):
        cpu, wall = time.process_time(), time.perf_counter()
        try:
            return call(job)
        finally:
            spent["refits"] += 1
            spent["refit_cpu_s"] += time.process_time() - cpu
            spent["refit_wall_s"] += time.perf_counter() - wall

    refit.RefitJob.__call__ = timed
    data = load(args.data)
    player = TreesPlayer(data, args.seed)
    cpu, wall = time.process_time(), time.perf_counter()
    for X, y in BanditStream(data, noise=0.05, seed=args.seed, chunk_size=1000).chunks(
            args.events):
        player.play(X, y)
    total_cpu, total_wall = time.process_time() - cpu, time.perf_counter() - wall
    print(json.dumps({"online": refit.__file__, "data": args.data, "events": args.events,
                      "seed": args.seed, "cpu_s": round(total_cpu, 2),
                      "wall_s": round(total_wall, 2),
                      "events_per_cpu_s": round(args.events / total_cpu, 1),
                      **{k: round(v, 2) for k, v in spent.items()}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
