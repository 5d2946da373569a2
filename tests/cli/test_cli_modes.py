"""Capability modes from the command line (issue 16): ``toolhub tools --mode M`` works for
every mode (it crashed for each), the default tool set is valid in each, and each mode keeps
what its help says."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.in_process import run_cli
from toolhub import Session
from toolhub.core import CapabilityMode

WRITES = {"edit_file", "write_file", "delete_file", "move_file"}
RUNS = {"bash", "monitor", "task_output", "wait_tasks", "kill_task"}
CALLS_OTHERS = {"use_tool", "search_tool"}


@pytest.mark.parametrize("mode", list(CapabilityMode))
def test_the_default_tool_set_is_valid_in_every_mode(mode: CapabilityMode, tmp_path: Path) -> None:
    with Session.embedded({"mode": mode.value}, tmp_path) as session:
        names = {d["name"] for d in session.definitions("mcp")}
    assert {"read_file", "grep", "glob", "list_dir"} <= names
    if mode is CapabilityMode.READ_ONLY:
        assert not names & (WRITES | RUNS | CALLS_OTHERS)
    if mode is CapabilityMode.READ_WRITE:
        assert names >= WRITES and not names & RUNS
    if mode is CapabilityMode.EXECUTE:
        assert names >= RUNS and not names & WRITES
    if mode is CapabilityMode.ALL:
        assert names >= WRITES | RUNS | CALLS_OTHERS


def test_tools_mode_from_the_cli(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    env["TOOLHUB_HOME"] = str(tmp_path / "home")
    counts = {}
    for mode in CapabilityMode:
        done = run_cli(
            ["tools", "--mode", mode.value, "--format", "mcp", "--workspace", str(tmp_path)],
            env,
            tmp_path,
        )
        assert done.returncode == 0, done.stderr
        counts[mode] = len(json.loads(done.stdout))
    assert counts[CapabilityMode.READ_ONLY] < counts[CapabilityMode.EXECUTE]
    assert counts[CapabilityMode.EXECUTE] < counts[CapabilityMode.ALL]
    bad = run_cli(["tools", "--mode", "bogus"], env, tmp_path)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "read_only" in bad.stderr
