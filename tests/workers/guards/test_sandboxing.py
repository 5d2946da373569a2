"""Workers sandbox every command by default (``workers/guards/sandboxing.py``): a command of one
session on a shared worker cannot read another session's workspace, write outside its own, read the
worker's environment or its ``/proc/<pid>/environ``, reach Redis, or follow a symlink out, while
its legitimate work in the same command is done; foreground and background (holder) alike. A
worker that cannot enforce its sandbox refuses to start.

Real redis-server, a real ``toolhub worker`` with the worker defaults (no ``TOOLHUB_SANDBOX``),
real bubblewrap.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.helpers import TASK_TOOLS
from tests.fixtures_stack import WorkerProcess
from tests.sandbox.conftest import requires_bwrap
from toolhub import Session
from toolhub.core import drain
from toolhub.stack import RedisServer

pytestmark = [requires_bwrap, pytest.mark.timeout(120)]

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))
TOKEN = "tok-worker-4f1e2d"


@dataclass
class Fleet:
    redis: RedisServer
    worker: WorkerProcess
    root: Path
    home: Path

    def session(self, name: str, config: dict[str, Any] = TASK_TOOLS) -> tuple[Session, Path]:
        ws = self.root / name
        ws.mkdir(exist_ok=True)
        return Session.connect(self.redis.url, config, ws, session_id=name), ws


#: The worker default on this machine (bwrap), and the fallback where bwrap cannot run (a bwrap
#: that fails, as under the chart's seccomp profile): ``auto`` then confines with Landlock.
MECHANISMS = {"bwrap": {}, "landlock-fallback": {"TOOLHUB_BWRAP": "/bin/false"}}


@pytest.fixture(scope="module", params=sorted(MECHANISMS))
def fleet(request: pytest.FixtureRequest) -> Iterator[Fleet]:
    # Outside /tmp: the sandbox's /tmp is private, which would hide a sibling for the wrong
    # reason. TOOLHUB_WORKSPACE_ROOT is what hides the other sessions here.
    base = Path(tempfile.mkdtemp(prefix="toolhub-wsbx-", dir="/var/tmp"))
    root, home = base / "workspaces", base / "home"
    root.mkdir()
    home.mkdir()
    redis = RedisServer().start()
    worker = WorkerProcess(
        "sbx",
        redis.url,
        home,
        env={
            "TOOLHUB_SANDBOX": "",  # unset: the worker default, whatever the suite's stack uses
            "TOOLHUB_WORKSPACE_ROOT": str(root),
            "TOOLHUB_API_TOKEN": TOKEN,
            **MECHANISMS[request.param],
        },
    )
    try:
        worker.start()
        worker.wait_ready()
        yield Fleet(redis, worker, root, home)
    finally:
        worker.stop()
        redis.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def redis_url() -> Iterator[str]:
    redis = RedisServer().start()
    try:
        yield redis.url
    finally:
        redis.stop()


def probe_script(
    fleet: Fleet, ws: Path, other: Path, legit: str = "echo legit > result.txt"
) -> str:
    """One command that does its job (``legit``) and tries every way out, printing what
    happened."""
    port = fleet.redis.url.rsplit(":", 1)[1].split("/")[0]
    (ws / "to-other").unlink(missing_ok=True)
    (ws / "to-other").symlink_to(other / "secret.txt")
    return "; ".join(
        [
            legit,
            f"cat {other}/secret.txt 2>/dev/null || echo OTHER-REFUSED",
            "cat to-other 2>/dev/null || echo LINK-REFUSED",
            f"echo x > {fleet.root}/planted.txt 2>/dev/null || echo ROOT-WRITE-REFUSED",
            "echo x > /var/tmp/planted-by-command.txt 2>/dev/null || echo WRITE-REFUSED",
            f"cat /proc/{fleet.worker.pid}/environ 2>/dev/null || echo ENVIRON-REFUSED",
            f"ls {fleet.home} 2>/dev/null | grep -q . && echo HOME-VISIBLE || echo HOME-HIDDEN",
            f"(exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && echo NET-OPEN || echo NET-REFUSED",
            "env",
        ]
    )


def assert_confined(out: str, fleet: Fleet, ws: Path, *, wrote: bool = True) -> None:
    for refused in (
        "OTHER-REFUSED",
        "LINK-REFUSED",
        "ROOT-WRITE-REFUSED",
        "WRITE-REFUSED",
        "ENVIRON-REFUSED",
        "HOME-HIDDEN",
        "NET-REFUSED",
    ):
        assert refused in out, (refused, out)
    assert "s3cret-of-b" not in out
    assert TOKEN not in out and "TOOLHUB_REDIS_URL" not in out and fleet.redis.url not in out
    home = next(line[5:] for line in out.splitlines() if line.startswith("HOME="))
    # bwrap: the private tmp mounted at /tmp; Landlock: the private tmp where it is.
    assert home == "/tmp/home" or home.startswith(f"{fleet.home}/worker-sessions/"), home
    if wrote:
        assert (ws / "result.txt").read_text() == "legit\n"
    assert not (fleet.root / "planted.txt").exists()
    assert not Path("/var/tmp/planted-by-command.txt").exists()


def _other(fleet: Fleet) -> Path:
    other = fleet.root / "b"
    other.mkdir(exist_ok=True)
    (other / "secret.txt").write_text("s3cret-of-b\n")
    return other


def run_probe(fleet: Fleet, session: Session, ws: Path, other: Path) -> None:
    """The probe as a foreground ``bash`` call of ``session``; asserts it was confined."""
    try:
        done = session.call_sync(
            "bash", {"command": probe_script(fleet, ws, other), "description": "probe"}
        )
    finally:
        session.close()
    assert not done.is_error, done.prompt_text
    assert done.output is not None
    output = done.output.value
    assert output["exit_code"] == 0 and output["omitted_bytes"] == 0, output
    assert_confined(output["output"], fleet, ws)


def test_a_foreground_command_is_confined_to_its_session(fleet: Fleet) -> None:
    other = _other(fleet)
    session, ws = fleet.session("a")
    run_probe(fleet, session, ws, other)


def test_a_background_command_on_the_holder_is_confined_too(fleet: Fleet) -> None:
    other = _other(fleet)
    session, ws = fleet.session("c")
    try:
        started = session.call_sync(
            "bash",
            {
                "command": probe_script(fleet, ws, other),
                "description": "probe",
                "is_background": True,
            },
        )
        assert not started.is_error, started.prompt_text
        assert started.output is not None
        task_id = started.output.value["task_id"]
        waited = session.call_sync("wait_tasks", {"task_ids": [task_id], "timeout_ms": 30000})
        assert not waited.is_error, waited.prompt_text
        shown = session.call_sync("task_output", {"task_ids": [task_id]})
    finally:
        session.close()
    assert shown.output is not None
    [task] = shown.output.value["tasks"]
    logs = "".join(p.read_text() for p in fleet.home.rglob("*.log"))
    assert task["status"] == "exited", json.dumps(task) + logs[-3000:]
    assert_confined(task["output"], fleet, ws)


def test_read_only_mode_on_a_worker_reads_its_workspace_and_nothing_else(fleet: Fleet) -> None:
    """The same probe in a session configured ``read_only``: its own files are read, nothing
    is written, not even in its own workspace, and every way out is refused as before."""
    other = _other(fleet)
    config = {
        "tools": [
            {"id": "Main:bash", "params": {"sandbox": {"mode": "read_only"}}},
            *TASK_TOOLS["tools"][1:],
        ],
    }
    ws = fleet.root / "ro"
    ws.mkdir(exist_ok=True)
    (ws / "mine.txt").write_text("my-own-notes\n")
    session, _ = fleet.session("ro", config)
    legit = "cat mine.txt; echo x > result.txt 2>/dev/null || echo OWN-WRITE-REFUSED"
    try:
        done = session.call_sync(
            "bash", {"command": probe_script(fleet, ws, other, legit), "description": "probe"}
        )
    finally:
        session.close()
    assert not done.is_error, done.prompt_text
    assert done.output is not None
    out = done.output.value["output"]
    assert "my-own-notes" in out and "OWN-WRITE-REFUSED" in out, out
    assert not (ws / "result.txt").exists()
    assert_confined(out, fleet, ws, wrote=False)


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (
            {"TOOLHUB_BWRAP": "/bin/false", "TOOLHUB_SANDBOX_MECHANISM": "bwrap"},
            "the command sandbox cannot be enforced here",
        ),
        ({"TOOLHUB_SANDBOX": "sometimes"}, "TOOLHUB_SANDBOX='sometimes' is not one of read_only"),
    ],
)
def test_a_worker_that_cannot_enforce_its_sandbox_refuses_to_start(
    redis_url: str, tmp_path: Path, env: dict[str, str], says: str
) -> None:
    worker = WorkerProcess("refuses", redis_url, tmp_path, env=env)
    worker.start()
    assert worker.wait(90) == 2  # its start-up imports, on a busy machine
    log = worker.log_path.read_text()
    assert f"toolhub worker: refusing to start: {says}" in log, log
    assert "Traceback" not in log


def test_full_mode_is_an_explicit_opt_out_and_says_so(redis_url: str, tmp_path: Path) -> None:
    worker = WorkerProcess(
        "full", redis_url, tmp_path, env={"TOOLHUB_SANDBOX": "full"}, loglevel="INFO"
    )
    worker.start()
    try:
        worker.wait_ready()
    finally:
        worker.stop()
    assert "commands run UNSANDBOXED: TOOLHUB_SANDBOX=full" in worker.log_path.read_text()


def test_a_call_naming_another_sessions_config_is_refused(fleet: Fleet) -> None:
    """A message whose config hash is not its session's (a forged or stale one) would give the
    session tools it was never given: the worker refuses it with a typed error."""
    narrow = {"tools": [{"id": "Main:read_file"}]}
    ws = fleet.root / "narrow"
    ws.mkdir(exist_ok=True)
    (ws / "f.txt").write_text("x\n")
    other, _ = fleet.session("wide")
    session = Session.connect(fleet.redis.url, narrow, ws, session_id="narrow")
    try:
        assert session.call_sync("read_file", {"path": "f.txt"}).is_error is False
        session.executor.config_hash = other.executor.config_hash  # type: ignore[attr-defined]
        forged = session.call_sync("read_file", {"path": "f.txt"})
    finally:
        session.close()
        other.close()
    assert forged.is_error and forged.error is not None
    assert forged.error.code == "session_unknown"
    assert "runs config" in forged.error.detail, forged.error.detail


def test_a_call_for_a_tool_its_session_was_not_given_is_refused(fleet: Fleet) -> None:
    """A message naming a tool that is not in the session's stored config (forged, or from a
    dispatcher with another config) runs nothing: the worker builds the session's tool set from
    the stored config only, and answers a typed error."""
    ws = fleet.root / "no-bash"
    ws.mkdir(exist_ok=True)
    narrow = Session.connect(
        fleet.redis.url, {"tools": [{"id": "Main:read_file"}]}, ws, session_id="no-bash"
    )
    wide, _ = fleet.session("with-bash")
    try:
        forged = wide.toolset.prepare("bash", {"command": "touch pwned", "description": "x"}, "c1")
        result = asyncio.run(drain(narrow.executor.stream(forged)))
    finally:
        narrow.close()
        wide.close()
    assert result.is_error and result.error is not None
    assert result.error.kind.value == "not_found", result.error
    assert result.error.detail == "Unknown tool `bash`.", result.error
    assert not (ws / "pwned").exists()
    assert not (fleet.root / "with-bash" / "pwned").exists()
