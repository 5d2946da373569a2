"""A stuck run (``workers/calls/running.py``): asked to stop and not back within a grace
period, or running past the longest run its kind may have. Its lease is no longer renewed, so
the fleet answers the call as its policy says, its command is killed, and the worker takes new
calls. The rule on its own, then on a real worker whose foreground limit is 2 s."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from bench.chaos_dispatcher import CONFIG, bash_args
from tests.distributed.helpers import wait_until
from tests.fixtures_stack import STACK_ENV, WorkerProcess
from toolhub import Session
from toolhub.core import CancelToken
from toolhub.errors import ErrorCode
from toolhub.stack import RedisServer
from workers.calls.running import Running

#: A sleep no other process runs: how the test finds its command on the host.
MARK = "123.4567"


def sleeping() -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if proc.info["cmdline"] == ["sleep", MARK]:
            found.append(proc)
    return found


def test_a_run_is_stuck_past_its_limit_or_long_after_it_was_asked_to_stop() -> None:
    run = Running("c", CancelToken(), 1, limit_s=10.0)
    start = run.started
    assert not run.stuck(5.0, now=start + 14.0)
    assert run.stuck(5.0, now=start + 15.5)
    asked = Running("d", CancelToken(), 1)
    asked.token.cancel("cancelled")
    assert asked.stopping_since is not None
    assert not asked.stuck(5.0, now=asked.stopping_since + 4.0)
    assert asked.stuck(5.0, now=asked.stopping_since + 5.5)
    assert not Running("e", CancelToken(), 1).stuck(5.0, now=time.monotonic() + 1e6)


@pytest.fixture
def fleet(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Redis and one worker with one pool thread and a 2 s foreground limit."""
    for key, value in STACK_ENV.items():
        monkeypatch.setenv(key, value)
    home = Path(tempfile.mkdtemp(prefix="toolhub-stuck-"))
    redis = RedisServer().start()
    env = {"TOOLHUB_MAX_FOREGROUND_SECONDS": "2"}
    worker = WorkerProcess("stuck", redis.url, home, concurrency=1, env=env)
    try:
        worker.start()
        worker.wait_ready()
        yield redis.url
    finally:
        from toolhub.distributed.shared import close_shared_backends

        close_shared_backends()
        worker.stop()
        redis.stop()
        shutil.rmtree(home, ignore_errors=True)


def test_a_run_past_its_limit_loses_its_lease_its_command_dies_and_the_worker_goes_on(
    fleet: str, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    session = Session.connect(fleet, CONFIG, ws, session_id=f"stuck-{time.time_ns()}")
    try:
        args = {**bash_args(f"sleep {MARK}"), "timeout": 300_000}
        result = session.call_sync("bash", args, call_id="stuck-1", timeout=90)
        assert result.is_error and result.error is not None, result.prompt_text
        assert result.error.code == ErrorCode.WORKER_LOST, result.prompt_text
        wait_until(lambda: not sleeping(), 30, every=0.2)
        after = session.call_sync("bash", bash_args("echo next"), call_id="stuck-2", timeout=60)
        assert not after.is_error and "next" in after.prompt_text, after.prompt_text
    finally:
        session.close()
