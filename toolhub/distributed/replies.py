"""Typed replies of a bytes Redis client. redis-py types every reply as a union (``bytes | str``
and more) because a client may decode responses; toolhub's clients never do, and these helpers
say so once instead of casting at every call site."""

from __future__ import annotations

from typing import Any, cast

from redis import Redis

Entry = tuple[bytes, dict[bytes, bytes]]


def get(client: Redis, key: str) -> bytes | None:
    return cast("bytes | None", client.get(key))


def hget(client: Redis, key: str, field: str | bytes) -> bytes | None:
    return cast("bytes | None", client.hget(key, field))


def hmget(client: Redis, key: str, *fields: str) -> list[bytes | None]:
    return cast("list[bytes | None]", client.hmget(key, list(fields)))


def hgetall(client: Redis, key: str) -> dict[bytes, bytes]:
    return cast("dict[bytes, bytes]", client.hgetall(key))


def xrange(client: Redis, key: str, start: str, end: str = "+") -> list[Entry]:
    return cast("list[Entry]", client.xrange(key, min=start, max=end))


def xrevrange(client: Redis, key: str, count: int) -> list[Entry]:
    return cast("list[Entry]", client.xrevrange(key, count=count))


def zscored(client: Redis, key: str, low: float | str = "-inf") -> list[tuple[bytes, float]]:
    """Members scored from ``low`` up, with their scores, lowest first."""
    return cast(
        "list[tuple[bytes, float]]", client.zrangebyscore(key, low, "+inf", withscores=True)
    )


def zrangebyscore(client: Redis, key: str, high: float, limit: int) -> list[bytes]:
    return cast("list[bytes]", client.zrangebyscore(key, "-inf", high, start=0, num=limit))


def lrange(client: Redis, key: str, start: int, end: int) -> list[bytes]:
    return cast("list[bytes]", client.lrange(key, start, end))


def blpop(client: Redis, key: str, timeout: float) -> tuple[bytes, bytes] | None:
    return cast("tuple[bytes, bytes] | None", client.blpop([key], timeout=timeout))


def time(client: Redis) -> float:
    """The server's clock: leases compare against it, never a worker's own clock."""
    seconds, micros = client.time()
    return seconds + micros / 1e6


def untyped(value: Any) -> Any:
    """For the few third-party calls that have no annotations at all (``watch``, ``pubsub``)."""
    return value
