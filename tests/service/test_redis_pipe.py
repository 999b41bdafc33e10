"""The request path's pipelined script connection (service/redis_pipe.py), on real redis-servers."""

from __future__ import annotations

import asyncio
import signal

import pytest
import redis

from service.redis_pipe import ScriptPipe, pack
from service.redis_server import RedisServer

ECHO = "return {KEYS[1], ARGV[1]}"
SLOW_ECHO = "local t = redis.call('TIME'); while true do local n = redis.call('TIME'); " \
    "if (n[1] - t[1]) * 1000000 + (n[2] - t[2]) > 20000 then break end end; return ARGV[1]"


def run(coro):
    return asyncio.run(coro)


@pytest.fixture
def redis_url(redis_server) -> str:
    """The session's plain redis-server, also under ``--redis-cluster`` (a cluster uses
    redis-py's cluster client, not the pipe)."""
    return redis_server.url


def test_pack_writes_resp_arrays_of_bulk_strings():
    assert pack([b"GET", "k\u00e9", 12, 0.5]) == (
        b"*4\r\n$3\r\nGET\r\n$3\r\nk\xc3\xa9\r\n$2\r\n12\r\n$3\r\n0.5\r\n"
    )


def test_concurrent_calls_get_their_own_replies_in_any_number(redis_url):
    async def main():
        pipe = ScriptPipe(redis_url)
        echo = pipe.register_script(ECHO)
        replies = await asyncio.gather(*(echo(keys=[f"k{i}"], args=[i]) for i in range(2000)))
        await pipe.aclose()
        return replies

    replies = run(main())
    assert replies == [[f"k{i}".encode(), str(i).encode()] for i in range(2000)]


def test_a_flushed_script_is_loaded_again(redis_url):
    async def main():
        pipe = ScriptPipe(redis_url)
        echo = pipe.register_script(ECHO)
        first = await echo(keys=["a"], args=["1"])
        redis.Redis.from_url(redis_url).script_flush()
        second = await echo(keys=["b"], args=["2"])
        await pipe.aclose()
        return first, second

    assert run(main()) == ([b"a", b"1"], [b"b", b"2"])


def test_a_script_error_is_redis_pys_response_error_and_the_next_call_is_answered(redis_url):
    async def main():
        pipe = ScriptPipe(redis_url)
        bad = pipe.register_script("return redis.call('NOSUCHCOMMAND')")
        echo = pipe.register_script(ECHO)
        with pytest.raises(redis.ResponseError, match="(?i)unknown"):
            await bad()
        reply = await echo(keys=["k"], args=["after"])
        await pipe.aclose()
        return reply

    assert run(main()) == [b"k", b"after"]


def test_a_call_given_up_leaves_the_replies_after_it_to_their_callers(redis_url):
    async def main():
        pipe = ScriptPipe(redis_url)
        slow = pipe.register_script(SLOW_ECHO)
        echo = pipe.register_script(ECHO)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(slow(args=["late"]), 0.001)
        replies = await asyncio.gather(*(echo(keys=["k"], args=[i]) for i in range(50)))
        await pipe.aclose()
        return replies

    assert run(main()) == [[b"k", str(i).encode()] for i in range(50)]


def test_a_lost_server_fails_the_calls_and_a_restarted_one_is_reconnected(tmp_path):
    server = RedisServer(tmp_path / "r", appendonly=False).start()
    try:
        async def main():
            pipe = ScriptPipe(server.url, connect_timeout=0.5)
            echo = pipe.register_script(ECHO)
            assert await echo(keys=["k"], args=["up"]) == [b"k", b"up"]
            server.stop()
            with pytest.raises(redis.ConnectionError):
                await echo(keys=["k"], args=["down"])
            with pytest.raises(redis.ConnectionError):  # still down: one attempt, no hang
                await echo(keys=["k"], args=["down"])
            server.start()
            reply = await echo(keys=["k"], args=["again"])  # a new connection, the script loaded
            await pipe.aclose()
            return reply

        assert run(main()) == [b"k", b"again"]
    finally:
        server.stop()


def test_password_and_database_come_from_the_url(tmp_path):
    server = RedisServer(tmp_path / "r", appendonly=False).start()
    try:
        admin = redis.Redis(host=server.host, port=server.port)
        admin.config_set("requirepass", "s3cret")
        url = f"redis://:s3cret@{server.host}:{server.port}/3"

        async def main():
            pipe = ScriptPipe(url)
            setter = pipe.register_script("redis.call('SET', KEYS[1], ARGV[1]); return 1")
            await setter(keys=["where"], args=["db3"])
            await pipe.aclose()
            wrong = ScriptPipe(f"redis://:nope@{server.host}:{server.port}/0")
            with pytest.raises(redis.AuthenticationError):
                await wrong.register_script(ECHO)(keys=["k"], args=["v"])

        run(main())
        check = redis.Redis(host=server.host, port=server.port, password="s3cret", db=3)
        assert check.get("where") == b"db3"
        assert redis.Redis(host=server.host, port=server.port, password="s3cret").get(
            "where") is None
    finally:
        server.stop()


def test_a_call_given_up_with_no_reply_at_all_drops_the_connection(tmp_path):
    """A server that stops answering (SIGSTOP): the call that gives up closes the connection,
    and once the server answers again the next call goes on a new one."""
    server = RedisServer(tmp_path / "r", appendonly=False).start()
    try:
        admin = redis.Redis(host=server.host, port=server.port)

        def pipe_clients() -> set[str]:
            return {c["addr"] for c in admin.client_list() if c["name"] != "admin"}

        admin.client_setname("admin")

        async def main():
            pipe = ScriptPipe(server.url)
            echo = pipe.register_script(ECHO)
            await echo(keys=["k"], args=["1"])
            before = pipe_clients()
            server.process.send_signal(signal.SIGSTOP)
            try:
                with pytest.raises(asyncio.TimeoutError):
                    await asyncio.wait_for(echo(keys=["k"], args=["2"]), 0.3)
            finally:
                server.process.send_signal(signal.SIGCONT)
            reply = await echo(keys=["k"], args=["3"])
            after = pipe_clients()
            await pipe.aclose()
            return before, after, reply

        before, after, reply = run(main())
        assert reply == [b"k", b"3"] and len(before) == len(after) == 1 and before != after
    finally:
        server.stop()
