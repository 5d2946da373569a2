"""``toolhub tasks`` (in this process, ``tests/cli/in_process.py``): against Redis (the
distributed suite's shared stack) and embedded (the logs a session left in its directory)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.in_process import run_cli
from tests.cli.terminal import Terminal
from tests.fixtures_stack import shared_stack
from toolhub import Session

pytestmark = pytest.mark.timeout(120)

BASH = {"tools": [{"id": f"Main:{t}"} for t in ("bash", "task_output", "kill_task")]}


def tasks(
    *args: str, env: dict[str, str], cwd: Path, columns: int = 200
) -> subprocess.CompletedProcess[str]:
    return run_cli(["tasks", *args], {**env, "COLUMNS": str(columns)}, cwd)


def start_background(session: Session, command: str) -> str:
    result = session.call_sync(
        "bash", {"command": command, "description": "test task", "is_background": True}
    )
    assert not result.is_error, result.prompt_text
    assert result.output is not None
    return str(result.output.value["task_id"])


def test_tasks_against_redis(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    stack = shared_stack(request)
    env = {**os.environ, "TOOLHUB_REDIS_URL": stack.url}
    with Session.connect(stack.url, BASH, tmp_path) as session:
        lines = start_background(session, "for i in 1 2 3; do echo line$i; sleep 0.3; done")
        endless = start_background(session, "sleep 300")

        listed = tasks("list", "--session", session.session_id, env=env, cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert lines in listed.stdout and endless in listed.stdout

        followed = tasks("logs", lines, "--follow", env=env, cwd=tmp_path)
        assert followed.returncode == 0, followed.stderr
        printed = followed.stdout.splitlines()
        if "host lost" in followed.stderr:  # under heavy load the holder's lease can lapse:
            assert printed[-3:] == ["line1", "line2", "line3"], followed  # a said restart
        else:
            assert printed == ["line1", "line2", "line3"]

        shown = tasks("show", lines, "--json", env=env, cwd=tmp_path)
        assert '"status": "exited"' in shown.stdout and '"exit_code": 0' in shown.stdout

        killed = tasks("kill", endless, env=env, cwd=tmp_path)
        assert killed.returncode == 0 and killed.stdout.strip() == f"{endless}: killed"
        deadline = time.monotonic() + 15
        while "killed" not in tasks("show", endless, env=env, cwd=tmp_path).stdout:
            assert time.monotonic() < deadline, "the task was not killed"
            time.sleep(0.2)

        everyone = tasks("list", env=env, cwd=tmp_path)
        assert lines in everyone.stdout, "without --session every session's tasks"
        narrow = tasks("list", "--session", session.session_id, env=env, cwd=tmp_path, columns=80)
        assert lines in narrow.stdout and endless in narrow.stdout, narrow.stdout
        assert session.session_id in narrow.stdout, "ids are never cut, even at 80 columns"
        for columns in (80, 120):  # as a person sees it: a real terminal of that width
            args = ["tasks", "list", "--session", session.session_id]
            with Terminal(args, env, tmp_path, columns=columns) as term:
                assert term.wait(120) == 0, term.text
            shown = term.text
            assert f"of session {session.session_id}" in shown, shown
            for row in (lines, endless):
                line = next(line for line in shown.splitlines() if row in line)
                assert "running" in line or "exited" in line or "killed" in line, shown
                assert line.split()[-1] != row, f"status, times and command shown:\n{shown}"
            assert all(len(line) <= columns for line in shown.splitlines()), shown

        # A unique prefix names a task; an ambiguous one says which ids it could be.
        prefixed = tasks("show", lines[: len(lines) - 3], "--json", env=env, cwd=tmp_path)
        assert prefixed.returncode == 0 and f'"task_id": "{lines}"' in prefixed.stdout
        ambiguous = tasks("show", "task-", env=env, cwd=tmp_path)
        assert ambiguous.returncode == 1 and "ambiguous" in ambiguous.stderr

        missing = tasks("show", "task-nope", env=env, cwd=tmp_path)
        assert missing.returncode == 1 and "no background task" in missing.stderr
        unreachable = tasks("list", "--redis", "redis://127.0.0.1:9/0", env=env, cwd=tmp_path)
        assert unreachable.returncode == 1 and "cannot reach Redis" in unreachable.stderr


def test_tasks_embedded_read_the_session_logs(tmp_path: Path) -> None:
    home = tmp_path / "home"
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    env["TOOLHUB_HOME"] = str(home)
    previous = os.environ.get("TOOLHUB_HOME")
    os.environ["TOOLHUB_HOME"] = str(home)
    try:
        with Session.embedded(BASH, workspace) as session:
            task_id = start_background(session, "echo embedded output")
            session.call_sync("task_output", {"task_ids": [task_id], "timeout_ms": 10000})
    finally:
        if previous is None:
            os.environ.pop("TOOLHUB_HOME")
        else:
            os.environ["TOOLHUB_HOME"] = previous

    listed = tasks("list", env=env, cwd=workspace)
    assert listed.returncode == 0 and task_id in listed.stdout
    logs = tasks("logs", task_id[:-2], env=env, cwd=workspace)
    assert logs.returncode == 0 and "embedded output" in logs.stdout
    shown = tasks("show", task_id, env=env, cwd=workspace)
    assert shown.returncode == 0 and "embedded output" in shown.stdout

    refused = tasks("kill", task_id, env=env, cwd=workspace)
    assert refused.returncode == 1 and "kill_task" in refused.stderr
    missing = tasks("logs", "task-nope", env=env, cwd=workspace)
    assert missing.returncode == 1 and "no background task" in missing.stderr
