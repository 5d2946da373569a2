"""Deleting a session on the fleet removes its command logs and tmp on the worker hosts
(real workers: ``RedisStore.drop_session`` announces it on the control channel); an ``ended``
message for a session that still exists removes nothing."""

from __future__ import annotations

import time
from pathlib import Path

from tests.distributed.helpers import TASK_TOOLS, wait_until
from toolhub import Session
from toolhub.distributed.codec import pack


def _logged(session: Session) -> Path:
    result = session.call_sync("bash", {"command": "echo logged", "description": "log"})
    assert not result.is_error, result.prompt_text
    log = Path(result.output.value["log_path"])
    assert log.is_file()
    return log


def test_deleting_a_session_removes_its_logs_on_the_workers(live, store, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    kept = Session.connect(live.url, TASK_TOOLS, ws, session_id=f"kept-{time.time_ns()}")
    gone = Session.connect(live.url, TASK_TOOLS, ws, session_id=f"gone-{time.time_ns()}")
    try:
        kept_log, gone_log = _logged(kept), _logged(gone)
        # A forged announcement for a live session is ignored.
        store.client.publish(
            store.keys.control, pack({"op": "ended", "session_id": kept.session_id})
        )
        gone.end()
        wait_until(lambda: not gone_log.parent.exists(), 20)
        assert kept_log.is_file()
        assert (ws).is_dir(), "the workspace is the tenant's: it stays"
    finally:
        kept.close()
