"""``toolhub top`` against the distributed suite's shared stack (a real redis-server and two real
``toolhub worker`` processes with their ``/metrics``): ``--once`` frames at 80 and 120 columns
show the calls made, the queues, each worker by the name its calls' records give, the running
background command and the tenant that used the fleet; what the fleet's callers wrote is drawn
as text, never as markup or control sequences; an unreachable Redis is one line on stderr
without the URL's password; Ctrl-C through a real pty leaves the dashboard with exit code 0."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.in_process import run_cli
from tests.fixtures_stack import TOOLHUB, Stack, shared_stack
from toolhub import Session

pytestmark = pytest.mark.timeout(180)

BASH = {"tools": [{"id": f"Main:{t}"} for t in ("bash", "task_output", "kill_task", "read_file")]}
#: What a caller may put in a command: rich markup and an escape sequence.
HOSTILE = "echo '[red]x[/]'\x1b[2J; sleep 300"


def top(stack: Stack, cwd: Path, *args: str, columns: int) -> subprocess.CompletedProcess[str]:
    metrics = [arg for w in stack.workers for arg in ("--metrics", w.metrics_url)]
    env = {**os.environ, "TOOLHUB_REDIS_URL": stack.url, "COLUMNS": str(columns)}
    return run_cli(["top", "--once", "--interval", "0.5", *metrics, *args], env, cwd)


def row(frame: str, name: str) -> list[str]:
    """The cells of the first line starting with ``name`` (a table row)."""
    for line in frame.splitlines():
        if line.startswith(name):
            return line.split()
    raise AssertionError(f"no row {name!r} in:\n{frame}")


def test_a_frame_shows_the_calls_queues_workers_tasks_and_tenants(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    stack = shared_stack(request)
    (tmp_path / "a.txt").write_text("hello\n")
    with (
        Session.connect(stack.url, BASH, tmp_path) as session,
        Session.connect(stack.url, BASH, tmp_path, session_id="acme~top-test") as tenant,
    ):
        for i in range(3):
            done = session.call_sync("bash", {"command": f"echo {i}", "description": "count"})
            assert not done.is_error, done.prompt_text
        tenant.call_sync("read_file", {"path": "a.txt"})
        started = session.call_sync(
            "bash", {"command": HOSTILE, "description": "hostile", "is_background": True}
        )
        assert started.output is not None, started.prompt_text
        task_id = started.output.value["task_id"]
        try:
            frames = {columns: top(stack, tmp_path, columns=columns) for columns in (80, 120)}
        finally:
            session.call_sync("kill_task", {"task_id": task_id})
    for columns, shown in frames.items():
        assert shown.returncode == 0, shown.stderr
        frame = shown.stdout
        assert all(len(line) <= columns for line in frame.splitlines()), frame
        assert "metrics: 2/2 up" in frame, frame
        bash = row(frame, "Main:bash")
        assert int(bash[2]) >= 3 and bash[3] == "0", bash  # calls, errors
        for queue in ("toolhub.fast", "toolhub.command", "toolhub.background"):
            assert queue in frame
        assert "Background tasks: " in frame and task_id[:12] in frame, frame
        assert "[red]x[/]" in frame, frame  # drawn as text, not as markup
        assert "\x1b" not in frame, "no control sequence of a caller reaches the terminal"
        assert "acme" in frame and "Tenants (this hour)" in frame, frame
        for worker in stack.workers:  # each endpoint joined to its worker's name in the records
            assert f"{socket.gethostname()}:{worker.pid}" in frame, frame


def test_an_unreachable_redis_is_one_line_without_its_password(tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "80"}
    url = "redis://:hunter2-secret@127.0.0.1:9/0"
    shown = run_cli(["top", "--once", "--redis", url], env, tmp_path)
    assert shown.returncode == 1
    assert "cannot reach Redis" in shown.stderr and "***" in shown.stderr
    assert "hunter2" not in shown.stderr + shown.stdout
    assert "Traceback" not in shown.stderr
    unset = {k: v for k, v in env.items() if "REDIS" not in k}
    missing = run_cli(["top", "--once"], unset, tmp_path)
    assert missing.returncode == 1 and "--redis" in missing.stderr


def test_a_worker_whose_metrics_do_not_answer_is_shown_down(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    stack = shared_stack(request)
    shown = top(stack, tmp_path, "--metrics", "http://127.0.0.1:9/metrics", columns=80)
    assert shown.returncode == 0, shown.stderr
    assert "metrics: 2/3 up" in shown.stdout, shown.stdout
    assert "(ConnectError)" in shown.stdout and " down " in shown.stdout, shown.stdout


def test_ctrl_c_in_a_terminal_exits_0_quietly(request: pytest.FixtureRequest) -> None:
    stack = shared_stack(request)
    env = {**os.environ, "TOOLHUB_REDIS_URL": stack.url, "COLUMNS": "100", "LINES": "40"}
    pid, master = pty.fork()
    if pid == 0:  # the child: the pty is its controlling terminal
        os.execve(TOOLHUB, [TOOLHUB, "top", "--interval", "0.3"], env)
    seen = b""
    try:
        seen = _read_until(master, b"Background tasks", 60)
        _read_until(master, b"toolhub top", 30)  # a second frame: it refreshes
        os.write(master, b"\x03")
        seen += _read_until(master, None, 30)
        _, status = os.waitpid(pid, 0)
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise
    finally:
        os.close(master)
    assert os.waitstatus_to_exitcode(status) == 0, seen.decode(errors="replace")
    text = seen.decode(errors="replace")
    assert "Traceback" not in text and "Aborted" not in text
    assert re.search(r"toolhub top\s+\d\d:\d\d:\d\d", text)


def _read_until(fd: int, marker: bytes | None, timeout: float) -> bytes:
    """What the pty shows until ``marker`` appears (None: until the child closes it)."""
    data = b""
    deadline = time.monotonic() + timeout
    while marker is None or marker not in data:
        left = deadline - time.monotonic()
        if left <= 0:
            raise AssertionError(f"not within {timeout}s: {data[-2000:]!r}")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the child exited and closed the pty
            chunk = b""
        if not chunk:
            if marker is None:
                return data
            raise AssertionError(f"the pty closed before {marker!r}: {data[-2000:]!r}")
        data += chunk
    return data
