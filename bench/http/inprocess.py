"""CPU per request of Grove's ASGI app alone (no HTTP server, no load generator), decide then
reward, with an optional cProfile: what bench/http/README.md's "what each change bought"
column was measured with.

    python -m bench.http.inprocess --pairs 2000 --actions 10
    python -m bench.http.inprocess --pairs 500 --actions 1000 --profile tottime

Starts a redis-server (no persistence), builds ``create_app`` in this process, creates an app
(Bandit Forest, 100 trees) and calls the ASGI app directly: every request runs the full stack
(middlewares, routing or the fast path, use case, one Redis script) except uvicorn's HTTP
parsing. The bare app of ``bench/http/bare.py`` is measured the same way (``--bare``) as the
floor. Prints process CPU microseconds per request and wall microseconds per request (the
Redis round trips included).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import tempfile
import time
from pathlib import Path

ADMIN_KEY = "bench-admin-key"
CONTEXT = {"f0": 0.3, "f1": 0.2, "f2": 0.1, "f3": 0.5, "site": "a"}


def rank_body(n_actions: int) -> dict:
    """Personalizer's rank as load.lua's ``rank`` workload sends it: the context as
    ``contextFeatures``, each action with two features."""
    return {"contextFeatures": [{k: v for k, v in CONTEXT.items() if k != "site"},
                                {"site": CONTEXT["site"]}],
            "actions": [{"id": f"ad{i}", "features": [{"topic": f"t{i % 8}"},
                                                      {"words": 3 + i % 5}]}
                        for i in range(n_actions)]}


async def call(app, path: str, body: dict, headers: dict) -> tuple[int, bytes]:
    """One POST through the ASGI app."""
    raw = json.dumps(body).encode()
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"",
        "root_path": "", "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80), "state": {},
        "headers": [(b"content-type", b"application/json"),
                    (b"content-length", str(len(raw)).encode())]
        + [(k.lower().encode(), v.encode()) for k, v in headers.items()],
    }
    given = False

    async def receive():
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await asyncio.sleep(3600)

    out = []

    async def send(message):
        out.append(message)

    await app(scope, receive, send)
    return out[0]["status"], b"".join(m.get("body", b"") for m in out[1:])


MULTI = "/personalizer/v1.1-preview.1/multislot"


async def loop(app, headers: dict, pairs: int, rank: dict | None = None) -> None:
    """``pairs`` decisions, each rewarded: native decide and reward, or with ``rank`` (its
    body) Personalizer's rank and reward (its multi-slot rank and reward if it has slots)."""
    if rank is not None:
        multi = "slots" in rank
        for _ in range(pairs):
            path = f"{MULTI}/rank" if multi else "/personalizer/v1.0/rank"
            status, body = await call(app, path, rank, headers)
            assert status == 201, body
            event = json.loads(body)["eventId"]
            if multi:
                status, body = await call(app, f"{MULTI}/events/{event}/reward",
                                          {"reward": [{"slotId": "main", "value": 1.0}]},
                                          headers)
            else:
                status, body = await call(app, f"/personalizer/v1.0/events/{event}/reward",
                                          {"value": 1.0}, headers)
            assert status == 204, body
        return
    for _ in range(pairs):
        status, body = await call(app, "/apps/b/decide", {"context": CONTEXT}, headers)
        assert status == 200, body
        event = json.loads(body)["eventId"]
        reward = {"eventId": event, "reward": 1.0}
        status, body = await call(app, "/apps/b/reward", reward, headers)
        assert status == 200, body


async def measure(args) -> None:
    from service.redis_server import RedisServer

    redis = RedisServer(Path(tempfile.mkdtemp(prefix="grove-inprocess-")) / "r",
                        appendonly=False).start()
    try:
        if args.bare:
            from bench.http.bare import app

            headers, context = {"authorization": "Bearer unused"}, None
        else:
            from service.api.main import create_app
            from service.settings import Settings

            app = create_app(Settings(redis_url=redis.url, admin_key=ADMIN_KEY))
            context = app.router.lifespan_context(app)
            await context.__aenter__()
            policy = {"kind": "bandit-forest", "params": {"n_trees": 100, "seed": 1}} \
                if args.kind == "bandit-forest" else {"kind": args.kind}
            status, body = await call(app, "/apps", {
                "name": "b", "actions": [f"ad{k}" for k in range(args.actions)],
                "policy": policy,
            }, {"authorization": f"Bearer {ADMIN_KEY}"})
            assert status == 201, body
            key = json.loads(body)["apiKey"]
            headers = {"ocp-apim-subscription-key": key} if args.rank or args.multislot else \
                {"authorization": f"Bearer {key}"}
        rank = rank_body(args.actions) if args.rank or args.multislot else None
        if args.multislot:  # load.lua's multislot body: two slots
            rank["slots"] = [{"id": "main", "baselineAction": "ad0"},
                             {"id": "side", "baselineAction": "ad1"}]
        await loop(app, headers, 200, rank)  # warm: numba kernels, caches
        profile = cProfile.Profile() if args.profile else None
        wall, cpu = time.perf_counter(), time.process_time()
        if profile:
            profile.enable()
        await loop(app, headers, args.pairs, rank)
        if profile:
            profile.disable()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        n = 2 * args.pairs
        what = "bare app" if args.bare else f"Grove, {args.kind}, {args.actions} actions"
        pair = ("multi-slot rank and reward" if args.multislot else
                "rank and reward" if args.rank else "decide and reward")
        print(f"{what}: {cpu / n * 1e6:.0f} us CPU per request, {wall / n * 1e6:.0f} us wall "
              f"({n} requests, {pair} alternating)")
        if profile:
            pstats.Stats(profile).sort_stats(args.profile).print_stats(40)
        if context is not None:
            await context.__aexit__(None, None, None)
    finally:
        redis.stop()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--pairs", type=int, default=2000, help="decide+reward pairs measured")
    p.add_argument("--actions", type=int, default=10)
    p.add_argument("--kind", default="bandit-forest",
                   help="the app's policy kind (bandit-forest: 100 trees, seed 1)")
    p.add_argument("--rank", action="store_true",
                   help="Personalizer's rank and reward (load.lua's rank body) instead")
    p.add_argument("--multislot", action="store_true",
                   help="Personalizer's multi-slot rank (two slots) and reward instead")
    p.add_argument("--bare", action="store_true", help="the bare app instead of Grove")
    p.add_argument("--profile", choices=["tottime", "cumulative"], default=None,
                   help="cProfile the measured pairs, sorted so (wall time, inflated)")
    asyncio.run(measure(p.parse_args(argv)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
