"""The request path's Lua scripts on one pipelined connection (a plain Redis; asyncio).

Profiled under load, redis-py's asyncio client spent more of an API process's CPU per decide
than the decide itself: a pool checkout and release per call, command encoding argument by
argument, retry and observability wrappers (``python -m bench.http.inprocess --profile``). The
scripts of the online loop (decide, reward, activate, label) need none of it: each is one
``EVALSHA`` whose reply is a short array. :class:`ScriptPipe` sends them on one connection per
process, without waiting for earlier replies (Redis answers in order, so the replies are
matched to the waiting calls first in, first out), and parses replies with hiredis, redis-py's
own C parser. The commands of one turn of the event loop leave in one write: under load, one
system call carries the scripts of many requests.

What it keeps of redis-py's behaviour:

- errors are redis-py's: a reply error is redis-py's class for it (``LOADING`` a
  :class:`redis.BusyLoadingError`, others a :class:`redis.ResponseError`), a lost or refused
  connection a :class:`redis.ConnectionError` (the API answers 503 for it, as for redis-py's);
  the calls waiting on a connection that breaks fail at once, and the next call reconnects;
- ``NOSCRIPT`` (a restarted or flushed Redis) loads the script (``SCRIPT LOAD``) and sends the
  call again, as redis-py's ``Script`` does;
- it reads the same URL (``redis://``, ``rediss://`` with TLS, ``unix://``; user, password and
  database from the URL) through redis-py's own parser.

A call cancelled while waiting (``Store.bounded`` gives up after ``GROVE_REDIS_TIMEOUT``)
leaves its place in the queue: its reply, if it comes, is read and dropped, so the replies that
follow still go to their callers; but if no reply at all came while it waited, the connection
is closed (as redis-py drops a connection whose read timed out): a server or link that stopped
answering does not hold every later call, and the next call connects again.

A Redis Cluster uses redis-py's cluster client instead (it follows slots across nodes; see
:mod:`service.redis_client`).

Example (a real redis-server)::

    pipe = ScriptPipe("redis://127.0.0.1:6379/0")
    script = pipe.register_script("return {KEYS[1], ARGV[1]}")
    await script(keys=["k"], args=["v"])  # -> [b"k", b"v"]
"""

from __future__ import annotations

import asyncio
import hashlib
import ssl
from collections import deque
from collections.abc import Sequence

import hiredis
import redis
from redis._parsers.base import BaseParser
from redis.connection import SSLConnection, UnixDomainSocketConnection, parse_url
from redis.exceptions import NoScriptError

__all__ = ["PipedScript", "ScriptPipe"]


def pack(parts: Sequence[bytes | str | int | float]) -> bytes:
    """One command in RESP (an array of bulk strings): what Redis reads."""
    out = [b"*%d\r\n" % len(parts)]
    for part in parts:
        if isinstance(part, str):
            part = part.encode()
        elif isinstance(part, int):  # bool included: True -> 1
            part = b"%d" % part
        elif isinstance(part, float):
            part = repr(part).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(part), part))
    return b"".join(out)


class _Protocol(asyncio.Protocol):
    """One connection: writes commands, resolves the waiting futures in reply order."""

    def __init__(self, on_lost) -> None:
        self.reader = hiredis.Reader(replyError=redis.ResponseError)
        self.waiting: deque[asyncio.Future] = deque()
        self.transport: asyncio.Transport | None = None
        self._on_lost = on_lost
        self._outgoing: list[bytes] = []
        self.replies = 0  # replies read so far

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.reader.feed(data)
        while True:
            try:
                reply = self.reader.gets()
            except hiredis.ProtocolError:  # not Redis, or out of step: start again
                self.transport.close()
                return
            if reply is False:
                return
            if not self.waiting:  # a reply nobody asked for: out of step
                self.transport.close()
                return
            self.replies += 1
            future = self.waiting.popleft()
            if future.done():  # its caller gave up (a timeout): drop the reply
                continue
            if isinstance(reply, redis.ResponseError):  # redis-py's class for it
                future.set_exception(BaseParser.parse_error(str(reply)))
            else:
                future.set_result(reply)

    def connection_lost(self, exc) -> None:
        self._on_lost(self)
        error = redis.ConnectionError(f"connection to Redis lost: {exc or 'closed by the server'}")
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(error)

    def call(self, command: bytes) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.waiting.append(future)
        if not self._outgoing:  # the first command of this turn of the loop: flush at its end
            loop.call_soon(self._flush)
        self._outgoing.append(command)
        return future

    def _flush(self) -> None:
        commands, self._outgoing = self._outgoing, []
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(commands))
        # else: connection_lost fails the waiting calls


class ScriptPipe:
    """Lua scripts of one plain Redis on one pipelined connection (see the module doc)."""

    def __init__(self, url: str, connect_timeout: float = 1.0) -> None:
        options = parse_url(url)
        self._connect_timeout = connect_timeout
        self._target = options
        self._protocol: _Protocol | None = None
        self._connecting: asyncio.Future | None = None
        self._url = url

    def register_script(self, text: str) -> PipedScript:
        return PipedScript(self, text)

    async def call(self, command: bytes):
        """Send ``command`` (packed) and wait for its reply."""
        protocol = self._protocol
        if protocol is None:
            protocol = await self._connect()
        replies = protocol.replies
        try:
            return await protocol.call(command)
        except asyncio.CancelledError:
            # given up (a timeout): if not one reply came since it was sent, the server or the
            # link is not answering: drop the connection (its waiting calls fail, 503) rather
            # than queue every later call behind it; the next call connects again
            if protocol.replies == replies and protocol.transport is not None:
                protocol.transport.close()
            raise

    async def _connect(self) -> _Protocol:
        # one connection attempt at a time: concurrent calls wait for the same one
        if self._connecting is None:
            self._connecting = asyncio.ensure_future(self._open())
        connecting = self._connecting
        try:
            return await asyncio.shield(connecting)
        finally:
            if connecting.done():
                self._connecting = None

    async def _open(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        target = self._target
        cls = target.get("connection_class")
        try:
            if cls is UnixDomainSocketConnection:
                opening = loop.create_unix_connection(
                    lambda: _Protocol(self._lost), target["path"])
            else:
                context = ssl.create_default_context() if cls is SSLConnection else None
                opening = loop.create_connection(
                    lambda: _Protocol(self._lost), target.get("host", "localhost"),
                    int(target.get("port", 6379)), ssl=context)
            _, protocol = await asyncio.wait_for(opening, self._connect_timeout)
        except (TimeoutError, OSError) as exc:
            raise redis.ConnectionError(f"cannot connect to Redis at {self._url}: {exc}") from exc
        try:
            await self._hello(protocol)
        except BaseException:
            protocol.transport.close()
            raise
        self._protocol = protocol
        return protocol

    async def _hello(self, protocol: _Protocol) -> None:
        target = self._target
        password, username = target.get("password"), target.get("username")
        if password is not None:
            auth = [b"AUTH", username, password] if username else [b"AUTH", password]
            await asyncio.wait_for(protocol.call(pack(auth)), self._connect_timeout)
        if int(target.get("db", 0) or 0):
            await asyncio.wait_for(protocol.call(pack([b"SELECT", int(target["db"])])),
                                   self._connect_timeout)

    def _lost(self, protocol: _Protocol) -> None:
        if self._protocol is protocol:
            self._protocol = None

    async def aclose(self) -> None:
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()


class PipedScript:
    """A Lua script called as redis-py's ``AsyncScript`` is: ``await script(keys=, args=)``."""

    def __init__(self, pipe: ScriptPipe, text: str) -> None:
        self.pipe = pipe
        self.script = text.encode()
        self.sha = hashlib.sha1(self.script).hexdigest().encode()

    async def __call__(self, keys: Sequence = (), args: Sequence = ()):
        command = pack([b"EVALSHA", self.sha, len(keys), *keys, *args])
        try:
            return await self.pipe.call(command)
        except NoScriptError:
            pass
        await self.pipe.call(pack([b"SCRIPT", b"LOAD", self.script]))
        return await self.pipe.call(command)
