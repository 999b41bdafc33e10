import signal

import pytest
import redis

from service.redis_server import RedisServer


def test_embedded_redis_server_persists_with_aof(tmp_path):
    with RedisServer(tmp_path / "data") as server:
        client = redis.Redis.from_url(server.url)
        client.set("k", "v")
        client.close()
    assert (tmp_path / "data" / "appendonlydir").exists() or list((tmp_path / "data").glob("*.aof"))
    with RedisServer(tmp_path / "data") as server:
        assert redis.Redis.from_url(server.url).get("k") == b"v"


def test_fixture_server_is_real(redis_client):
    assert redis_client.info()["redis_version"]
    redis_client.xadd("s", {"a": 1})
    assert redis_client.xlen("s") == 1


def test_appendfsync_always_keeps_every_answered_write_through_a_sigkill(tmp_path):
    server = RedisServer(tmp_path / "data", appendfsync="always").start()
    client = redis.Redis.from_url(server.url)
    assert client.config_get("appendfsync") == {"appendfsync": "always"}
    for i in range(500):
        client.xadd("events", {"i": i})
    client.close()
    server.stop(sig=signal.SIGKILL)  # a crash: nothing written out at exit
    with RedisServer(tmp_path / "data") as again:
        assert redis.Redis.from_url(again.url).xlen("events") == 500


def test_an_unknown_appendfsync_is_refused_before_starting(tmp_path):
    with pytest.raises(ValueError, match="appendfsync"):
        RedisServer(tmp_path / "data", appendfsync="sometimes").start()
