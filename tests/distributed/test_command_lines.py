"""No session id and no secret on any command line: a session id is the gateway's per-session
capability, and under Landlock every command can read every process's ``/proc/<pid>/cmdline``.
While a session's commands run (a background one on the holder, a foreground one on a worker,
both sandboxed by the workers' default, and one confined by Landlock in-process), every process
of the host is read: none names the session id, the holder's capability or the fleet's Redis
password. Real redis-server, real workers and holder."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import psutil
import pytest

from tests.distributed.helpers import TASK_TOOLS, wait_until
from tests.fixtures_stack import Stack
from toolhub import Session
from toolhub.backends.process import ProcessRunner
from toolhub.distributed.settings import Settings
from toolhub.sandbox import Mechanism, SandboxMode, SandboxPolicy
from toolhub.sandbox.landlock_syscalls import abi_version
from workers.holder.client import HolderClient
from workers.holder.session_records import session_dir

pytestmark = pytest.mark.timeout(120)


def _command_lines() -> list[str]:
    lines = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline")
        if cmdline:
            lines.append("\0".join(cmdline))
    return lines


def _secrets(live: Stack) -> list[str]:
    client = HolderClient(Settings.from_env(live.url), home=live.home)
    password = urlparse(live.url).password
    return [client.paths.secret.read_text().strip(), *([password] if password else [])]


def test_no_process_names_a_session_id_or_a_secret(live: Stack, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    sid = f"capability-{uuid.uuid4().hex}"
    with Session.connect(live.url, TASK_TOOLS, ws, session_id=sid) as session:
        started = session.call_sync(
            "bash", {"command": "sleep 30", "description": "t", "is_background": True}
        )
        assert not started.is_error, started.prompt_text
        assert started.output is not None
        task_id = started.output.value["task_id"]
        # The holder runs it (its sandbox and shell are up) while a foreground command runs too.
        wait_until(lambda: any("sleep\x0030" in line for line in _command_lines()), 20)
        done = session.call_sync("bash", {"command": "sleep 2; echo fg", "description": "t"})
        assert not done.is_error and "fg" in done.prompt_text
        lines = _command_lines()
        forbidden = [sid, *_secrets(live)]
        leaks = [line for line in lines for value in forbidden if value in line]
        assert leaks == []
        assert any("bwrap" in line or "landlock_exec" in line for line in lines)
        session.call_sync("kill_task", {"task_id": task_id})


@pytest.mark.skipif(abi_version() < 1, reason="the kernel has no Landlock")
def test_a_landlock_command_line_names_no_session_id(tmp_path: Path) -> None:
    """The Landlock wrapper's spec (its grants: the session's directory, named by an HMAC of the
    session id; the command's environment) travels in its environment, not its argv."""
    sid = f"capability-{uuid.uuid4().hex}"
    ws = tmp_path / "ws"
    ws.mkdir()
    directory = session_dir(tmp_path / "home", sid)
    policy = SandboxPolicy(
        ws, SandboxMode.WORKSPACE_WRITE, tmp_dir=directory / "tmp", mechanism=Mechanism.LANDLOCK
    )
    runner = ProcessRunner(ws, directory / "terminal", sandbox=policy)
    running = runner.start("sleep 20", log_name="probe")
    try:
        deadline = time.monotonic() + 20
        while not any(line.startswith("sleep\x0020") for line in _command_lines()):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        lines = _command_lines()
        assert any("landlock_exec" in line for line in lines)  # the shell that started it
        assert not [line for line in lines if sid in line or str(directory) in line]
    finally:
        running.kill("test")
        running.wait(10)
