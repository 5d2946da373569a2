"""The control listener: cancel requests from any dispatcher reach the worker running the call.

A cancel is a message on the ``control`` channel; every worker hears it and the one that runs
the call fires the call's ``CancelToken`` right here, on the listener thread. The token runs the
kill callbacks the tool registered (TERM to the process group, KILL after a grace) and the
executor answers ``cancelled`` at once, so nothing waits on the tool. A message missed while
this connection was down is caught by the lease renewal, which reports the record's
``cancel_requested`` flag.

An ``ended`` message (a session was deleted, ``RedisStore.drop_session``) has the runtime
remove that session's command logs and tmp on this host (``session_ended``), once the
session's record is gone: a message alone, which anyone who can publish could send, removes
nothing of a session that still exists.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Protocol

from redis.exceptions import RedisError

from toolhub.distributed.codec import unpack
from toolhub.distributed.replies import untyped
from toolhub.distributed.store import RedisStore

logger = logging.getLogger("toolhub.worker.control")


class CancelTarget(Protocol):
    """Whose calls a listener cancels: a worker's runtime, or the background holder."""

    @property
    def store(self) -> RedisStore: ...

    def cancel_local(self, call_id: str, reason: str = "cancelled") -> bool: ...

    def session_ended(self, session_id: str) -> None: ...


class ControlListener(threading.Thread):
    def __init__(self, runtime: CancelTarget) -> None:
        super().__init__(name="toolhub-control", daemon=True)
        self.runtime = runtime
        self.stop_event = threading.Event()
        self.subscribed = threading.Event()

    def run(self) -> None:
        backoff = 0.05
        while not self.stop_event.is_set():
            pubsub = untyped(self.runtime.store.client).pubsub(ignore_subscribe_messages=True)
            try:
                pubsub.subscribe(self.runtime.store.keys.control)
                self.subscribed.set()
                backoff = 0.05
                while not self.stop_event.is_set():
                    message = pubsub.get_message(timeout=1.0)
                    if message is not None and message["type"] == "message":
                        self.handle(message["data"])
            except (RedisError, OSError) as exc:
                self.subscribed.clear()
                logger.warning("control channel lost (%s); reconnecting", exc)
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
            finally:
                pubsub.close()

    def handle(self, data: bytes) -> None:
        try:
            message = unpack(data)
        except ValueError:
            logger.warning("ignored a malformed control message")
            return
        if message.get("op") == "cancel":
            call_id = str(message.get("call_id"))
            if self.runtime.cancel_local(call_id, str(message.get("reason") or "cancelled")):
                logger.info("call %s: cancel requested", call_id)
        elif message.get("op") == "ended":
            self.runtime.session_ended(str(message.get("session_id")))

    def stop(self) -> None:
        self.stop_event.set()
