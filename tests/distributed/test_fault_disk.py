"""The ``disk`` fault scenario (``bench/chaos_fault_disk.py``), bounded: a real worker whose
``TOOLHUB_HOME`` is a 2 MiB tmpfs, a few calls printing 1 MB beside ordinary ones. Every call is
answered (right, or with a typed error saying what ran and what was lost), none wrongly; once
the logs are deleted the same worker answers new calls right. And a worker whose home is full
before its first call answers ``start_failed``, nothing run. Skipped where a tmpfs cannot be
mounted."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos_dispatcher import CONFIG, bash_args
from bench.chaos_fault_disk import Load, run
from bench.chaos_faults import table
from tests.fixtures_stack import STACK_ENV, WorkerProcess
from tests.small_disk import fill, small_disk
from toolhub import Session
from toolhub.distributed.shared import close_shared_backends
from toolhub.errors import ErrorCode
from toolhub.stack import RedisServer


def test_a_full_disk_gets_typed_answers_and_the_worker_recovers(tmp_path: Path) -> None:
    load = Load(
        workers=1,
        disk="2m",
        big_calls=5,
        ordinary_calls=3,
        after_calls=4,
        after_bytes=50_000,
        hung_after_s=45.0,
    )
    verdict = run(tmp_path, print, load)
    if "skipped" in verdict.rows:
        pytest.skip(str(verdict.rows["skipped"]))
    assert not verdict.missed, table([verdict])
    assert verdict.rows["full disk: typed errors (what ran, what was lost)"] > 0
    assert verdict.rows["free bytes while full"] < 256 << 10


def test_a_worker_whose_home_is_full_before_its_first_call_answers_start_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Nothing of the session exists on the worker's host yet (its name key, its directory):
    with no byte free, the call is a typed ``start_failed`` and nothing ran; once space is back
    the same worker runs the next call."""
    for key, value in STACK_ENV.items():
        monkeypatch.setenv(key, value)
    ws = tmp_path / "ws"
    ws.mkdir()
    with small_disk(tmp_path / "home", "1m") as home:
        redis = RedisServer().start()
        worker = WorkerProcess("full", redis.url, tmp_path, concurrency=1, env={
            "TOOLHUB_HOME": str(home)
        })  # fmt: skip
        try:
            worker.start()
            worker.wait_ready()
            fill(home)
            session = Session.connect(redis.url, CONFIG, ws, session_id="full-home")
            try:
                refused = session.call_sync("bash", bash_args("touch ran"), timeout=60)
                assert refused.is_error and refused.error is not None, refused.prompt_text
                assert refused.error.code == ErrorCode.START_FAILED, refused.prompt_text
                assert "ENOSPC" in refused.error.detail and "Nothing ran" in refused.error.detail
                assert not (ws / "ran").exists()
                for filler in home.glob("filler*"):
                    filler.unlink()
                after = session.call_sync("bash", bash_args("echo back"), timeout=60)
                assert not after.is_error and "back" in after.prompt_text, after.prompt_text
            finally:
                session.close()
        finally:
            close_shared_backends()
            worker.stop()
            redis.stop()
