"""The replay's outputs: a JSON summary, a table, and a PNG of cumulative reward / regret.

Reference ("CTR lift vs the logging policy"): on logged feedback, the logging policy's own
average reward; on a supervised stream there is no logging policy, and the reference is a
uniformly random policy's expected reward, 1 / (number of actions). Lift = value / reference - 1.

The headline value of a policy is its average reward: on a supervised stream the mean realized
reward per step; on logged feedback the replay method's estimate (Li et al. 2011). Timing
(events/s, decide latency) lives under ``timing``: it is the only part of the summary that
changes between two runs with the same seed and driver.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from online.evaluation import doubly_robust, ips, mean_estimate, replay, snips
from service.replay.runner import RunResult, Trace


def _timing(trace: Trace, steps: int) -> dict:
    out = {"seconds": round(trace.seconds, 3),
           "events_per_s": round(steps / trace.seconds, 1) if trace.seconds > 0 else None}
    if trace.latencies:
        ms = np.asarray(trace.latencies) * 1000.0
        out["decide_ms_p50"] = round(float(np.percentile(ms, 50)), 3)
        out["decide_ms_p99"] = round(float(np.percentile(ms, 99)), 3)
    return out


def _lift(value: float, reference: float) -> float | None:
    if reference == 0 or not math.isfinite(value):
        return None
    return value / reference - 1.0


def _best_fixed_hits(labels: np.ndarray) -> np.ndarray:
    """Reward per step of the most frequent label of the run (the best fixed action)."""
    return (labels == np.bincount(labels).argmax()).astype(float)


def summarize(result: RunResult, policies: list[dict], run: dict) -> dict:
    """The JSON summary; ``policies`` describes each trace (label, kind, params, app)."""
    described = {p["label"]: p for p in policies}
    out = {"run": run, "source": result.source, "policies": []}
    if result.logged is None:
        steps = len(result.labels)
        reference = 1.0 / len(result.source["actions"])
        out["reference"] = {"name": "uniform random (expected)", "value": reference}
        best_fixed = float(_best_fixed_hits(result.labels).sum())
        for trace in result.traces:
            avg = mean_estimate(trace.rewards)
            out["policies"].append({
                **described[trace.label],
                "average_reward": avg.to_dict(),
                "expected_reward": mean_estimate(trace.expected).to_dict(),
                "lift": _lift(avg.value, reference),
                "cumulative_reward": float(trace.rewards.sum()),
                "regret": float(steps - trace.rewards.sum()),  # vs always playing the label
                "regret_vs_best_fixed": float(best_fixed - trace.rewards.sum()),
                **({"fixed_action": trace.fixed_action} if trace.fixed_action else {}),
                "timing": _timing(trace, steps),
            })
        return out
    logs = result.logged
    logged = mean_estimate(logs.rewards)
    out["reference"] = {"name": "logging policy", "value": logged.value,
                        "estimate": logged.to_dict()}
    for trace in result.traces:
        est = {
            "replay": replay(logs.rewards, trace.matched),
            "ips": ips(logs.rewards, trace.target, logs.propensities),
            "snips": snips(logs.rewards, trace.target, logs.propensities),
            "dr": doubly_robust(logs.rewards, trace.target, logs.propensities,
                                result.q_logged, trace.q_policy),
        }
        out["policies"].append({
            **described[trace.label],
            "average_reward": est["replay"].to_dict(),
            "lift": _lift(est["replay"].value, logged.value),
            "matched": int(trace.matched.sum()),
            "estimates": {k: v.to_dict() for k, v in est.items()},
            **({"fixed_action": trace.fixed_action} if trace.fixed_action else {}),
            "timing": _timing(trace, len(logs)),
        })
    return out


def _fmt(x, digits: int = 4) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) \
        else f"{x:.{digits}f}"


def _ci(e: dict) -> str:
    return f"{_fmt(e['value'])} [{_fmt(e['low'])}, {_fmt(e['high'])}]"


def table(summary: dict) -> str:
    """A plain-text table of the summary."""
    logged = summary["source"]["kind"] == "logged"
    head = ["policy", "avg reward [95% CI]", "lift"]
    if logged:
        head += ["matched", "IPS", "SNIPS", "DR"]
    else:
        head += ["expected"]
    head += ["events/s", "p50 ms", "p99 ms"]
    rows = []
    for p in summary["policies"]:
        t = p["timing"]
        lift = p["lift"]
        row = [p["label"], _ci(p["average_reward"]),
               "-" if lift is None else f"{100 * lift:+.1f}%"]
        if logged:
            e = p["estimates"]
            row += [str(p["matched"]), _fmt(e["ips"]["value"]), _fmt(e["snips"]["value"]),
                    _fmt(e["dr"]["value"])]
        else:
            row += [_fmt(p["expected_reward"]["value"])]
        row += [_fmt(t.get("events_per_s"), 0) if t.get("events_per_s") else "-",
                _fmt(t.get("decide_ms_p50"), 2), _fmt(t.get("decide_ms_p99"), 2)]
        rows.append(row)
    ref = summary["reference"]
    rows_auto = _auto_lines(summary)
    ref_line = f"reference: {ref['name']} = {_fmt(ref['value'])}"
    if "estimate" in ref:
        ref_line += f" [{_fmt(ref['estimate']['low'])}, {_fmt(ref['estimate']['high'])}]"
    widths = [max(len(str(r[j])) for r in [head, *rows]) for j in range(len(head))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip()
             for r in [head, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [ref_line]
    if logged and not summary["source"].get("uniform_logging", True):
        notes.append("note: the logging policy is not uniformly random over the actions: the "
                     "replay method (avg reward) is biased then; IPS, SNIPS and DR are not")
    return "\n".join([*lines, *notes, *rows_auto])


def _auto_lines(summary: dict) -> list[str]:
    """Per auto policy: each candidate's estimate [lower, upper], events, serving; the switches."""
    lines = []
    for p in summary["policies"]:
        if p.get("kind") != "auto" or "candidates" not in p:
            continue
        head = ["candidate", "kind", "estimate [lower, upper]", "events", "serving"]
        rows = [[c["name"], c["kind"],
                 f"{_fmt(c['estimate'])} [{_fmt(c['lower'])}, {_fmt(c['upper'])}]",
                 str(c["events"]), "yes" if c["serving"] else ""] for c in p["candidates"]]
        widths = [max(len(r[j]) for r in [head, *rows]) for j in range(len(head))]
        lines += ["", f"{p['label']}: candidates (serving: {p['serving']})"]
        lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
                  for r in [head, [("-" * w) for w in widths], *rows]]
        for w in p["switches"]:
            est = w["estimates"]
            figures = ", ".join(f"{name} {_fmt(e['estimate'])} [{_fmt(e['lower'])}, "
                                f"{_fmt(e['upper'])}]" for name, e in est.items())
            lines.append(f"switch at event {w['at']}: {w['from']} -> {w['to']} ({w['reason']}; "
                         f"{figures})")
        if not p["switches"]:
            lines.append("no switch")
    return lines


def _thin(n: int, most: int = 2000) -> np.ndarray:
    return np.unique(np.linspace(0, n - 1, min(n, most)).astype(int))


def plot(result: RunResult, path: str) -> None:
    """Cumulative reward and regret (supervised) or replay curves (logged), as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    if result.logged is None:
        n = len(result.labels)
        x = _thin(n)
        best = np.cumsum(_best_fixed_hits(result.labels))
        for trace in result.traces:
            cum = np.cumsum(trace.rewards)
            left.plot(x + 1, cum[x], label=trace.label)
            right.plot(x + 1, (best - cum)[x], label=trace.label)
        left.set(title="cumulative reward", xlabel="step", ylabel="reward")
        right.set(title="cumulative regret vs the best fixed action (hindsight)", xlabel="step",
                  ylabel="regret")
    else:
        n = len(result.logged)
        x = _thin(n)
        logged_mean = float(result.logged.rewards.mean())
        for trace in result.traces:
            cum = np.cumsum(trace.rewards)
            seen = np.cumsum(trace.matched)
            left.plot(x + 1, cum[x], label=trace.label)
            with np.errstate(invalid="ignore", divide="ignore"):
                right.plot(x + 1, (cum / seen)[x], label=trace.label)
        right.axhline(logged_mean, color="black", linestyle="--", label="logging policy")
        left.set(title="cumulative reward on matched events (replay)", xlabel="logged event",
                 ylabel="reward")
        right.set(title="replay estimate so far", xlabel="logged event", ylabel="average reward")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"grove replay: {result.source.get('data', '')}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_candidates(summary: dict, path: str) -> str | None:
    """Each auto policy's candidates: estimate and anytime-valid band over events, as a PNG
    beside ``path`` (``curves.png`` -> ``curves-candidates.png``), switches marked. None when
    the summary has no auto policy with figures."""
    autos = [p for p in summary["policies"] if p.get("kind") == "auto" and p.get("history")]
    if not autos:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(autos), figsize=(6.5 * len(autos), 4.5), squeeze=False)
    for ax, p in zip(axes[0], autos):
        names = [c["name"] for c in p["candidates"]]
        for k, name in enumerate(names):
            points = [(h["events"], c) for h in p["history"] for c in h["candidates"]
                      if c["name"] == name and c["events"] > 0]
            if not points:
                continue
            x = np.array([e for e, _ in points])
            value = np.array([np.nan if c["estimate"] is None else c["estimate"]
                              for _, c in points])
            color = f"C{k}"
            ax.plot(x, value, color=color, label=name + (" (serving)" if name == p["serving"]
                                                         else ""))
            ax.fill_between(x, [c["lower"] for _, c in points], [c["upper"] for _, c in points],
                            color=color, alpha=0.2)
        for w in p["switches"]:
            ax.axvline(w["at"], color="black", linestyle="--", linewidth=0.8)
            ax.annotate(f"{w['from']} -> {w['to']}", (w["at"], 0.98), fontsize=7,
                        xycoords=("data", "axes fraction"), rotation=90, va="top", ha="right")
        label = p["label"] if len(p["label"]) <= 40 else p["label"][:37] + "..."
        ax.set(title=f"{label}: candidates' estimates and bands", xlabel="events learned",
               ylabel="estimated average reward", ylim=(0, 1))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    target = Path(path)
    out = target.with_name(f"{target.stem}-candidates{target.suffix or '.png'}")
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return str(out)
