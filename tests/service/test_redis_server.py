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
