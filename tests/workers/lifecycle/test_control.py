"""The control listener on a real Redis: a cancel published on the control channel reaches the
run it names, at once; a malformed message is ignored and the listener goes on; stopped, its
thread ends."""

from __future__ import annotations

import threading

from tests.distributed.helpers import wait_until
from toolhub.distributed.codec import pack
from toolhub.distributed.store import RedisStore
from workers.lifecycle.control import ControlListener


class Target:
    """A ``CancelTarget`` that records what it was asked to cancel."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store
        self.cancelled: list[tuple[str, str]] = []
        self.heard = threading.Event()

    def cancel_local(self, call_id: str, reason: str = "cancelled") -> bool:
        self.cancelled.append((call_id, reason))
        self.heard.set()
        return call_id == "mine"


def test_a_cancel_reaches_its_run_and_garbage_is_ignored(bare_store: RedisStore) -> None:
    target = Target(bare_store)
    listener = ControlListener(target)
    listener.start()
    try:
        assert listener.subscribed.wait(60)
        channel = bare_store.keys.control
        bare_store.client.publish(channel, b"\xc1 not msgpack")
        bare_store.client.publish(channel, pack({"op": "other", "call_id": "x"}))
        bare_store.client.publish(channel, pack({"op": "cancel", "call_id": "mine", "reason": "r"}))
        assert target.heard.wait(60)
        assert wait_until(lambda: target.cancelled, 30) == [("mine", "r")]
    finally:
        listener.stop()
        listener.join(30)
    assert not listener.is_alive()
