"""``grove healthcheck api|trainer|worker``: exit 0 if this container's role is healthy.

Used by the Docker HEALTHCHECK and the compose healthchecks (no curl in the slim image):

- api: ``GET /healthz`` on the local port answers 200;
- trainer: a trainer of this host (ids start with the hostname) beat within GROVE_TRAINER_LEASE;
- worker: an rq worker of this host is registered on the job queue (rq expires dead ones).
"""

from __future__ import annotations

import argparse
import socket
import sys
import time

from service.settings import Settings


def _api(port: int) -> bool:
    import httpx

    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def _trainer(settings: Settings) -> bool:
    from service import keys
    from service.redis_client import connect

    client = connect(settings)
    try:
        since_ms = (time.time() - settings.trainer_lease) * 1000
        prefix = socket.gethostname() + ":"
        beats = client.zrangebyscore(keys.TRAINERS, since_ms, "+inf")
        return any(b.decode().startswith(prefix) for b in beats)
    finally:
        client.close()


def _worker(settings: Settings) -> bool:
    from service.jobs.queue import JobQueue
    from service.redis_client import connect_jobs

    client = connect_jobs(settings)
    try:
        host = socket.gethostname()
        return any(w["hostname"] == host for w in JobQueue(client, settings).workers())
    finally:
        client.close()


def main(args: argparse.Namespace) -> int:
    settings = Settings()
    try:
        if args.role == "api":
            healthy = _api(args.port)
        elif args.role == "trainer":
            healthy = _trainer(settings)
        else:
            healthy = _worker(settings)
    except Exception as exc:  # any failure to check is unhealthy, with the reason
        print(f"grove healthcheck {args.role}: {exc}", file=sys.stderr)
        return 1
    if not healthy:
        print(f"grove healthcheck {args.role}: unhealthy", file=sys.stderr)
    return 0 if healthy else 1


def add_parser(sub) -> None:
    h = sub.add_parser("healthcheck", help="exit 0 if this container's role is healthy")
    h.add_argument("role", choices=["api", "trainer", "worker"])
    h.add_argument("--port", type=int, default=8000, help="the API's local port (role api)")
    h.set_defaults(func=main)
