"""Session state in Redis with compare-and-set: the core ``StateSync`` for distributed sessions.

``Container.update(State[T], fn)`` calls ``update`` here: the value is read under ``WATCH``,
``fn`` is applied, and the write commits only if nobody changed the session's state meanwhile;
otherwise it retries against the new value. Two calls that merge into the same todo list on two
workers therefore both land: no lost update.

Persisted state changes only through ``Container.update`` here (every built-in tool does so):
a plain ``insert`` into a container that several calls share cannot be told apart from another
call's change, so writing such diffs back would reintroduce exactly the lost updates this
module exists to prevent.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from pydantic import TypeAdapter
from redis import Redis
from redis.exceptions import WatchError

from toolhub.core import Container
from toolhub.distributed import replies
from toolhub.distributed.codec import pack, unpack
from toolhub.distributed.replies import untyped

logger = logging.getLogger("toolhub.state")

VERSION_FIELD = b"__v"
MAX_RETRIES = 1000


class RedisStateSync:
    def __init__(self, client: Redis, key: str) -> None:
        self.client = client
        self.key = key
        self._version = -1
        self._lock = threading.Lock()

    def update(self, resource_id: str, fn: Callable[[Any], Any], adapter: TypeAdapter[Any]) -> Any:
        for _ in range(MAX_RETRIES):
            with self.client.pipeline() as pipe:
                try:
                    untyped(pipe).watch(self.key)
                    raw = replies.hget(pipe, self.key, resource_id)
                    current = None if raw is None else adapter.validate_python(unpack(raw))
                    new = fn(current)
                    data = pack(adapter.dump_python(new, mode="json"))
                    pipe.multi()
                    pipe.hset(self.key, resource_id, data)
                    pipe.hincrby(self.key, VERSION_FIELD, 1)
                    _, version = pipe.execute()
                except WatchError:
                    continue
            with self._lock:
                self._version = max(self._version, int(version))
            return new
        raise RuntimeError(f"state {resource_id!r} stayed contended for {MAX_RETRIES} retries")

    def load_into(self, container: Container) -> int:
        """Copy the shared state into ``container`` unless it already holds that version or a
        newer one (concurrent calls share the container: it must never go backwards)."""
        return self.apply(replies.hgetall(self.client, self.key), container)

    def apply(self, raw: dict[bytes, bytes], container: Container) -> int:
        """``load_into`` with the hash already read (the worker gets it with its claim)."""
        raw = dict(raw)
        version = int(raw.pop(VERSION_FIELD, b"0"))
        with self._lock:
            if version <= self._version:
                return version
            self._version = version
            state = {key.decode(): unpack(value) for key, value in raw.items()}
            for skipped in container.load({"state": state}):
                logger.warning("state %r in %s no longer fits; left out", skipped, self.key)
        return version
