"""Helpers every Redis reader and script shares: replies as text, the server clock in Lua."""

from __future__ import annotations

__all__ = ["LUA_NOW", "as_str"]


def as_str(value: bytes | str | None) -> str | None:
    """A Redis reply as ``str`` (clients without ``decode_responses`` return bytes).

    >>> as_str(b"shop"), as_str("shop"), as_str(None)
    ('shop', 'shop', None)
    """
    return value.decode() if isinstance(value, bytes) else value


#: Lua: ``now`` = the Redis server's clock (``TIME``) in unix milliseconds, so that hosts with
#: skewed clocks agree on deadlines and job times
LUA_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"""
