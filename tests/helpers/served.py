"""Grove's API served over real HTTP by uvicorn in a thread of the test process, and a
redis-server a test can stop for a moment."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from service.redis_server import free_port


@contextmanager
def served(api) -> Iterator[str]:
    """uvicorn serving the ASGI app ``api`` on a free port, in a thread; its base URL."""
    port = free_port()
    config = uvicorn.Config(api, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def pausable_redis(data_dir) -> Iterator:
    """A redis-server of the caller's own, to stop (``SIGSTOP``) while Grove writes to it:
    what a Redis that stops answering for a moment looks like (a slow disk, a failover).
    Continued (``SIGCONT``) before it is stopped for good."""
    from service.redis_server import RedisServer

    server = RedisServer(data_dir, appendonly=False).start()
    try:
        yield server
    finally:
        server.process.send_signal(signal.SIGCONT)
        server.stop()


def pause(server, seconds: float) -> None:
    """Stop ``server`` (a :class:`~service.redis_server.RedisServer`) now, continue it after
    ``seconds`` (from a timer thread: the caller goes on at once)."""
    server.process.send_signal(signal.SIGSTOP)
    threading.Timer(seconds, server.process.send_signal, (signal.SIGCONT,)).start()
