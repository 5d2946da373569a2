"""Fill a real Redis to its ``maxmemory`` (noeviction), as a fleet's Redis fills up: filler
keys are written until Redis refuses one for memory, and the limit is then pinned just below
what Redis holds (a refused write's own buffers, once freed, would otherwise leave it a few
KB under). ``Full`` keeps it there, hovering as under load: every ``breath`` seconds eight filler
keys are deleted for a moment (writes get through), then the limit is pinned again."""

from __future__ import annotations

import threading
from types import TracebackType

from redis import Redis
from redis.exceptions import OutOfMemoryError, RedisError

CHUNK = 64 * 1024
PREFIX = "filler:"


def fill(url: str, maxmemory: int | None = None) -> list[str]:
    """Set ``maxmemory`` (default: 2 MiB above what Redis holds now) and write filler until a
    write is refused; returns the filler's keys."""
    client = Redis.from_url(url)
    try:
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", maxmemory or used + (2 << 20))
        keys: list[str] = []
        payload = b"x" * CHUNK
        while True:
            key = f"{PREFIX}{len(keys)}"
            try:
                client.set(key, payload)
            except OutOfMemoryError:
                pin(client)
                return keys
            keys.append(key)
    finally:
        client.close()


def pin(client: Redis) -> None:
    """Set ``maxmemory`` a little below what Redis holds now: every growing write is refused."""
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", used - 4 * CHUNK)


def unfill(url: str, keys: list[str], maxmemory: int = 0) -> None:
    """Delete the filler (and set ``maxmemory``, default: no limit)."""
    client = Redis.from_url(url)
    try:
        for at in range(0, len(keys), 500):
            client.delete(*keys[at : at + 500])
        client.config_set("maxmemory", maxmemory)
    finally:
        client.close()


class Full:
    """``with Full(url):`` Redis stays at its ``maxmemory``, hovering, until the block ends."""

    def __init__(self, url: str, maxmemory: int | None = None, breath: float = 1.0) -> None:
        self.url = url
        self.maxmemory = maxmemory
        self.breath = breath
        self.keys: list[str] = []
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._hover, name="redis-full", daemon=True)

    def __enter__(self) -> Full:
        self.keys = fill(self.url, self.maxmemory)
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._halt.set()
        self._thread.join(10)
        unfill(self.url, self.keys)

    def _hover(self) -> None:
        client = Redis.from_url(self.url)
        try:
            while not self._halt.wait(self.breath) and len(self.keys) > 8:
                client.delete(*self.keys[-8:])
                del self.keys[-8:]
                self._halt.wait(0.2)
                pin(client)
        except RedisError:
            pass
        finally:
            client.close()
