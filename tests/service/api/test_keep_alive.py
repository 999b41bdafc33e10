"""A 500 for a failure of Grove's own keeps the client's connection open under real uvicorn
(``errors.AnswerFailures``): before it, Starlette answered, then raised the exception on to
uvicorn, which closed the connection, and a client's next request on it was reset."""

from __future__ import annotations

import json
import socket

import pytest

from service.redis_server import free_port
from tests.helpers.processes import _answers, service_env, spawn, stop_all, wait_until


def _exchange(sock: socket.socket, path: str) -> tuple[int, dict, bytes]:
    """One HTTP/1.1 request on ``sock`` and its answer: (status, headers, body); (0, {}, b"")
    when the server closed the connection instead."""
    try:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: grove\r\n\r\n".encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                return 0, {}, b""
            data += chunk
    except (ConnectionResetError, BrokenPipeError):
        return 0, {}, b""
    head, body = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    while len(body) < int(headers.get("content-length", 0)):
        body += sock.recv(65536)
    return int(lines[0].split()[1]), headers, body


@pytest.fixture(params=["with_answer_failures", "without_answer_failures"])
def served(request, tmp_path):
    port = free_port()
    log = tmp_path / "uvicorn.log"
    proc = spawn(["-m", "uvicorn", f"tests.helpers.failing_app:{request.param}", "--factory",
                  "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
                 service_env(None), log)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _answers(url + "/healthz"), proc, log, what="the failing app")
        yield request.param, port, log
    finally:
        stop_all([proc])


def test_a_500_keeps_the_connection_open(served):
    kind, port, log = served
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        status, headers, body = _exchange(sock, "/boom")
        assert status == 500
        after = _exchange(sock, "/healthz")
    if kind == "with_answer_failures":
        assert headers["content-type"] == "application/json"
        assert "RuntimeError" in json.loads(body)["detail"]
        assert headers.get("connection") != "close"
        assert after[0] == 200 and json.loads(after[2]) == {"ok": True}
        assert "a bug of Grove's own" in log.read_text()  # logged with its traceback
    else:  # the premise: without the middleware, uvicorn ends the connection
        assert after[0] == 0
