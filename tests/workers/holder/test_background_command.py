"""A background command's end as a call result (``workers/holder/background_command.py``): a
command whose log could not be written to the end, on a real full disk, is a typed
``output_log_incomplete`` result saying how much the log holds, never a plain ``exit: 0``."""

from __future__ import annotations

from pathlib import Path

from tests.small_disk import small_disk
from toolhub.backends.process import ProcessRunner
from toolhub.errors import ErrorCode
from workers.holder.background_command import command_result


def test_a_background_command_whose_log_was_cut_says_so(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    with small_disk(tmp_path / "disk", "128k") as disk:
        runner = ProcessRunner(root, disk / "terminal")
        outcome = runner.run("head -c 1000000 /dev/zero | tr '\\0' x", log_name="bg", timeout_s=60)
        result = command_result("task-1", outcome)
        assert result.is_error and result.error is not None
        assert result.error.code == ErrorCode.OUTPUT_LOG_INCOMPLETE
        details = result.error.details or {}
        assert details["exit_code"] == 0 and details["total_bytes"] == 1_000_000
        assert 0 < details["log_bytes_written"] <= 128 << 10
        assert "ENOSPC" in result.error.detail
        # Space back: the next command's end is a plain result again.
        (disk / "terminal" / "bg.log").unlink()
        assert not command_result("task-2", runner.run("echo ok", log_name="ok")).is_error
