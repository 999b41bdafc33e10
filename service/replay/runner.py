"""The replay loop: every policy sees the same events, in the same order.

Supervised streams give full information (the reward of every action is known: 1 for the label),
so each policy's realized reward is recorded, and also its *expected* reward given its decision
probabilities, pi(label | x), a lower-variance figure of the same policy.

Logged feedback only tells the reward of the logged action: each policy decides on the logged
context; the replay method (Li et al. 2011) keeps the events where it picks the logged action
and learns only from them; pi(a_i | x_i) and sum_a pi(a | x_i) q(x_i, a) are recorded for the
IPS, SNIPS and DR estimates of ``online.evaluation``.

Every ``sync_every`` steps each policy's ``sync()`` runs (the in-process forest learns its
buffered events; the HTTP one waits for the service's snapshot), so that both drivers decide
each block with a model that has learned exactly the events of the previous blocks.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

from online.evaluation import RewardModel
from service.replay.policies import Policy
from service.replay.sources import LoggedFeedback, SupervisedStream


@dataclass
class Trace:
    """What one policy did on the run, step by step."""

    label: str
    rewards: np.ndarray  # realized reward (logged: the logged reward when matched, else 0)
    expected: np.ndarray | None = None  # supervised: pi(label | x)
    matched: np.ndarray | None = None  # logged: the policy chose the logged action
    target: np.ndarray | None = None  # logged: pi(a_i | x_i)
    q_policy: np.ndarray | None = None  # logged: sum_a pi(a | x_i) q(x_i, a)
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    fixed_action: str | None = None
    #: with ``record=True``: each step's (action, probabilities) of a live policy
    choices: list[tuple[str, dict]] | None = None


@dataclass
class RunResult:
    source: dict
    traces: list[Trace]
    labels: np.ndarray | None = None  # supervised: label index per step
    logged: LoggedFeedback | None = None
    q_logged: np.ndarray | None = None  # logged: q(x_i, a_i)
    seconds: float = 0.0


def _progress(total: int, enabled: bool):
    return tqdm(total=total, desc="replay", unit="ev", file=sys.stderr, disable=not enabled,
                mininterval=0.5, dynamic_ncols=True)


def _sync(policies: list[Policy], seconds: list[float]) -> None:
    for k, policy in enumerate(policies):
        start = time.perf_counter()
        policy.sync()
        seconds[k] += time.perf_counter() - start


def run_supervised(stream: SupervisedStream, policies: list[Policy], best_fixed: list[str],
                   steps: int, sync_every: int, progress: bool = True, record: bool = False
                   ) -> RunResult:
    actions = list(stream.actions)
    choices = [[] if record else None for _ in policies]
    rewards = np.zeros((len(policies), steps))
    expected = np.zeros((len(policies), steps))
    seconds = [0.0] * len(policies)
    began = time.perf_counter()
    with _progress(steps, progress) as bar:
        for t, (context, label) in enumerate(stream.steps(steps)):
            for k, policy in enumerate(policies):
                start = time.perf_counter()
                choice = policy.decide(context, actions)
                reward = 1.0 if choice.action == label else 0.0
                policy.learn(choice, context, reward)
                seconds[k] += time.perf_counter() - start
                rewards[k, t] = reward
                expected[k, t] = choice.probabilities.get(label, 0.0)
                if record:
                    choices[k].append((choice.action, choice.probabilities))
            if sync_every > 0 and (t + 1) % sync_every == 0:
                _sync(policies, seconds)
            bar.update(1)
    traces = [Trace(p.label, rewards[k], expected[k], seconds=seconds[k],
                    latencies=list(p.latencies), choices=choices[k])
              for k, p in enumerate(policies)]
    labels = stream.labels(steps)
    if best_fixed:  # the most frequent label of the run, known only in hindsight
        counts = np.bincount(labels, minlength=len(actions))
        best = int(counts.argmax())
        hit = (labels == best).astype(float)
        traces += [Trace(lbl, hit, hit.copy(), fixed_action=actions[best]) for lbl in best_fixed]
    return RunResult(stream.describe(steps), traces, labels=labels,
                     seconds=time.perf_counter() - began)


def run_logged(logs: LoggedFeedback, policies: list[Policy], best_fixed: list[str],
               sync_every: int, seed: int = 0, progress: bool = True, record: bool = False
               ) -> RunResult:
    n, actions = len(logs), list(logs.actions)
    choices = [[] if record else None for _ in policies]
    position = {a: j for j, a in enumerate(actions)}
    q = RewardModel(seed=seed).fit_predict(logs.contexts, logs.action_index, logs.rewards,
                                           len(actions))
    q_logged = q[np.arange(n), logs.action_index].astype(float)
    P = len(policies)
    rewards, matched = np.zeros((P, n)), np.zeros((P, n), dtype=bool)
    target, q_policy = np.zeros((P, n)), np.zeros((P, n))
    seconds = [0.0] * P
    began = time.perf_counter()
    with _progress(n, progress) as bar:
        for i, context in enumerate(logs.contexts):
            logged_action = actions[logs.action_index[i]]
            reward = float(logs.rewards[i])
            q_i = q[i]
            for k, policy in enumerate(policies):
                start = time.perf_counter()
                choice = policy.decide(context, actions)
                if choice.action == logged_action:
                    policy.learn(choice, context, reward)
                    matched[k, i] = True
                    rewards[k, i] = reward
                seconds[k] += time.perf_counter() - start
                pi = choice.probabilities
                if record:
                    choices[k].append((choice.action, pi))
                target[k, i] = pi.get(logged_action, 0.0)
                q_policy[k, i] = sum(p * float(q_i[position[a]]) for a, p in pi.items()
                                     if a in position)
            if sync_every > 0 and (i + 1) % sync_every == 0:
                _sync(policies, seconds)
            bar.update(1)
    traces = [Trace(p.label, rewards[k], matched=matched[k], target=target[k],
                    q_policy=q_policy[k], seconds=seconds[k], latencies=list(p.latencies),
                    choices=choices[k])
              for k, p in enumerate(policies)]
    if best_fixed:  # the action with the best self-normalized IPS value of the whole log
        w = 1.0 / logs.propensities
        num = np.bincount(logs.action_index, weights=w * logs.rewards, minlength=len(actions))
        den = np.bincount(logs.action_index, weights=w, minlength=len(actions))
        best = int(np.argmax(np.where(den > 0, num / np.maximum(den, 1e-300), -np.inf)))
        hit = logs.action_index == best
        for lbl in best_fixed:
            traces.append(Trace(lbl, np.where(hit, logs.rewards, 0.0), matched=hit.copy(),
                                target=hit.astype(float), q_policy=q[:, best].astype(float),
                                fixed_action=actions[best]))
    return RunResult(logs.describe(), traces, logged=logs, q_logged=q_logged,
                     seconds=time.perf_counter() - began)
