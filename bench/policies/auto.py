"""The auto policy against its own candidates, and the trainer's throughput with three candidates.

Two benchmarks; figures go to ``bench/policies/AUTO.md``.

``quality``: the Bandit Forest paper's protocol (``bench/common/streams.py``: a labelled data set
recoded into binary variables, rows shuffled and replayed, each variable flipped with probability
0.05, reward 1 when the action is the label). ``auto`` is ``make_policy("auto")`` with its
default candidates (trees and linucb since the twelfth session, bandit-forest also before it;
trees serves first); each candidate also plays
the stream alone (``make_policy(kind)`` with the same default params). Every policy decides and
learns one event at a time through ``decide`` / ``learn_one``, on dict contexts, as
``bench/policies/compare.py`` does for ``trees``. Per run: average reward, which candidate
serves at the end, the switches (event, from, to), and each candidate's final figures.

    python -m bench.policies.auto quality --data letter,shuttle,adult --steps 100000 --seeds 0,1,2

``throughput``: one app, events learned per second by :class:`service.trainer.Trainer` against a
real redis-server (started here), for ``auto`` with its default candidates and for each
candidate alone. Rewarded events are appended to the app's stream through the store (as
``POST /reward`` does), then the trainer is stepped until it has learned them all; the time is
the trainer's (reading the stream, learning, publishing), the events are a five-action problem
with ten-feature contexts (not a paper stream: the trainer sees the service's event shape).

    python -m bench.policies.auto throughput --events 20000 --repeats 2

Choices: the single-candidate runs use the same seed as the auto run (candidates inside auto get
seeds derived from it, so "auto's linucb" and "linucb alone" do not share draws); the best single
candidate is the best mean over seeds per data set.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from bench.common.paths import OUT

KINDS = ("auto", "trees", "linucb", "bandit-forest")


# -- quality ---------------------------------------------------------------------------------------

def play(data_name: str, kind: str, steps: int, seed: int, out: Path, every: int = 1000,
         params: dict | None = None, tag: str = "") -> dict:
    """One run of ``kind`` (with ``params``, stored as ``kind+tag``) on the paper stream; writes
    and returns its JSON record."""
    from tqdm import tqdm

    from bench.common.streams import BanditStream, load
    from online.policies.registry import make_policy

    data = load(data_name)
    stream = BanditStream(data, noise=0.05, seed=seed)
    policy = make_policy(kind, actions=data.actions, seed=seed, **(params or {}))
    name = kind + (f"+{tag}" if tag else "")
    actions = list(data.actions)
    decide, learn = policy.decide, policy.learn_one
    total, cum, served = 0.0, [], []
    started = time.process_time()
    with tqdm(total=steps, desc=f"{data_name}/s{seed}/{name}", unit="ev", mininterval=30) as bar:
        for t, (x, _, label) in enumerate(stream.steps(steps)):
            d = decide(x)
            r = 1.0 if d.action == actions[label] else 0.0
            learn(x, d.action, r, d.probability)
            total += r
            if (t + 1) % every == 0:
                cum.append(total)
                served.append(getattr(policy, "serving", kind))
                bar.update(every)
    cpu = time.process_time() - started
    result = {"data": data_name, "policy": name, "params": params or {}, "seed": seed,
              "steps": steps, "every": every,
              "n_actions": len(actions), "mean_reward": total / steps, "cpu_seconds": cpu,
              "events_per_cpu_s": steps / cpu, "cum_reward": cum}
    if kind == "auto":
        result["serving"] = policy.serving
        result["served"] = served
        result["switches"] = [{k: s[k] for k in ("at", "from", "to")} for s in policy.switches]
        result["candidates"] = [{k: e[k] for k in ("name", "estimate", "lower", "upper", "events",
                                                   "serving")}
                                for e in policy.evaluations()]
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{data_name}_s{seed}_{name}.json").write_text(json.dumps(result))
    return result


def _runs(out: Path, data_name: str) -> dict[str, dict[int, dict]]:
    runs: dict[str, dict[int, dict]] = {}
    for path in sorted(out.glob(f"{data_name}_s*_*.json")):
        r = json.loads(path.read_text())
        runs.setdefault(r["policy"], {})[r["seed"]] = r
    return runs


def _switches(switches: list[dict], most: int = 3) -> str:
    if not switches:
        return "none"
    text = ", ".join(f"{w['at']:,}: {w['from']} -> {w['to']}" for w in switches[:most])
    return text + (f" ... ({len(switches):,} switches)" if len(switches) > most else "")


def quality_table(out: Path, data_names: list[str]) -> str:
    """Markdown: per data set and auto variant, the mean reward over the seeds every policy
    ran, the best single candidate's, the gap, and which candidate serves at the end."""
    lines = ["| data | policy | mean reward | best single (mean reward) | policy - best | "
             "serving at the end | switches (event: from -> to) | seeds |",
             "|---|---|---:|---|---:|---|---|---|"]
    for data_name in data_names:
        runs = _runs(out, data_name)
        singles = [k for k in KINDS[1:] if k in runs]
        for policy in sorted(p for p in runs if p.split("+")[0] == "auto"):
            seeds = sorted(set(runs[policy]).intersection(*(set(runs[k]) for k in singles)))
            if not seeds or len(singles) < len(KINDS) - 1:
                continue
            mean = {k: float(np.mean([runs[k][s]["mean_reward"] for s in seeds]))
                    for k in [policy, *singles]}
            best = max(singles, key=lambda k: mean[k])
            serving = ", ".join(runs[policy][s]["serving"] for s in seeds)
            switches = "; ".join(f"s{s}: {_switches(runs[policy][s]['switches'])}"
                                 for s in seeds)
            lines.append(f"| {data_name} | {policy} | {mean[policy]:.4f} | {best} "
                         f"({mean[best]:.4f}) | {mean[policy] - mean[best]:+.4f} | {serving} | "
                         f"{switches} | {','.join(map(str, seeds))} |")
    lines += ["", "| data | seed | " + " | ".join(KINDS) + " |",
              "|---|---|" + "---:|" * len(KINDS)]
    for data_name in data_names:
        runs = _runs(out, data_name)
        for seed in sorted({s for r in runs.values() for s in r}):
            cells = [f"{runs[k][seed]['mean_reward']:.4f}" if seed in runs.get(k, {}) else ""
                     for k in KINDS]
            lines.append(f"| {data_name} | {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# -- throughput ------------------------------------------------------------------------------------

def throughput(policy: dict, events: int, redis_url: str, seed: int = 0, batch: int = 1000
               ) -> dict:
    """Events/s the trainer learns for one app of ``policy`` ({"kind", "params"}).

    The decisions are recorded and rewarded through the store before the clock starts (the
    API's work); the clock runs while the trainer reads the app's stream, learns (refits of the
    tree policy in its refit thread, waited for at the end) and publishes its last snapshot.
    """
    import redis

    from service import codec
    from service.models import model_kind
    from service.records import Action, Aggregation, AppConfig, NewDecision
    from service.settings import Settings
    from service.store import Store
    from service.trainer import Trainer

    client = redis.Redis.from_url(redis_url)
    client.flushall()
    settings = Settings(redis_url=redis_url, admin_key="bench", trainer_lease=30.0,
                        snapshot_interval=1.0, trainer_poll=0.01)
    store = Store(client, settings)
    actions = [f"a{j}" for j in range(5)]
    kind = model_kind(policy["kind"])
    params = {**policy.get("params", {}), "seed": seed}
    now = time.time()
    config = AppConfig(name="bench", uid=f"bench-{seed}", policy_kind=kind.name,
                       policy_params=params, actions=tuple(Action(a) for a in actions),
                       reward_wait_time=3600.0, default_reward=0.0, reward_range=(0.0, 1.0),
                       reward_aggregation=Aggregation.earliest, api_key_hash="-",
                       created_at=now, updated_at=now)
    learner = kind.new(dict(params), actions)
    store.create_app(config, codec.encode(kind.dump(learner)),
                     codec.encode(kind.dump_for_serving(learner)))
    rng = np.random.default_rng(seed)
    for start in range(0, events, batch):
        decisions, rewards = [], []
        for i in range(start, min(events, start + batch)):
            favorite = actions[int(rng.integers(5))]
            x = {"favorite": favorite, "device": ["pc", "phone", "tablet"][int(rng.integers(3))],
                 **{f"f{j}": round(float(v), 3) for j, v in enumerate(rng.random(8))}}
            a = actions[int(rng.integers(5))]
            decisions.append(NewDecision(f"e{i}", x, a, 0.2, 0))
            rewards.append(float(a == favorite))
        store.record_decisions(config, decisions)
        for d, r in zip(decisions, rewards):
            store.reward(config, d.event_id, r)
    trainer = Trainer(client, settings, trainer_id="bench")
    wall, cpu = time.perf_counter(), time.process_time()
    trainer.refresh_leases()
    learned = 0
    while learned < events:
        if not trainer.step():
            trainer.refresh_leases()
        owned = trainer.owned.get("bench")
        learned = 0 if owned is None else owned.events_learned + owned.events_rejected
    trainer.wait_refits()
    trainer.maybe_publish("bench", force=True)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    owned = trainer.owned["bench"]
    out = {"policy": policy, "events": events, "learned": owned.events_learned,
           "rejected": owned.events_rejected, "seconds": wall, "cpu_seconds": cpu,
           "events_per_s": events / wall}
    client.close()
    return out


#: the trainer throughput benchmark's apps: auto with its default candidates, and each kind
#: alone with the same (default) params
THROUGHPUT_POLICIES = {
    "auto": {"kind": "auto"},
    "trees": {"kind": "trees"},
    "linucb": {"kind": "linucb"},
    "bandit-forest": {"kind": "bandit-forest"},
}


def run_throughput(names: list[str], events: int, repeats: int, out: Path) -> list[dict]:
    import tempfile

    from service.redis_server import RedisServer

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        server = RedisServer(Path(tmp), appendonly=False).start()
        try:
            for name in names:
                for r in range(repeats):
                    result = {"name": name, "repeat": r,
                              **throughput(THROUGHPUT_POLICIES[name], events, server.url, seed=r)}
                    print(f"{name} #{r}: {result['events_per_s']:,.0f} events/s "
                          f"({result['seconds']:.2f} s wall, {result['cpu_seconds']:.2f} s CPU, "
                          f"{result['rejected']} rejected)", flush=True)
                    results.append(result)
        finally:
            server.stop()
    out.mkdir(parents=True, exist_ok=True)
    (out / "throughput.json").write_text(json.dumps(results, indent=1))
    return results


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="bench", required=True)
    q = sub.add_parser("quality")
    q.add_argument("--data", default="letter,shuttle,adult")
    q.add_argument("--steps", type=int, default=100_000)
    q.add_argument("--seeds", default="0,1,2")
    q.add_argument("--policies", default=",".join(KINDS))
    q.add_argument("--out", type=Path, default=OUT / "policies_auto")
    q.add_argument("--report-only", action="store_true")
    q.add_argument("--auto-params", type=json.loads, default={},
                   help='JSON params of auto, e.g. {"floor": 0.01} (with --tag)')
    q.add_argument("--tag", default="", help="variant name: auto runs stored as auto+<tag>")
    t = sub.add_parser("throughput")
    t.add_argument("--events", type=int, default=20_000)
    t.add_argument("--policies", default=",".join(THROUGHPUT_POLICIES))
    t.add_argument("--repeats", type=int, default=1)
    t.add_argument("--out", type=Path, default=OUT / "policies_auto")
    args = ap.parse_args(argv)
    if args.bench == "throughput":
        results = run_throughput(args.policies.split(","), args.events, args.repeats, args.out)
        best = {}
        for r in results:
            best[r["name"]] = max(best.get(r["name"], 0.0), r["events_per_s"])
        if "auto" in best:
            for name, rate in best.items():
                if name != "auto":
                    print(f"auto / {name}: {best['auto'] / rate:.2f}")
        return
    if args.bench == "quality":
        data_names = args.data.split(",")
        if not args.report_only:
            for seed in map(int, args.seeds.split(",")):
                for data_name in data_names:
                    for kind in args.policies.split(","):
                        tag = args.tag if kind == "auto" else ""
                        name = kind + (f"+{tag}" if tag else "")
                        path = args.out / f"{data_name}_s{seed}_{name}.json"
                        if path.exists() and json.loads(path.read_text())["steps"] == args.steps:
                            continue  # resumable
                        r = play(data_name, kind, args.steps, seed, args.out,
                                 params=args.auto_params if kind == "auto" else None, tag=tag)
                        print(f"{data_name} s{seed} {name}: {r['mean_reward']:.4f} "
                              f"({r['events_per_cpu_s']:,.0f} events/CPU s)"
                              + (f" serving {r['serving']}" if kind == "auto" else ""),
                              flush=True)
        print(quality_table(args.out, data_names))


if __name__ == "__main__":
    main()
