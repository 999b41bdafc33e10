"""``grove replay``: replay a supervised stream or logged feedback through several policies.

Examples::

    grove replay --in-process --data letter.csv.gz --label lettr --steps 20000 \\
        --policy forest --policy forest:n_trees=20 --policy uniform --policy best-fixed \\
        --out summary.json --plot curves.png
    grove replay --in-process --data letter.csv.gz --label lettr --steps 20000 --policy auto \\
        --policy 'auto:candidates=[{"kind":"bandit-forest"},{"kind":"linucb"}]' \\
        --out summary.json --plot curves.png   # also curves-candidates.png
    grove replay --url http://127.0.0.1:8000 --app replay --create --admin-key $KEY \\
        --data all.csv --format obd --out summary.json

Exit codes: 0 done; 2 bad input (flags, files, columns, propensities), with one error line;
1 the service failed (unreachable, refused a request, trainer not learning).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

DEFAULT_POLICIES = ["forest", "uniform", "best-fixed"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = __doc__.split("\n\n", 1)[1]
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    src = p.add_argument_group("source")
    src.add_argument("--data", required=True, help="CSV file (gzip etc. by extension)")
    src.add_argument("--label", help="supervised stream: the label column is the action set")
    src.add_argument("--format", choices=["obd", "plain"],
                     help="logged feedback: Open Bandit Dataset layout or plain "
                          "(context columns, action, reward, probability)")
    src.add_argument("--steps", type=int, default=None,
                     help="steps to play (supervised: default 10000, looping over the rows; "
                          "logged: the first N events, default all)")
    src.add_argument("--noise", type=float, default=0.05,
                     help="supervised: probability of flipping each binary variable per step")
    src.add_argument("--action-column", default="action", help="plain format")
    src.add_argument("--reward-column", default="reward", help="plain format")
    src.add_argument("--propensity-column", default="probability", help="plain format")
    run = p.add_argument_group("policies and run")
    run.add_argument("--policy", action="append", default=None, metavar="SPEC",
                     help="forest[:key=value,...] | auto[:key=value,...] | uniform | "
                          "best-fixed; repeat to compare "
                          f"(default: {' '.join(DEFAULT_POLICIES)})")
    run.add_argument("--seed", type=int, default=0)
    run.add_argument("--sync-every", type=int, default=500, metavar="N",
                     help="every N steps the forests see what they learned (HTTP: wait for the "
                          "trainer's snapshot); 0: no barrier (HTTP results then vary)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    srv = p.add_argument_group("driver")
    srv.add_argument("--in-process", action="store_true",
                     help="run the forests in this process instead of a Grove service")
    srv.add_argument("--decide-seed", type=int, default=None, metavar="S",
                     help="in-process: seed the forests' exploration draws as a Grove started "
                          "with GROVE_DECIDE_SEED=S does (one API process), so that the same "
                          "replay over HTTP draws the same actions")
    srv.add_argument("--url", help="Grove base URL, e.g. http://127.0.0.1:8000")
    srv.add_argument("--app", help="app name (several forests: APP-2, APP-3... for the others)")
    srv.add_argument("--key", default=os.environ.get("GROVE_APP_KEY"),
                     help="the app's API key (default: GROVE_APP_KEY)")
    srv.add_argument("--create", action="store_true",
                     help="create the app(s) with each forest's params (needs --admin-key)")
    srv.add_argument("--admin-key", default=os.environ.get("GROVE_ADMIN_KEY"),
                     help="admin key for --create (default: GROVE_ADMIN_KEY)")
    out = p.add_argument_group("outputs")
    out.add_argument("--out", help="JSON summary file")
    out.add_argument("--plot", help="PNG of cumulative reward / regret curves; with an auto "
                     "policy also <name>-candidates.png: each candidate's estimate and band "
                     "over events")


def _check_output(path: str | None, flag: str) -> None:
    if path and not Path(path).resolve().parent.is_dir():
        raise _input_error(f"{flag} {path}: directory {Path(path).parent} does not exist")


def _input_error(message: str):
    from service.replay.sources import ReplayInputError

    return ReplayInputError(message)


def _check_args(args: argparse.Namespace) -> None:
    if (args.label is None) == (args.format is None):
        raise _input_error("give --label COLUMN (supervised stream) or --format obd|plain "
                           "(logged feedback), not both or neither")
    if args.steps is not None and args.steps < 1:
        raise _input_error(f"--steps must be at least 1, got {args.steps}")
    if args.sync_every < 0:
        raise _input_error(f"--sync-every must be >= 0, got {args.sync_every}")
    if not args.in_process:
        if not args.url or not args.app:
            raise _input_error("give --url and --app (a running Grove), or --in-process")
        if args.create and not args.admin_key:
            raise _input_error("--create needs --admin-key (or GROVE_ADMIN_KEY)")
        if not args.create and not args.key:
            raise _input_error("give the app's --key, or --create with --admin-key")
    _check_output(args.out, "--out")
    _check_output(args.plot, "--plot")


def _build_policies(args, specs, actions, reward_range, logged: bool):
    """The live policies (forests, auto, uniform), the best-fixed labels, and the HTTP client."""
    from service.replay.http import GroveClient, HttpAuto, HttpForest
    from service.replay.policies import (
        MODEL_KINDS,
        InProcessAuto,
        InProcessForest,
        UniformPolicy,
        forest_params,
        policy_seed,
    )

    forests = [s for s in specs if s.kind in MODEL_KINDS]
    if not args.in_process and not args.create and len(forests) > 1:
        raise _input_error("several forest / auto policies over HTTP need --create (one app "
                           "each)")
    client = None if args.in_process else GroveClient(args.url)
    live, best_fixed, n_forest = [], [], 0
    for position, spec in enumerate(specs):
        if spec.kind == "uniform":
            live.append(UniformPolicy(spec.label, policy_seed(args.seed, position)))
        elif spec.kind == "best-fixed":
            best_fixed.append(spec.label)
        elif args.in_process:
            driver = InProcessAuto if spec.kind == "auto" else InProcessForest
            live.append(driver(spec.label, forest_params(spec, args.seed, position),
                               actions, reward_range, args.sync_every,
                               decide_seed=args.decide_seed))
        else:
            n_forest += 1
            app = args.app if n_forest == 1 else f"{args.app}-{n_forest}"
            params = forest_params(spec, args.seed, position)
            if args.create:
                key = client.create_app(args.admin_key, app, params, actions, reward_range,
                                        kind=MODEL_KINDS[spec.kind])
            else:
                key, params = args.key, None  # the app's own policy
                if spec.params:
                    print(f"grove replay: note: --policy {spec.label!r}: app {app!r} keeps its "
                          "own policy params (they apply with --create)", file=sys.stderr)
            driver = HttpAuto if spec.kind == "auto" else HttpForest
            live.append(driver(spec.label, client, app, key, logged=logged,
                               sync_every=args.sync_every, params=params))
    return live, best_fixed, client


def execute(args: argparse.Namespace, record: bool = False):
    """Run the replay of parsed ``grove replay`` arguments; returns ``(summary, RunResult)``.

    ``record=True`` keeps every live policy's (action, probabilities) per step in its trace.
    Raises ReplayInputError / ServiceError (see :func:`main`).
    """
    from service.replay import report
    from service.replay.policies import parse_specs
    from service.replay.runner import run_logged, run_supervised
    from service.replay.sources import logged_feedback, supervised_stream

    _check_args(args)
    specs = parse_specs(args.policy or DEFAULT_POLICIES)
    logged = args.format is not None
    if logged:
        source = logged_feedback(args.data, args.format, args.steps, args.action_column,
                                 args.reward_column, args.propensity_column)
        actions, reward_range = source.actions, source.reward_range
    else:
        source = supervised_stream(args.data, args.label, args.noise, args.seed)
        actions, reward_range = source.actions, (0.0, 1.0)
    live, best_fixed, client = _build_policies(args, specs, actions, reward_range, logged)
    progress = not args.no_progress
    try:
        if logged:
            result = run_logged(source, live, best_fixed, args.sync_every, args.seed, progress,
                                record)
        else:
            result = run_supervised(source, live, best_fixed, args.steps or 10_000,
                                    args.sync_every, progress, record)
        # before closing: an HTTP auto policy reads its app's evaluations here
        described = [p.describe() for p in live] + [{"label": b, "kind": "best-fixed"}
                                                    for b in best_fixed]
    finally:
        for policy in live:
            policy.close()
        if client is not None:
            client.close()
    order = [s.label for s in specs]
    result.traces.sort(key=lambda t: order.index(t.label))
    run = {"driver": "in-process" if args.in_process else "http", "url": args.url,
           "seed": args.seed, "sync_every": args.sync_every, "seconds": round(result.seconds, 3)}
    return report.summarize(result, described, run), result


def replay(args: argparse.Namespace) -> int:
    """Run the replay, print the table, write the JSON and the PNG."""
    from service.replay import report

    summary, result = execute(args)
    print(report.table(summary), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(summary, indent=2) + "\n")
        print(f"summary: {args.out}")
    if args.plot:
        report.plot(result, args.plot)
        print(f"plot: {args.plot}")
        candidates_plot = report.plot_candidates(summary, args.plot)
        if candidates_plot:
            print(f"candidates plot: {candidates_plot}")
    return 0


def main(args: argparse.Namespace) -> int:
    """``grove replay``: exit 2 with one line on bad input, 1 when the service fails."""
    import logging

    from service.replay.http import ServiceError
    from service.replay.sources import ReplayInputError

    logging.getLogger("httpx").setLevel(logging.WARNING)  # not one log line per request
    try:
        return replay(args)
    except ReplayInputError as exc:
        print(f"grove replay: error: {exc}", file=sys.stderr)
        return 2
    except ServiceError as exc:
        print(f"grove replay: service error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("grove replay: interrupted", file=sys.stderr)
        return 130


def run(data: str, *, label: str | None = None, format: str | None = None,
        policies: list[str] | tuple[str, ...] = tuple(DEFAULT_POLICIES), record: bool = False,
        **options):
    """Python API: ``run("letter.csv.gz", label="lettr", steps=2000, in_process=True)``.

    ``options`` are the other flags by their argparse names (``steps``, ``noise``, ``seed``,
    ``sync_every``, ``in_process``, ``url``, ``app``, ``key``, ``create``, ``admin_key``...);
    returns ``(summary, RunResult)`` without printing or writing files (no progress bar unless
    ``no_progress=False``).
    """
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--data", str(data)])
    unknown = set(options) - set(vars(args))
    if unknown:
        raise TypeError(f"unknown replay options: {sorted(unknown)}")
    vars(args).update(label=label, format=format, policy=list(policies), no_progress=True,
                      out=None, plot=None)
    vars(args).update(options)
    return execute(args, record=record)
