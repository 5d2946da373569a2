"""The cap on one session's running background tasks (``background_tasks_per_session`` of the
tenant's quotas), on real processes through ``bash``: the task past the cap gets a typed
``rate_limited`` error naming the cap, the tasks already running are untouched, another
session is not held up, and a slot comes back when a task ends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.tools.harness import Harness
from toolhub.core import ErrorKind
from toolhub.tasks import BackgroundTasks
from toolhub.tenancy import POLICY_ENV
from toolhub.tools.background import KillTask
from toolhub.tools.shell import Bash

CAP = 3


@pytest.fixture
def capped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"quotas:\n  default:\n    background_tasks_per_session: {CAP}\n")
    monkeypatch.setenv(POLICY_ENV, str(policy))
    ws = tmp_path / "ws"
    ws.mkdir()
    h = Harness(ws, tmp_path / "session")
    yield h
    for value in h.container.values():
        close = getattr(value, "close", None)
        if callable(close):
            close()


def _start(h: Harness):
    return h.call(Bash, {"command": "sleep 60", "description": "bg", "is_background": True})


def test_the_task_past_the_cap_is_rate_limited_and_the_others_run_on(capped: Harness) -> None:
    started = [_start(capped).output.task_id for _ in range(CAP)]
    refused = _start(capped)
    assert refused.error is not None and refused.error.kind is ErrorKind.RATE_LIMITED
    assert refused.error.details == {"quota": "background_tasks_per_session", "limit": CAP}
    assert f"`background_tasks_per_session`: {CAP}" in refused.error.detail
    tasks = capped.container.require(BackgroundTasks)
    assert [t.task_id for t in tasks.running(capped.session_id)] == started
    # Another session of the same backend is not held up by this one's tasks.
    other = tasks.start("true", cwd=None, timeout_ms=None, owner_session="s2", call_id="c")
    assert tasks.snapshot(other) is not None
    # One ended: room for one more.
    capped.call(KillTask, {"task_id": started[0]})
    assert _start(capped).error is None
