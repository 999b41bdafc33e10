"""Articles with their own features, new every day (a Personalizer app's requests): the kinds
and VW side by side.

Every ``--day`` events a new day brings ``--pool`` new articles; each request offers
``--offered`` of the day's, drawn at random, with each article's features (Personalizer's
``actions[].features``): ``topic`` (one of 8), ``source`` (one of 6) and ``words`` (a number,
in hundreds). The context is a user's ``segment`` (one of 20, each with a favourite topic
drawn once), ``device`` and ``hour``. An article is read with probability

    0.05 + 0.20 [topic = the segment's favourite] + 0.02 source effect + its own quality

(the source effect in {-1, ..., 1} per source, the quality uniform in +-0.02 per article,
neither sent). The stream was written for this bench, not fitted to any policy: what it asks
is what an article feed asks, to score an article never played from what its features earned
with users like this one.

Players, each learning every event (the kinds in batches of 256, as the service's trainer;
VW as it goes), all given the articles' features: ``adf``, ``adf`` without them (ids only),
``trees`` and ``linucb`` (which learn per id and ignore them), ``auto`` (the default kind:
its ``adf`` candidate joins with the first features), and VW ``--cb_explore_adf --squarecb -q
sa`` with the features in its action namespace; and Personalizer's default learning settings
(``--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q ::``) run by VW
(``vw_personalizer``) and by ``adf`` with the parameters Grove's Personalizer API maps them
onto (``adf_personalizer``: ``service/personalizer/learning_settings.py``); the same with
``--cb_type ips`` (``vw_personalizer_ips``, ``adf_personalizer_ips``) and ``--cb_type dr``
(``vw_personalizer_dr``, ``adf_personalizer_dr``). Printed: each
player's mean reward over the whole run and its second half, and the best and a uniform
player's, in expectation.

    python -m bench.policies.articles --events 40000 --seeds 0,1,2 \
        --out bench/policies/results/articles.jsonl --plot bench/policies/plots/articles.png
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from tqdm import tqdm

import online
from bench.common.paths import OUT

TOPICS, SOURCES, SEGMENTS = 8, 6, 20
BATCH = 256  # events per learn_many (the trainer's batches; --batch)
KINDS = ("adf", "adf_ids", "trees", "linucb", "auto", "vw_squarecb")
#: Personalizer's default learning settings, and what Grove's Personalizer API maps them onto
PERSONALIZER = "--cb_explore_adf --epsilon 0.2 --power_t 0 -l 0.001 --cb_type mtr -q ::"
PERSONALIZER_ADF = {"epsilon": 0.2, "power_t": 0, "learning_rate": 0.001, "cb_type": "mtr",
                    "interactions": ["::"]}
#: the same with VW's inverse propensity estimates (microsoft/learning-loop's sample settings)
PERSONALIZER_IPS = PERSONALIZER.replace("--cb_type mtr", "--cb_type ips")
#: and with VW's doubly robust estimates
PERSONALIZER_DR = PERSONALIZER.replace("--cb_type mtr", "--cb_type dr")


class Stream:
    """The days' articles, their features and read rates, and the users (see the module doc)."""

    def __init__(self, seed: int, day: int, pool: int, offered: int):
        self.rng = np.random.default_rng(seed)
        fixed = np.random.default_rng(10_000 + seed)
        self.favourite = fixed.integers(TOPICS, size=SEGMENTS)
        self.source_effect = fixed.integers(-1, 2, size=SOURCES)
        self.day, self.pool, self.offered = day, pool, offered
        self._today = -1

    def _new_day(self, today: int) -> None:
        rng = self.rng
        self._today = today
        self.topic = rng.integers(TOPICS, size=self.pool)
        self.source = rng.integers(SOURCES, size=self.pool)
        self.words = np.round(rng.lognormal(1.5, 0.5, size=self.pool), 1)
        self.quality = rng.uniform(-0.02, 0.02, size=self.pool)
        self.ids = [f"d{today}-{j}" for j in range(self.pool)]
        self.features = {a: {"topic": f"t{self.topic[j]}", "source": f"s{self.source[j]}",
                             "words": float(self.words[j])} for j, a in enumerate(self.ids)}

    def request(self, t: int):
        """The context, the offered articles (ids), and each one's read rate."""
        if t // self.day != self._today:
            self._new_day(t // self.day)
        rng = self.rng
        segment = int(rng.integers(SEGMENTS))
        x = {"segment": f"g{segment}", "device": "mobile" if rng.random() < 0.6 else "desktop",
             "hour": float(rng.integers(24))}
        js = rng.choice(self.pool, self.offered, replace=False)
        rates = (0.05 + 0.20 * (self.topic[js] == self.favourite[segment])
                 + 0.02 * self.source_effect[self.source[js]] + self.quality[js])
        return x, [self.ids[j] for j in js], dict(zip((self.ids[j] for j in js), rates))


class KindPlayer:
    def __init__(self, kind: str, seed: int, features: bool, params: dict | None = None):
        self.policy = online.make_policy(kind, seed=seed, **(params or {}))
        self.features = features
        self.batch: list = []

    def decide(self, x, actions, features):
        given = features if self.features else None
        d = self.policy.decide(x, actions=actions, action_features=given)
        return d.action, d.probability

    def learn(self, x, actions, features, action, reward, probability):
        self.batch.append((x, action, reward, probability, actions,
                           features if self.features else None))
        if len(self.batch) >= BATCH:
            self.policy.learn_many(self.batch)
            self.batch = []


class VWPlayer:
    def __init__(self, seed: int, arguments: str = "--cb_explore_adf --squarecb -q sa"):
        import vowpalwabbit

        self.vw = vowpalwabbit.Workspace(f"{arguments} --random_seed {seed} --quiet")
        self.rng = np.random.default_rng(seed)
        self.last: tuple = ()

    @staticmethod
    def _lines(x, actions, features):
        shared = "shared |s " + " ".join(
            f"{k}={v}" if isinstance(v, str) else f"{k}:{v}" for k, v in x.items())
        lines = [f"|a id={a} topic={features[a]['topic']} source={features[a]['source']} "
                 f"words:{features[a]['words']}" for a in actions]
        return [shared, *lines]

    def decide(self, x, actions, features):
        example = self._lines(x, actions, features)
        pmf = np.asarray(self.vw.predict(example), float)
        j = int(min(np.searchsorted(np.cumsum(pmf), self.rng.random() * pmf.sum(),
                                    side="right"), len(pmf) - 1))
        self.last = (example, j, float(pmf[j] / pmf.sum()))
        return actions[j], self.last[2]

    def learn(self, x, actions, features, action, reward, probability):
        example, j, p = self.last
        example[j + 1] = f"0:{-reward}:{p} {example[j + 1]}"
        self.vw.learn(example)


def player(name: str, seed: int):
    if name == "vw_squarecb":
        return VWPlayer(seed)
    if name == "vw_personalizer":
        return VWPlayer(seed, PERSONALIZER)
    if name == "adf_ids":
        return KindPlayer("adf", seed, features=False)
    if name == "adf_personalizer":
        return KindPlayer("adf", seed, features=True, params=PERSONALIZER_ADF)
    if name == "vw_personalizer_ips":
        return VWPlayer(seed, PERSONALIZER_IPS)
    if name == "adf_personalizer_ips":
        return KindPlayer("adf", seed, features=True, params={**PERSONALIZER_ADF,
                                                              "cb_type": "ips"})
    if name == "vw_personalizer_dr":
        return VWPlayer(seed, PERSONALIZER_DR)
    if name == "adf_personalizer_dr":
        return KindPlayer("adf", seed, features=True, params={**PERSONALIZER_ADF,
                                                              "cb_type": "dr"})
    return KindPlayer(name, seed, features=True)


def run(name: str, seed: int, events: int, day: int, pool: int, offered: int) -> dict:
    stream = Stream(seed, day, pool, offered)
    p = player(name, seed)
    rewards = np.empty(events)
    best = uniform = 0.0
    cpu = time.process_time()
    for t in tqdm(range(events), desc=f"{name}/s{seed}", unit="ev", mininterval=10):
        x, actions, rates = stream.request(t)
        features = {a: stream.features[a] for a in actions}
        action, probability = p.decide(x, actions, features)
        reward = float(stream.rng.random() < rates[action])
        rewards[t] = reward
        best += max(rates.values())
        uniform += sum(rates.values()) / len(rates)
        p.learn(x, actions, features, action, reward, probability)
    half = events // 2
    return {"player": name, "seed": seed, "events": events, "day": day, "pool": pool,
            "offered": offered, "mean": float(rewards.mean()),
            "second_half": float(rewards[half:].mean()), "best": best / events,
            "uniform": uniform / events, "cpu_s": time.process_time() - cpu,
            "curve": [round(float(rewards[i:i + day].mean()), 4)
                      for i in range(0, events - day + 1, day)]}


def plot(results: list[dict], path: str) -> None:
    """Mean reward per day (of ``day`` events), each player's mean over the seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for name in dict.fromkeys(r["player"] for r in results):
        curves = np.array([r["curve"] for r in results if r["player"] == name])
        day = next(r["day"] for r in results if r["player"] == name)
        ax.plot(np.arange(1, curves.shape[1] + 1) * day, curves.mean(axis=0), label=name)
    best = np.mean([r["best"] for r in results])
    ax.axhline(best, color="grey", linestyle=":", label="best article, in expectation")
    ax.set_xlabel(f"events (a new day of articles every {results[0]['day']})")
    ax.set_ylabel("mean reward per day")
    ax.legend(fontsize=8)
    seeds = sorted({r["seed"] for r in results})
    ax.set_title(f"Articles with their features, new every day (seeds {seeds})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    global BATCH
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--events", type=int, default=40_000)
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--day", type=int, default=2_000)
    ap.add_argument("--pool", type=int, default=30)
    ap.add_argument("--offered", type=int, default=10)
    ap.add_argument("--players", default=",".join(KINDS))
    ap.add_argument("--batch", type=int, default=BATCH, help="events per learn_many")
    ap.add_argument("--out", default=str(OUT / "articles.jsonl"))
    ap.add_argument("--plot", help="draw the players' curves of --out into this PNG")
    args = ap.parse_args(argv)
    BATCH = args.batch
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for seed in map(int, args.seeds.split(",")):
        for name in args.players.split(","):
            result = run(name, seed, args.events, args.day, args.pool, args.offered)
            print(f"{name:12s} seed {seed}: mean {result['mean']:.4f}, second half "
                  f"{result['second_half']:.4f} (best {result['best']:.4f}, uniform "
                  f"{result['uniform']:.4f}), {result['cpu_s']:.1f} CPU s", flush=True)
            with out.open("a") as f:
                f.write(json.dumps(result) + "\n")
    if args.plot:
        plot([json.loads(line) for line in out.read_text().splitlines()], args.plot)


if __name__ == "__main__":
    main()
