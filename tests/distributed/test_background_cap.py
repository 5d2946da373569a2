"""The cap on one session's running background tasks on the fleet path: ``bash`` with
``is_background`` on real workers (the check runs where the tool runs, against the worker's
operator policy: the default ``background_tasks_per_session``, 32). The 33rd gets a typed
``rate_limited`` error naming the cap; the 32 run on, and another session still starts one."""

from __future__ import annotations

import time
from pathlib import Path

from tests.distributed.helpers import TASK_TOOLS
from toolhub import Session
from toolhub.tasks import BackgroundTasks
from toolhub.tenancy import Quotas

CAP = Quotas().background_tasks_per_session


def _start(session: Session):
    return session.call_sync(
        "bash", {"command": "sleep 60", "description": "bg", "is_background": True}
    )


def test_the_33rd_background_task_of_a_session_is_rate_limited(live, tmp_path: Path) -> None:
    assert CAP == 32
    ws = tmp_path / "ws"
    ws.mkdir()
    flood = Session.connect(live.url, TASK_TOOLS, ws, session_id=f"bg-cap-{time.time_ns()}")
    other = Session.connect(live.url, TASK_TOOLS, ws, session_id=f"bg-other-{time.time_ns()}")
    started: list[str] = []
    try:
        for _ in range(CAP):
            result = _start(flood)
            assert not result.is_error, result.prompt_text
            started.append(result.output.value["task_id"])
        refused = _start(flood)
        assert refused.is_error and refused.error.kind == "rate_limited"
        assert refused.error.details == {"quota": "background_tasks_per_session", "limit": CAP}
        assert f"`background_tasks_per_session`: {CAP}" in refused.prompt_text
        tasks = flood.resources.get(BackgroundTasks)
        assert len(tasks.running(flood.session_id)) == CAP
        alone = _start(other)
        assert not alone.is_error, alone.prompt_text
        started.append(alone.output.value["task_id"])
    finally:
        for session in (flood, other):
            tasks = session.resources.get(BackgroundTasks)
            for task in started:
                tasks.kill(task)
            session.close()
