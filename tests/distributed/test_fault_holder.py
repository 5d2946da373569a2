"""A frozen holder (SIGSTOP) while background commands start, then thawed (SIGCONT): every
command runs exactly once, its record says attempt 1, ``task_output`` shows one copy; a holder
frozen for longer than a worker waits gets the attempt withdrawn, and the caller is told that
nothing ran (and nothing did, even after the thaw). The bounded version of
``bench/chaos_fault_holder.py``: a real redis-server, a real ``toolhub worker``, a real holder.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.chaos_fault_holder import freeze_and_start, holder_pid
from tests.fixtures_stack import Stack
from toolhub.distributed.settings import Settings
from workers.holder.client import HolderPaths

#: How long the worker waits for a live holder that does not answer (the default is 60 s).
WAIT_S = 14


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    fleet = Stack(workers=1, env={"TOOLHUB_HOLDER_START_WAIT_SECONDS": str(WAIT_S)}).start()
    yield fleet
    fleet.stop()


@pytest.mark.timeout(120)
def test_a_start_request_read_late_runs_once(stack: Stack, tmp_path: Path) -> None:
    # Frozen past the first request's 10 s reply timeout, thawed within the worker's wait: the
    # holder reads the stale request first (refused), then the worker's next one (started).
    (item,) = freeze_and_start(
        stack, tmp_path, freeze_s=12.0, start_at=[0.5], say=lambda _: None, count_to=2
    )
    assert item.task_id, item.error
    assert item.copies == 1, item
    assert item.status == "succeeded" and item.attempts == 1, item
    assert item.output == ["1", "2"], item
    assert "refused a stale start request" in _holder_log(stack)


def _holder_log(stack: Stack) -> str:
    return HolderPaths.of(Settings.from_env(stack.url), stack.home).log.read_text()


def _after_the_backlog(stack: Stack) -> None:
    """Once the thawed holder answers a ping it has read every request queued before it (one
    at a time, in order); a command one of them started has written its line a moment later."""
    holder_pid(stack)
    time.sleep(2)


@pytest.mark.timeout(120)
@pytest.mark.long  # run by `make test-long`; make test keeps the late-read start
def test_a_holder_frozen_past_the_wait_runs_nothing_and_says_so(
    stack: Stack, tmp_path: Path
) -> None:
    (item,) = freeze_and_start(
        stack, tmp_path, freeze_s=WAIT_S + 4.0, start_at=[0.5], say=lambda _: None, count_to=2
    )
    assert item.task_id, item.error
    assert item.status == "failed", item
    error = item.result["error"]
    assert error["details"]["code"] == "start_failed", error
    assert error["details"]["may_have_run"] is False, error
    assert "did not answer" in error["detail"] and "Nothing ran" in error["detail"], error
    # The thawed holder read the queued requests and refused them all.
    _after_the_backlog(stack)
    assert not (tmp_path / f"{item.name}.runs").exists()
