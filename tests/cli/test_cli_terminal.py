"""The CLI at a terminal (issue 40): Ctrl-C and terminal width through a real pty
(``tests/cli/terminal.py``), the rest in this process (``tests/cli/in_process.py``)."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest
from rich.console import Console

from tests.cli.in_process import run_cli
from tests.cli.terminal import Terminal
from toolhub.cli.task_table import task_tables
from toolhub.cli.up import banner
from toolhub.ports import free_port
from toolhub.stack.local import StackInfo
from toolhub.stack.supervisor import descendants
from toolhub.tasks.base import TaskSnapshot

pytestmark = pytest.mark.timeout(180)

TYPO = "tools:\n  - idd: Main:bash\n  - id: Main:no_such_tool\n    limits: {foo: 1}\n"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "pty", "version": "1"},
    },
}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    environ = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("TOOLHUB_") or k == "TOOLHUB_ALLOW_ROOT"
    }
    return {**environ, "TOOLHUB_HOME": str(tmp_path / "home")}


def test_ctrl_c_while_the_cli_loads_is_one_line_and_130(
    env: dict[str, str], tmp_path: Path
) -> None:
    with Terminal(["tools"], env, tmp_path) as term:
        # pydantic's core is loaded while the CLI is imported, after toolhub_start answers
        # Ctrl-C and about a second of CPU before the command runs.
        term.until(lambda: "_pydantic_core" in _maps(term.proc.pid), 60, "the CLI loading")
        term.interrupt()
        assert term.wait() == 130, term.text
    assert "Traceback" not in term.text and "KeyboardInterrupt" not in term.text, term.text
    assert term.text.strip().endswith("interrupted"), term.text


def test_mcp_over_stdio_stops_on_the_first_ctrl_c(env: dict[str, str], tmp_path: Path) -> None:
    """Also: an unknown tool's error names the close ones."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    with Terminal(["mcp", "--workspace", str(workspace)], env, tmp_path) as term:
        term.send(json.dumps(INITIALIZE).encode() + b"\n")
        term.expect('"serverInfo"', 120)
        term.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
        call["params"] = {"name": "read_fil", "arguments": {}}
        term.send(json.dumps(call).encode() + b"\n")
        term.expect("Did you mean `read_file`", 60)
        term.interrupt()
        assert term.wait(60) == 130, term.text
    assert "Traceback" not in term.text, term.text
    assert term.text.rstrip().endswith("^Cinterrupted"), term.text


def test_ctrl_c_while_up_starts_stops_what_started_without_a_banner(
    env: dict[str, str], tmp_path: Path
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ports = ["--port", str(free_port()), "--flower-port", str(free_port())]
    args = ["up", "--workers", "1", "--metrics-port", "0", *ports]
    started: set[int] = set()
    with Terminal(args, env, workspace) as term:
        term.expect("starting Redis", 120)
        term.until(lambda: bool(descendants(term.proc.pid)), 60, "a first part of the stack")
        started = descendants(term.proc.pid)
        term.interrupt()
        assert term.wait(90) == 130, term.text
    shown = term.text
    assert "Flower login" not in shown and "Connect from another shell" not in shown, shown
    assert "Traceback" not in shown and shown.rstrip().endswith("interrupted"), shown
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in started) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert [pid for pid in started if _alive(pid)] == [], "what had started was stopped"


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:  # gone, or gone while asked
        return False


@pytest.mark.parametrize("columns", [80, 120])
def test_validate_at_a_terminal_lists_every_violation_whole(
    env: dict[str, str], tmp_path: Path, columns: int
) -> None:
    (tmp_path / "typo.yaml").write_text(TYPO)
    with Terminal(["validate", "typo.yaml"], env, tmp_path, columns=columns) as term:
        assert term.wait(120) == 1
    shown = term.text
    assert "configuration violations (4)" in shown, shown
    assert "did you mean 'id'?" in shown, "the typo'd key says which key"
    assert "unknown tool 'Main:no_such_tool'" in shown, "the typo hides nothing else"
    for identifier in ("tools[0].idd", "tools[1].limits", "Main:no_such_tool", "tools[1].id"):
        assert identifier in shown, f"{identifier} whole at {columns} columns:\n{shown}"
    assert all(len(line) <= columns for line in shown.splitlines()), shown


def test_tools_at_80_columns_is_whole_json(env: dict[str, str], tmp_path: Path) -> None:
    with Terminal(["tools", "--format", "anthropic"], env, tmp_path, columns=80) as term:
        assert term.wait(120) == 0
    tools = json.loads(term.text)
    assert "read_file" in [tool["name"] for tool in tools]


def test_validate_one_line_for_a_missing_file_or_a_syntax_error(
    env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "broken.yaml").write_text("tools:\n  - id: Main:bash\n   bad: [\n")
    missing = run_cli(["validate", "missing.yaml"], env, tmp_path)
    assert missing.returncode == 1 and missing.stderr == "error: missing.yaml: no such file\n"
    broken = run_cli(["validate", "broken.yaml"], env, tmp_path)
    assert broken.returncode == 1 and broken.stderr.count("\n") <= 3, broken.stderr
    assert "YAML syntax error at line 3, column 4" in broken.stderr


def test_help_and_usage_errors_read_as_a_person_expects(
    env: dict[str, str], tmp_path: Path
) -> None:
    helped = run_cli(["call", "--help"], {**env, "COLUMNS": "80"}, tmp_path)
    assert "<bool>" not in helped.stdout and "{name}" not in helped.stdout
    assert "call [OPTIONS] NAME [ARGS]" in helped.stdout
    assert "exits non-zero is a successful call" in " ".join(helped.stdout.split())
    strict = run_cli(["tools", "--strict", "true"], env, tmp_path)
    assert strict.returncode == 2 and "--strict is a flag" in strict.stderr
    mode = run_cli(["tools", "--mode", "bogus"], env, tmp_path)
    assert mode.returncode == 2 and "Value error" not in mode.stderr
    assert "'bogus' is not one of" in mode.stderr
    url = run_cli(["tasks", "list", "--redis", "localhost:6379"], env, tmp_path)
    assert url.returncode == 2 and "is not a Redis URL" in " ".join(url.stderr.split())
    assert "internal error" not in url.stderr


def _snapshot(task_id: str, session: str, **fields: object) -> TaskSnapshot:
    started = datetime.now(UTC) - timedelta(seconds=30)
    return TaskSnapshot(task_id=task_id, owner_session=session, started_at=started, **fields)


@pytest.mark.parametrize("columns", [80, 120])
def test_tasks_list_tables_fit_the_terminal(columns: int) -> None:
    """Rendered in this process (a stack's task records take real workers to make; the
    command itself against Redis: tests/cli/test_cli_tasks.py)."""
    session = "3f2a9c1e4b5d4e6f8a7b9c0d1e2f3a4b"
    tasks = [
        _snapshot("task-0123456789", session, command="for i in 1 2 3; do echo $i; done",
                  status="exited", exit_code=0,
                  finished_at=datetime.now(UTC) - timedelta(seconds=29)),
        _snapshot("task-abcdef0123", session, command="sleep 300", status="lost",
                  attempt=2, max_attempts=3),
    ]  # fmt: skip
    console = Console(width=columns, record=True, force_terminal=False)
    for table in task_tables(tasks, columns):
        console.print(table)
    shown = console.export_text()
    assert f"of session {session}" in shown
    for text in ("task-0123456789", "exited", "recovering (run 2/3)", "30.0s", "1.0s"):
        assert text in shown, f"{text} at {columns} columns:\n{shown}"
    assert all(len(line.rstrip()) <= columns for line in shown.splitlines()), shown


def test_up_banner_at_80_columns_keeps_every_value_whole(tmp_path: Path) -> None:
    """The banner's renderer in this process (the whole stack: tests/stack/test_stack_up.py)."""
    info = StackInfo(
        redis_url="redis://:Zx1-abcdefghijklmnopqrstuvwxyz0123@127.0.0.1:45678/0",
        gateway_url="http://127.0.0.1:8000",
        flower_url="http://127.0.0.1:5555",
        flower_user="toolhub",
        flower_password="pw-abcdefghijklmnop",
        logs=tmp_path / "up" / "20261207-101500",
        metrics_urls=("http://127.0.0.1:9100/metrics",),
        fleet_key_file=tmp_path / "up" / "fleet.key",
    )
    console = Console(width=80, record=True, force_terminal=False)
    for line in banner(info, 2):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    shown = console.export_text()
    for value in (info.redis_url, info.flower_password, "http://127.0.0.1:9100/metrics"):
        assert value in shown.splitlines()[-10:] or value in shown, shown
        assert any(value in line for line in shown.splitlines()), f"{value} on one line"
