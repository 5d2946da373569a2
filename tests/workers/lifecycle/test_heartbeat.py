"""The heartbeat writer: the file says the worker's state now, is rewritten while the worker
lives, and a write that fails never takes the worker down."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import pytest

from tests.distributed.helpers import wait_until
from workers.lifecycle.heartbeat import HeartbeatWriter


def test_the_writer_keeps_the_file_fresh_and_says_each_state_at_once(tmp_path: Path) -> None:
    path = tmp_path / "hb"
    writer = HeartbeatWriter(str(path), every_s=0.05)
    writer.set("starting")
    assert path.read_text() == "starting"
    writer.start()
    try:
        os.utime(path, (0, 0))
        wait_until(lambda: path.stat().st_mtime > time.time() - 60, 30)
        writer.set("ready")
        assert path.read_text() == "ready"
    finally:
        writer.stop()
        writer.join(30)
    assert not writer.is_alive()


def test_an_unknown_state_is_refused(tmp_path: Path) -> None:
    writer = HeartbeatWriter(str(tmp_path / "hb"))
    with pytest.raises(ValueError, match="unknown heartbeat state"):
        writer.set("readdy")
    assert writer.state == "starting"


def test_a_failed_write_is_logged_and_the_state_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    writer = HeartbeatWriter(str(blocker / "hb"))
    with caplog.at_level(logging.WARNING, logger="toolhub.worker"):
        writer.set("ready")
    assert writer.state == "ready"
    assert "heartbeat file not written" in caplog.text
