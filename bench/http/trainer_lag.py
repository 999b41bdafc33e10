"""Does the trainer keep up with one app? trainerLag sampled while wrk rewards one app.

    python -m bench.http.trainer_lag --kind trees --actions 26 --seconds 180
    python -m bench.http.trainer_lag --kind auto --actions 10 --seconds 60   # a quick look
    python -m bench.http.trainer_lag --kind trees --seconds 180 --feed store --rate 2000

Starts the stack of ``bench.http.wrk`` (redis-server, ``grove trainer``, ``grove api``), creates
one app of ``--kind`` (its defaults) with ``--actions`` actions, and runs wrk's ``reward``
workload on it (decide and reward alternating on ``--conns`` connections: every decision is
rewarded: 1.0 for the action ``ad<floor(f0 * actions)>``, else 1 in 10) for ``--seconds``.
Meanwhile the app's status (``GET /apps/{app}``) is read every ``--every`` seconds: rewards
accepted, events learned, ``trainerLag`` (events accepted, not yet in the served snapshot) and
``trainerLagSeconds`` (the oldest one's age). Then it waits for the lag to reach 0.

``--feed store --rate R``: the trainer at a given rate when the API is not the bottleneck (on
this 2-core machine one API process tops out near 1,000 decided and rewarded events/s). No
HTTP: a thread of this script makes the API's own Redis writes, ``Store.record_decisions``
(batches of what is due, paced to ``R`` events/s) and one ``Store.reward`` per decision (the
same scripts, keys and records as the API's; reward rule as wrk's), so the trainer reads the
same stream it reads behind the API. The decisions are drawn uniformly (propensity 1/K, a
uniform logging policy: the trainer learns from any logging policy alike); what is not in the
run is the API's HTTP, JSON and deciding. ``--articles``: the events are the article stream's
(``bench.policies.articles``: a new day of 30 articles every 2,000 events, each request
offering 10 with their features, rewarded at the article's read rate), stored with the
offered actions and their features as a Personalizer rank stores them.

Prints the rewards/s the API accepted, the events/s the trainer learned, the CPU each process
spent per event learned (the trainer's: its pace on a core of its own), and the lag's maximum
and percentiles over the samples (the issue's target: under 5 s at 2,000 rewards/s for one
app), and the refits the trainer installed (from its log: how many, and how long each took
from its start to its installation); ``--json`` keeps every sample, ``--plot`` draws lag and
rates over time (PNG).

``--busy N``: N processes spin on a core each while the load runs, at the trainer's priority
(a machine shared with other work): what the trainer keeps up with when it cannot have a core
for its refits.
Figures: bench/http/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

from bench.http.wrk import Bench, _wrk_env, cpu_seconds, run_wrk


def sample(bench: Bench, app: str, t0: float) -> dict:
    s = bench.status(app)
    return {"t": time.monotonic() - t0, "rewarded": s["stats"].get("rewarded", 0),
            "learned": s["eventsLearned"], "lag": s["trainerLag"],
            "lag_seconds": s["trainerLagSeconds"]}


def _articles(stream, rng: np.random.Generator, first: int, due: int, run: str, version: int):
    """``due`` decisions of the article ``stream`` (``bench.policies.articles.Stream``) from
    event ``first`` on: each among the request's 10 articles with their features, drawn
    uniformly, and its reward, drawn at the article's read rate."""
    from service.records import NewDecision

    decisions, rewards = [], []
    for t in range(first, first + due):
        x, offered, rates = stream.request(t)
        action = offered[int(rng.integers(len(offered)))]
        decisions.append(NewDecision(f"{run}-{t}", x, action, 1.0 / len(offered), version,
                                     offered=tuple(offered),
                                     action_features={a: stream.features[a] for a in offered}))
        rewards.append(float(rng.random() < rates[action]))
    return decisions, rewards


def feed_store(redis_url: str, app: str, actions: int, rate: float, seconds: float,
               articles: bool = False) -> dict:
    """Record decisions and reward each of them through ``Store`` at ``rate`` events/s for
    ``seconds`` (see the module doc); the events sent and this thread's CPU seconds.
    ``articles``: the article stream's requests instead, each with its actions' features."""
    from service.records import NewDecision
    from service.redis_client import connect
    from service.settings import Settings
    from service.store import Store

    settings = Settings(redis_url=redis_url)
    store = Store(connect(settings), settings)
    config, version = store.get_app_and_version(app)
    rng = np.random.default_rng(0)
    run, sites, sent = uuid.uuid4().hex[:10], "abcde", 0
    if articles:
        from bench.policies.articles import Stream

        stream = Stream(0, 2000, 30, 10)
    cpu0, t0 = time.thread_time(), time.monotonic()
    while (now := time.monotonic() - t0) < seconds:
        due = min(int(rate * now) - sent, 1000)
        if due <= 0:
            time.sleep(0.002)
            continue
        if articles:
            decisions, rewards = _articles(stream, rng, sent, due, run, version)
            store.record_decisions(config, decisions)
            for d, reward in zip(decisions, rewards, strict=True):
                store.reward(config, d.event_id, reward)
            sent += due
            continue
        f, site = rng.random((due, 4)), rng.integers(len(sites), size=due)
        chosen, lucky = rng.integers(actions, size=due), rng.random(due) < 0.1
        decisions = [NewDecision(f"{run}-{sent + i}", {"f0": round(f[i, 0], 5),
                                                        "f1": round(f[i, 1], 5),
                                                        "f2": round(f[i, 2], 5),
                                                        "f3": round(f[i, 3], 5),
                                                        "site": sites[site[i]]},
                                 f"ad{chosen[i]}", 1.0 / actions, version)
                     for i in range(due)]
        store.record_decisions(config, decisions)
        for i, d in enumerate(decisions):  # wrk's rule: 1 for ad<floor(f0 K)>, else 1 in 10
            best = int(f[i, 0] * actions) == chosen[i]
            store.reward(config, d.event_id, 1.0 if best or lucky[i] else 0.0)
        sent += due
    return {"sent": sent, "feeder_cpu_s": time.thread_time() - cpu0,
            "rps": sent / (time.monotonic() - t0), "errors": 0}


def refits(trainer_log: Path) -> dict:
    """The refits the trainer installed, and how long each took from its start (on the clock:
    the refit thread runs nicer than the learning loop, so a busy machine makes it wait)."""
    took = [float(m.group(1)) for m in re.finditer(r"refit installed ([0-9.]+) s after",
                                                   trainer_log.read_text())]
    return {"refits": len(took),
            "refit_seconds_p50": float(np.median(took)) if took else None,
            "refit_seconds_max": max(took, default=None)}


def summary(samples: list[dict], load_seconds: float) -> dict:
    """Rates over the load and the lag's distribution over the samples taken during it."""
    during = [s for s in samples if s["t"] <= load_seconds]
    first, last = during[0], during[-1]
    span = last["t"] - first["t"]
    lag_s = np.array([s["lag_seconds"] for s in during])
    return {
        "rewards_per_s": (last["rewarded"] - first["rewarded"]) / span,
        "learned_per_s": (last["learned"] - first["learned"]) / span,
        "lag_seconds_max": float(lag_s.max()),
        "lag_seconds_p50": float(np.percentile(lag_s, 50)),
        "lag_seconds_p99": float(np.percentile(lag_s, 99)),
        "lag_events_max": max(s["lag"] for s in during),
        "samples": len(during),
    }


def plot(samples: list[dict], load_seconds: float, title: str, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t = np.array([s["t"] for s in samples])
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    top.plot(t, [s["lag_seconds"] for s in samples], label="trainerLagSeconds")
    top.axhline(5.0, color="grey", linestyle="--", linewidth=0.8, label="target 5 s")
    top.set_ylabel("lag (s)")
    top.legend(loc="upper left")
    # rates over 5 s (events learned move once per published snapshot, about once a second)
    edges = np.searchsorted(t, np.arange(t[0], t[-1] + 1e-9, 5.0))
    for key, label in (("rewarded", "rewards accepted"), ("learned", "events learned")):
        v = np.array([s[key] for s in samples], float)[edges]
        bottom.step(t[edges][1:], np.diff(v) / np.diff(t[edges]), where="pre",
                    label=f"{label} /s (5 s)")
    bottom.axvline(load_seconds, color="grey", linestyle=":", linewidth=0.8)
    bottom.set_xlabel("seconds since the load started")
    bottom.set_ylabel("per second")
    bottom.legend(loc="lower left")
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kind", default="trees", help="the app's policy kind (its defaults)")
    p.add_argument("--actions", type=int, default=26)
    p.add_argument("--conns", type=int, default=16)
    p.add_argument("--seconds", type=float, default=180.0, help="of load")
    p.add_argument("--every", type=float, default=0.5, help="seconds between status reads")
    p.add_argument("--json", default=None, help="write the samples and the summary here")
    p.add_argument("--plot", default=None, help="PNG of lag and rates over time")
    p.add_argument("--feed", choices=("wrk", "store"), default="wrk",
                   help="wrk over HTTP, or the API's Redis writes from this script")
    p.add_argument("--rate", type=float, default=2000.0, help="events/s with --feed store")
    p.add_argument("--busy", type=int, default=0, help="processes spinning during the load")
    p.add_argument("--articles", action="store_true",
                   help="with --feed store: the article stream (bench.policies.articles), "
                        "each request's 10 articles with their features, as Personalizer sends")
    args = p.parse_args(argv)

    bench = Bench(Path(tempfile.mkdtemp(prefix="grove-bench-lag-")), 100, kind=args.kind)
    spinners: list[subprocess.Popen] = []
    try:
        app, key = bench.create_app(args.actions)
        # numba compiles, the first snapshot loads (a run of its own: new eventIds)
        run_wrk(bench.grove, _wrk_env(app, key, "reward", args.actions), 4, 3)
        env = _wrk_env(app, key, "reward", args.actions)
        figures: dict = {}
        if args.feed == "wrk":
            load = threading.Thread(
                target=lambda: figures.update(run_wrk(bench.grove, env, args.conns,
                                                      args.seconds)))
        else:
            load = threading.Thread(target=lambda: figures.update(
                feed_store(bench.redis.url, app, args.actions, args.rate, args.seconds,
                           args.articles)))
        pids = bench.pids("grove", args.actions)
        cpu0 = {k: cpu_seconds(pid) for k, pid in pids.items()}
        spinners += [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                     for _ in range(args.busy)]
        t0 = time.monotonic()
        load.start()
        samples = []
        while load.is_alive() or (samples and samples[-1]["lag"] > 0
                                  and samples[-1]["t"] < args.seconds + 120):
            samples.append(sample(bench, app, t0))
            time.sleep(args.every)
            if not load.is_alive():
                for spinner in spinners:
                    spinner.kill()
        load.join()
        cpu = {k: cpu_seconds(pid) - cpu0[k] for k, pid in pids.items()}
    finally:
        for spinner in spinners:
            spinner.kill()
        bench.stop()

    result = {"kind": args.kind, "actions": args.actions, "feed": args.feed,
              "articles": args.articles,
              **({"conns": args.conns} if args.feed == "wrk" else
                 {"rate": args.rate, "feeder_cpu_s": figures.get("feeder_cpu_s")}),
              "seconds": args.seconds, "busy": args.busy, "requests_per_s": figures.get("rps"),
              "errors": figures.get("errors"), **summary(samples, args.seconds),
              "caught_up_after_s": samples[-1]["t"] - args.seconds,
              # CPU of each process per event learned; the trainer's is its pace on one core
              **{f"cpu_us_per_event_{k}": v * 1e6 / max(1, samples[-1]["learned"] -
                                                        samples[0]["learned"])
                 for k, v in cpu.items()},
              **refits(bench.work / "trainer.log"),
              "load_average": os.getloadavg()[0]}
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({**result, "samples": samples}, indent=1))
    if args.plot:
        load = "wrk's reward load" if args.feed == "wrk" else "the API's writes, no HTTP"
        plot(samples, args.seconds, f"{args.kind}, {args.actions} actions: trainer lag under "
             f"{load} ({result['rewards_per_s']:.0f} rewards/s)", Path(args.plot))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
