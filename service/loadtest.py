"""Load a running Grove over HTTP: decide + reward throughput, latency, and trainer catch-up.

    python -m service.loadtest --url http://127.0.0.1:8000 --admin-key KEY --seconds 15

Creates a throw-away app, runs ``--threads`` clients that decide and reward (``--reward-share``
of the decisions) for ``--seconds``, then waits until the trainer has learned every reward and
reports requests/s and latency percentiles, next to the same figures for ``/healthz`` (the HTTP
floor of this server) measured in the same run. The app is deleted at the end.
"""

from __future__ import annotations

import argparse
import random
import statistics
import threading
import time
import uuid

import httpx
from tqdm import tqdm


def _percentiles(values: list[float]) -> str:
    if not values:
        return "-"
    q = statistics.quantiles(values, n=100) if len(values) > 1 else values * 99
    return f"p50 {q[49] * 1000:.1f} ms, p95 {q[94] * 1000:.1f} ms, p99 {q[98] * 1000:.1f} ms"


def _hammer(url: str, seconds: float, threads: int, work) -> dict[str, list[float]]:
    """Run ``work(client, rng, timings)`` in ``threads`` threads for ``seconds``."""
    timings: dict[str, list[float]] = {}
    lock, stop = threading.Lock(), threading.Event()

    def run(seed: int) -> None:
        rng, local = random.Random(seed), {}
        with httpx.Client(base_url=url, timeout=10.0) as client:
            while not stop.is_set():
                work(client, rng, local)
        with lock:
            for k, v in local.items():
                timings.setdefault(k, []).extend(v)

    pool = [threading.Thread(target=run, args=(s,)) for s in range(threads)]
    for t in pool:
        t.start()
    for _ in tqdm(range(int(seconds * 10)), desc="load", unit="0.1s", leave=False):
        time.sleep(0.1)
    stop.set()
    for t in pool:
        t.join()
    return timings


def _timed(local: dict, name: str, call):
    start = time.perf_counter()
    answer = call()
    local.setdefault(name, []).append(time.perf_counter() - start)
    return answer


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8000")
    p.add_argument("--admin-key", required=True)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--trees", type=int, default=100, help="n_trees of the Bandit Forest")
    p.add_argument("--actions", type=int, default=10)
    p.add_argument("--features", type=int, default=8, help="numeric context features")
    p.add_argument("--reward-share", type=float, default=0.7)
    args = p.parse_args(argv)

    admin = httpx.Client(
        base_url=args.url, timeout=30.0, headers={"Authorization": f"Bearer {args.admin_key}"}
    )
    name = f"loadtest-{uuid.uuid4().hex[:8]}"
    actions = [f"ad{k}" for k in range(args.actions)]
    created = admin.post(
        "/apps",
        json={
            "name": name,
            "actions": actions,
            "rewardWaitTime": 3600,
            "policy": {"kind": "bandit-forest", "params": {"n_trees": args.trees, "seed": 1}},
        },
    )
    created.raise_for_status()
    headers = {"Authorization": f"Bearer {created.json()['apiKey']}"}

    def health(client, rng, local):
        _timed(local, "healthz", lambda: client.get("/healthz"))

    def decide_reward(client, rng, local):
        context = {f"f{j}": rng.random() for j in range(args.features)}
        context["site"] = rng.choice("abcde")
        d = _timed(
            local,
            "decide",
            lambda: client.post(f"/apps/{name}/decide", json={"context": context}, headers=headers),
        )
        if d.status_code != 200:
            local.setdefault("errors", []).append(d.status_code)
            return
        if rng.random() < args.reward_share:
            best = actions[int(context["f0"] * args.actions)]  # the rule to learn
            reward = 1.0 if d.json()["action"] == best else float(rng.random() < 0.1)
            r = _timed(
                local,
                "reward",
                lambda: client.post(
                    f"/apps/{name}/reward",
                    json={"eventId": d.json()["eventId"], "reward": reward},
                    headers=headers,
                ),
            )
            if r.status_code != 200:
                local.setdefault("errors", []).append(r.status_code)

    try:
        floor = _hammer(args.url, min(5.0, args.seconds), args.threads, health)
        floor_rate = len(floor.get("healthz", [])) / min(5.0, args.seconds)
        load = _hammer(args.url, args.seconds, args.threads, decide_reward)
        rewards = len(load.get("reward", []))
        start = time.monotonic()
        while True:  # the trainer catching up with the rewards
            status = admin.get(f"/apps/{name}").json()
            if status["eventsLearned"] >= rewards or time.monotonic() - start > 300:
                break
            time.sleep(0.2)
        catch_up = time.monotonic() - start
        decide_rate = len(load.get("decide", [])) / args.seconds
        print(
            f"server {args.url}, {args.threads} client threads, {args.seconds:g}s, "
            f"forest n_trees={args.trees}, {args.actions} actions, {args.features + 1} features"
        )
        print(f"/healthz : {floor_rate:8.1f} req/s  {_percentiles(floor.get('healthz', []))}")
        print(
            f"decide   : {decide_rate:8.1f} req/s  {_percentiles(load.get('decide', []))}"
            f"  ({decide_rate / floor_rate:.2f}x the /healthz rate)"
        )
        reward_latency = _percentiles(load.get("reward", []))
        print(f"reward   : {rewards / args.seconds:8.1f} req/s  {reward_latency}")
        print(f"errors   : {len(load.get('errors', []))}")
        print(
            f"trainer  : {status['eventsLearned']} events learned, "
            f"{catch_up:.1f}s after the load stopped; model version {status['modelVersion']}"
        )
    finally:
        admin.delete(f"/apps/{name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
