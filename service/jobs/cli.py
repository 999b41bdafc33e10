"""``grove jobs submit|status|result|cancel|list``: the job API from a shell, with a progress bar.

The server and key come from ``--url`` / ``--key`` or ``GROVE_URL`` (default
http://127.0.0.1:8000) and ``GROVE_KEY`` (else ``GROVE_ADMIN_KEY``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

#: exit status by final state
EXIT = {"done": 0, "failed": 1, "cancelled": 3}
FINISHED = tuple(EXIT)


def _client(args):
    import logging

    import httpx

    logging.getLogger("httpx").setLevel(logging.WARNING)  # no line per poll

    key = args.key or os.environ.get("GROVE_KEY") or os.environ.get("GROVE_ADMIN_KEY")
    if not key:
        raise SystemExit("grove jobs: give --key (or set GROVE_KEY / GROVE_ADMIN_KEY)")
    url = args.url or os.environ.get("GROVE_URL", "http://127.0.0.1:8000")
    return httpx.Client(
        base_url=url.rstrip("/"), headers={"Authorization": f"Bearer {key}"}, timeout=60.0
    )


def _check(answer) -> dict:
    if answer.status_code >= 400:
        try:
            detail = answer.json().get("detail")
        except ValueError:
            detail = answer.text
        raise SystemExit(f"grove jobs: HTTP {answer.status_code}: {json.dumps(detail)}")
    return answer.json()


def _params(args) -> dict:
    params = json.loads(args.params) if args.params else {}
    for item in args.param or []:
        name, _, value = item.partition("=")
        try:
            params[name] = json.loads(value)
        except json.JSONDecodeError:
            params[name] = value  # a bare word is a string
    return params


def watch(client, job_id: str, poll: float = 0.5, out=sys.stderr) -> dict:
    """Follow the job with a tqdm bar until it ends; returns its final answer."""
    from tqdm import tqdm

    with tqdm(total=1000, file=out, bar_format="{desc} {percentage:3.0f}%|{bar}|{postfix}") as bar:
        while True:
            job = _check(client.get(f"/jobs/{job_id}"))
            bar.n = int(job["progress"]["fraction"] * 1000)
            bar.set_description_str(job["state"])
            bar.set_postfix_str(job["progress"]["message"][:60])
            if job["state"] in FINISHED:
                return job
            time.sleep(poll)


def _finish(job: dict) -> int:
    if job["state"] == "done":
        print(json.dumps(job["result"], indent=2))
    elif job["error"]:
        print(f"job {job['id']} {job['state']}: {job['error']}", file=sys.stderr)
    else:
        print(f"job {job['id']} {job['state']}", file=sys.stderr)
    return EXIT[job["state"]]


def submit(args) -> int:
    params = _params(args)
    with _client(args) as client:
        if args.file:
            path = Path(args.file)
            fields = {"params": json.dumps(params)}
            if args.app:
                fields["app"] = args.app
            if args.format:
                fields["format"] = args.format
            with path.open("rb") as f:
                job = _check(
                    client.post(f"/jobs/{args.kind}", files={"file": (path.name, f)}, data=fields)
                )
        else:
            if not (args.app and args.last):
                raise SystemExit("grove jobs submit: give --file, or --app and --last")
            body = {"app": args.app, "last": args.last, "params": params}
            job = _check(client.post(f"/jobs/{args.kind}", json=body))
        print(job["id"])
        if args.no_wait:
            return 0
        return _finish(watch(client, job["id"]))


def status(args) -> int:
    with _client(args) as client:
        if args.watch:
            job = watch(client, args.id)
        else:
            job = _check(client.get(f"/jobs/{args.id}"))
        job.pop("result", None)
        print(json.dumps(job, indent=2))
        return 0


def result(args) -> int:
    with _client(args) as client:
        job = _check(client.get(f"/jobs/{args.id}"))
        if job["state"] not in FINISHED:
            print(
                f"job {args.id} is {job['state']} ({job['progress']['message']})", file=sys.stderr
            )
            return 2
        return _finish(job)


def cancel(args) -> int:
    with _client(args) as client:
        job = _check(client.delete(f"/jobs/{args.id}"))
        print(
            f"job {args.id}: {job['state']}"
            + (
                " (cancel requested)"
                if job["cancelRequested"] and job["state"] == "running"
                else ""
            )
        )
        return 0


def list_jobs(args) -> int:
    with _client(args) as client:
        query = {"limit": args.limit} | ({"app": args.app} if args.app else {})
        for job in _check(client.get("/jobs", params=query)):
            print(
                f"{job['id']}  {job['kind']:<20} {job['state']:<9} "
                f"{job['progress']['fraction']:5.0%}  {job['app'] or '-'}"
            )
        return 0


def add_parser(sub) -> None:
    """``grove jobs ...`` under the ``grove`` command's subparsers."""
    jobs = sub.add_parser("jobs", help="submit and follow batch jobs (feature-selection, ...)")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", help="Grove API (default GROVE_URL or http://127.0.0.1:8000)")
    common.add_argument("--key", help="admin key or the app's key (default GROVE_KEY)")
    commands = jobs.add_subparsers(dest="jobs_command", required=True)

    s = commands.add_parser("submit", parents=[common], help="submit a job, then follow it")
    s.add_argument("kind", help="job kind, e.g. feature-selection")
    s.add_argument("--file", help="CSV or Parquet dataset to upload")
    s.add_argument("--format", choices=("csv", "parquet"), help="default: from the file name")
    s.add_argument("--app", help="the app the job belongs to (with --last: its logged events)")
    s.add_argument("--last", type=int, help="use the app's last N logged events")
    s.add_argument("--params", help='parameters as JSON, e.g. \'{"target": "label"}\'')
    s.add_argument("-p", "--param", action="append", help="one parameter, name=value")
    s.add_argument("--no-wait", action="store_true", help="print the job id and return")
    s.set_defaults(func=submit)

    st = commands.add_parser("status", parents=[common], help="state and progress of a job")
    st.add_argument("id")
    st.add_argument("--watch", action="store_true", help="progress bar until the job ends")
    st.set_defaults(func=status)

    r = commands.add_parser("result", parents=[common], help="the result of a finished job")
    r.add_argument("id")
    r.set_defaults(func=result)

    c = commands.add_parser("cancel", parents=[common], help="cancel a job")
    c.add_argument("id")
    c.set_defaults(func=cancel)

    ls = commands.add_parser("list", parents=[common], help="recent jobs")
    ls.add_argument("--app")
    ls.add_argument("--limit", type=int, default=20)
    ls.set_defaults(func=list_jobs)
