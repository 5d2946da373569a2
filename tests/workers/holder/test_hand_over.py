"""The worker's side of a start (``workers/holder/hand_over.py``) and the fence it relies on
(``start_fence.lua``): each attempt's start is taken once, by the holder, the worker or nobody;
a frozen holder is alive but silent, and a request it reads after its deadline is refused. A
real redis-server, a real holder process."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from tests.distributed.helpers import queued_call
from toolhub.distributed.script_replies import StartFenceReply
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import RedisStore
from workers.holder.client import HolderClient
from workers.holder.hand_over import Unreached, hand_over

QUEUE = b"test.hand_over.unconsumed"
HOLDER, WORKER, WITHDRAWN, LOST = (
    StartFenceReply.HOLDER,
    StartFenceReply.WORKER,
    StartFenceReply.WITHDRAWN,
    StartFenceReply.LOST,
)


def _running(store: RedisStore, cid: str) -> int:
    """A call claimed by a worker; its attempt."""
    claim = store.records.claim(queued_call(store, cid, QUEUE), "w1")
    assert claim.action == "run"
    return claim.attempt


@pytest.mark.parametrize("first", [HOLDER, WORKER, WITHDRAWN])
def test_the_first_to_take_an_attempt_has_it(bare_store: RedisStore, first: StartFenceReply):
    attempt = _running(bare_store, "c")
    assert bare_store.records.fence_start("c", attempt, first) is first
    for later in (HOLDER, WORKER, WITHDRAWN):
        assert bare_store.records.fence_start("c", attempt, later) is first
    assert bare_store.get_record("c")["started_in"] == f"{attempt} {first}"


def test_an_attempt_the_call_moved_on_from_is_nobodys(bare_store: RedisStore):
    attempt = _running(bare_store, "c")
    assert bare_store.records.fence_start("c", attempt + 1, HOLDER) is LOST
    assert bare_store.records.fence_start("missing", 1, HOLDER) is LOST
    assert "started_in" not in bare_store.get_record("c")


@pytest.mark.timeout(60)
def test_a_frozen_holder_is_silent_and_refuses_the_request_once_thawed(
    bare_settings: Settings, bare_store: RedisStore, tmp_path: Path
):
    attempt = _running(bare_store, "c")
    client = HolderClient(bare_settings, home=tmp_path)
    assert not client.alive()
    assert client.ensure_running()
    pid = client.ping()["pid"]  # type: ignore[index]
    assert client.alive()
    os.kill(pid, signal.SIGSTOP)
    try:
        payload = {
            "op": "start",
            "message": {"call_id": "c", "session_id": "s"},
            "attempt": attempt,
        }
        began = time.monotonic()
        assert hand_over(client, payload, give_up=lambda: False, wait_s=2) is Unreached.SILENT
        assert time.monotonic() - began < 15
        assert client.alive()  # frozen, not dead: the worker must not run it around the holder
    finally:
        os.kill(pid, signal.SIGCONT)
    assert client.ping() is not None  # it has read the queued request, and refused it
    assert "started_in" not in bare_store.get_record("c")
    assert "refused a stale start request" in client.paths.log.read_text()
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while client.alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not client.alive()
