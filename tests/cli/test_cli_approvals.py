"""``toolhub approvals`` on a real fleet: the operator lists a waiting call, approves it (it
runs once, on a worker, recorded as the operator's decision) or denies it (its caller gets
the typed denial); a refused approval is one line on stderr and exit 1, no traceback. The
commands run in this process (``tests/cli/in_process.py``: a CLI subprocess costs seconds of
start-up on a busy machine), except the refusal, whose exit status a real process reports."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.in_process import run_cli
from tests.fixtures_stack import TOOLHUB, shared_stack
from toolhub import Session
from toolhub.core import CallResult
from toolhub.tools import CATALOG
from toolhub.toolset import ToolSetBuilder

pytestmark = pytest.mark.timeout(180)

CONFIG = {"permissions": {"rules": [{"tool": ["bash"], "command": ["echo *"], "decision": "ask"}]}}


def toolhub(url: str, *args: str, real: bool = False) -> subprocess.CompletedProcess[str]:
    """``toolhub approvals *args``: in this process, or a real ``toolhub`` process if ``real``."""
    env = {**os.environ, "TOOLHUB_REDIS_URL": url, "COLUMNS": "200"}
    if not real:
        return run_cli(["approvals", *args], env, Path.cwd())
    return subprocess.run(
        [TOOLHUB, "approvals", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_list_approve_and_deny_from_the_cli(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    stack = shared_stack(request)
    builder = ToolSetBuilder(CATALOG, plugins=False)
    session = Session.connect(stack.url, CONFIG, tmp_path, builder=builder)
    results: dict[str, Any] = {}

    def call(call_id: str, command: str) -> threading.Thread:
        def run() -> None:
            args = {"command": command, "description": "t"}
            results[call_id] = session.call_sync("bash", args, call_id=call_id)

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    try:
        first, second = call("cli-1", "echo one >> side.txt"), call("cli-2", "echo two")
        for _ in range(600):
            if len(session.pending()) == 2:
                break
            time.sleep(0.05)
        listed = toolhub(stack.url, "list", "--json")
        assert listed.returncode == 0, listed.stderr
        rows = {row["call_id"]: row for row in json.loads(listed.stdout)}
        assert set(rows) >= {"cli-1", "cli-2"}
        assert rows["cli-1"]["session_id"] == session.session_id
        table = toolhub(stack.url, "list", "--session", session.session_id)
        assert "cli-1" in table.stdout and "echo one" in table.stdout

        approved = toolhub(stack.url, "approve", "cli-1", "--as", "operator:ops")
        assert approved.returncode == 0, approved.stderr
        denied = toolhub(stack.url, "deny", "cli-2", "--reason", "no")
        assert denied.returncode == 0, denied.stderr
        first.join(60)
        second.join(60)
        assert isinstance(results["cli-1"], CallResult) and results["cli-1"].error is None
        assert (tmp_path / "side.txt").read_text() == "one\n"
        assert results["cli-2"].error.details["code"] == "approval_denied"
        record = session.record_sync("cli-1")
        assert record is not None and record["approval"]["decisions"][-1]["by"] == "operator:ops"

        again = toolhub(stack.url, "approve", "cli-1", real=True)
        assert again.returncode == 1 and "no longer awaits approval" in again.stderr
        assert "Traceback" not in again.stderr
        bad = toolhub(stack.url, "approve", "nope", "--arguments", "[1]")
        assert bad.returncode == 1 and "JSON object" in bad.stderr
    finally:
        session.close()
