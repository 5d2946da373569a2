"""A command printing 4 MiB on a real worker: Redis keeps at most the tenant's
``stream_bytes_per_call`` of its progress (the fleet policy's default, 1 MiB), a reader
replaying the call reads the trimmed marker first, the full output stays in the command's log
file, and a background task's ``task_output`` still shows its newest output and its size."""

from __future__ import annotations

import time
from pathlib import Path

from tests.distributed.helpers import TASK_TOOLS, wait_until
from toolhub import Progress, Session
from toolhub.core.trimmed import TRIMMED
from toolhub.tenancy import Quotas

FLOOD = 4 << 20
PRINT = f"head -c {FLOOD} /dev/zero | tr '\\0' x; echo; echo the-end"
CAP = Quotas().stream_bytes_per_call


def _held(store, cid: str) -> int:
    return sum(len(f[b"d"]) for _, f in store.client.xrange(store.keys.events(cid)))


def test_a_4_mib_stream_keeps_the_cap_in_redis_and_the_log_keeps_it_all(
    live, store, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    session = Session.connect(live.url, TASK_TOOLS, ws, session_id=f"flood-{time.time_ns()}")
    try:
        result = session.call_sync(
            "bash", {"command": PRINT, "description": "flood"}, call_id="flood-1"
        )
        assert not result.is_error, result.prompt_text
        held = _held(store, "flood-1")
        assert 0 < held <= CAP + (64 << 10)
        events = store.read_events("flood-1", 0)
        marker = events[0].item
        assert isinstance(marker, Progress) and marker.subkind == TRIMMED
        assert marker.payload["bytes"] >= FLOOD - CAP - (64 << 10)
        assert "full output" in marker.payload["text"]
        # The full output is in the command's log, which the result names.
        log = Path(result.output.value["log_path"])
        assert log.stat().st_size >= FLOOD and log.read_bytes().endswith(b"the-end\n")

        started = session.call_sync(
            "bash", {"command": PRINT, "description": "flood", "is_background": True}
        )
        assert not started.is_error, started.prompt_text
        task = started.output.value["task_id"]

        def finished() -> str | None:
            out = session.call_sync("task_output", {"task_ids": task})
            return out.prompt_text if "the-end" in out.prompt_text else None

        text = wait_until(finished, 60, every=0.5)
        assert _held(store, task) <= CAP + (64 << 10)
        assert str(FLOOD) in text.replace(",", "") or "4194" in text
    finally:
        session.close()
