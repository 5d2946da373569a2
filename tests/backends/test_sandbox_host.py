"""The shared sandbox: a session's commands start in one bwrap sandbox, each still in its own
process group and pids cgroup with its limits; a lost launcher is reported, not waited on; an
idle sandbox closes; and the sandbox dies with the process that started it."""

from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.processes import seconds_until, seconds_until_gone_after_kill, tagged_sleeps
from toolhub.backends import sandbox_host, shared_start
from toolhub.backends.limits import ResourceLimits
from toolhub.backends.process import ProcessRunner
from toolhub.backends.running import CommandResult
from toolhub.backends.shared_start import SHARED_SANDBOXES
from toolhub.core import ToolError
from toolhub.errors import ErrorCode
from toolhub.sandbox import SandboxMode, SandboxPolicy, probe

pytestmark = pytest.mark.skipif(
    not probe().available, reason=f"bwrap cannot sandbox here: {probe().reason}"
)


@pytest.fixture
def base() -> Iterator[Path]:
    # Outside /tmp: the sandbox's /tmp is the session's private one.
    path = Path(tempfile.mkdtemp(prefix="toolhub-host-", dir="/var/tmp"))
    (path / "ws" / "sub").mkdir(parents=True)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def runner(base: Path, name: str = "ws", **kw: object) -> ProcessRunner:
    ws = base / name
    ws.mkdir(exist_ok=True)
    tmp = base / f"{name}-tmp"
    tmp.mkdir(exist_ok=True)
    policy = SandboxPolicy(ws, SandboxMode.WORKSPACE_WRITE, tmp_dir=tmp)
    return ProcessRunner(ws, base / "logs", sandbox=policy, **kw)  # type: ignore[arg-type]


def text(result: CommandResult | None) -> str:
    assert result is not None
    return (result.output.head + result.output.tail).decode()


#: Which sandbox a command runs in: its pid namespace, and when that namespace's first process
#: started (the kernel gives an ended namespace's number to the next one made).
SANDBOX_ID = "echo $(readlink /proc/self/ns/pid) $(cut -d' ' -f22 /proc/1/stat)"


def pid_namespace(run: ProcessRunner, **kw: object) -> str:
    return text(run.run(SANDBOX_ID, log_name="ns", **kw)).strip()  # type: ignore[arg-type]


def bwraps() -> set[int]:
    """The live bwrap processes under this one (one that ends while being looked at is not)."""
    live = set()
    for child in psutil.Process().children(recursive=True):
        try:
            if "bwrap" in child.name() and child.status() != psutil.STATUS_ZOMBIE:
                live.add(child.pid)
        except psutil.NoSuchProcess:
            pass
    return live


def test_a_sessions_commands_share_one_sandbox_and_each_gets_its_own_cwd(base: Path) -> None:
    run = runner(base)
    first = pid_namespace(run)
    assert first and first == pid_namespace(run)
    assert first.split()[0] != os.readlink("/proc/self/ns/pid")
    out = run.start("pwd", log_name="cwd", cwd=base / "ws" / "sub").wait(10)
    assert text(out).strip() == str(base / "ws" / "sub")
    # Another session's policy (another workspace) gets a sandbox of its own.
    assert pid_namespace(runner(base, "other")) != first


def test_turned_off_every_command_gets_a_sandbox_of_its_own(base: Path) -> None:
    run = runner(base, shared_sandbox=False)
    assert pid_namespace(run) != pid_namespace(run)


def test_limits_and_exit_status_are_the_commands_own(base: Path) -> None:
    run = runner(base, limits=ResourceLimits(file_size_bytes=1 << 20, max_processes=64))
    out = run.run("ulimit -f; cat /proc/self/oom_score_adj; exit 7", log_name="limits")
    # The process cap is the pids cgroup's (tests/backends/test_cgroups.py), not RLIMIT_NPROC.
    assert text(out).split() == ["1024", "1000"] and out.exit_code == 7
    signalled = run.run("kill -KILL $$", log_name="sig")
    assert signalled.exit_code == 128 + signal.SIGKILL and signalled.signal == "SIGKILL"


def test_a_lost_launcher_is_reported_at_once_and_the_next_command_starts_a_new_sandbox(
    base: Path,
) -> None:
    run = runner(base)
    before = pid_namespace(run)
    waiting = run.start("sleep 60", log_name="waiting")
    # A command of the session kills the launcher (its parent): the whole sandbox ends.
    killer = run.run("kill -KILL $PPID; sleep 5", log_name="killer", timeout_s=30)
    assert killer.signal == "SIGKILL"
    result = waiting.wait(10)
    assert result is not None and result.signal == "SIGKILL" and result.duration_s < 10
    assert pid_namespace(run) != before


def test_a_stopped_launcher_ends_its_sandbox_instead_of_leaving_calls_waiting(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_host, "STATUS_GRACE_S", 1.0)
    monkeypatch.setattr(sandbox_host, "START_TIMEOUT_S", 1.0)
    run = runner(base)
    before = pid_namespace(run)
    tag = "5" * 7
    waiting = run.start(f"sleep {tag}", log_name="waiting")
    seconds_until(lambda: len(tagged_sleeps(tag)) == 1, 5)
    # A command of the session stops the launcher, then ends: its status can never come.
    stopper = run.run("kill -STOP $PPID; sleep 0.2", log_name="stopper", timeout_s=30)
    assert stopper.signal == "SIGKILL" and stopper.duration_s < 10
    result = waiting.wait(10)
    assert result is not None and result.signal == "SIGKILL"
    seconds_until(lambda: not tagged_sleeps(tag), 15)  # really ended, not just said
    # A start while the launcher is stopped gives up on that sandbox and uses a new one.
    monkeypatch.setattr(sandbox_host, "STATUS_GRACE_S", 60.0)
    stop_again = run.start("kill -STOP $PPID", log_name="stop-again")
    seconds_until(lambda: psutil.Process(stop_again.pid).status() == psutil.STATUS_ZOMBIE, 15)
    started = time.monotonic()
    assert pid_namespace(run) not in {before, ""}
    assert time.monotonic() - started < 20  # its start's timeout is 1 s
    result = stop_again.wait(10)  # ended with its sandbox
    assert result is not None and result.signal == "SIGKILL"


def test_a_command_is_held_until_its_cgroup_join_and_never_runs_when_that_fails(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = runner(base)
    pid_namespace(run)  # the sandbox is up
    seen: list[int] = []

    def refuse(self: object, cgroup: object, pid: int) -> None:
        seen.append(pid)
        # Held: the command has not run yet.
        assert psutil.Process(pid).cmdline()[:2] != [run.shell, "-c"]
        raise OSError("cgroup refused")

    monkeypatch.setattr("toolhub.backends.cgroups.CommandCgroups.join", refuse)
    marker = base / "ws" / "ran"
    if not run.cgroups.available:
        pytest.skip("no pids cgroup here: nothing is joined")
    with pytest.raises(ToolError, match="cgroup refused") as refused:
        run.start(f"touch {marker}", log_name="held")
    assert refused.value.code == ErrorCode.START_FAILED
    assert seen and not marker.exists()
    monkeypatch.undo()
    assert run.run(f"touch {marker}", log_name="after").exit_code == 0 and marker.exists()


def test_an_idle_sandbox_closes(base: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox_host, "IDLE_SECONDS", 0.2)
    before = bwraps()
    run = runner(base, "idle")
    go = base / "idle" / "go"
    # Seen up while its command runs (a busy sandbox is not idle), however slow the look...
    command = run.start(f"until [ -e {go} ]; do sleep 0.05; done", log_name="idle")
    assert bwraps() - before
    go.touch()
    result = command.wait(30)
    assert result is not None and result.exit_code == 0
    # ...then closed once idle (the bound only fails a sandbox that stays).
    seconds_until(lambda: not (bwraps() - before), 30)


def test_past_the_cap_the_oldest_idle_sandbox_closes(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    SHARED_SANDBOXES.close_all()
    seconds_until(lambda: len(SHARED_SANDBOXES) == 0, 5)
    monkeypatch.setattr(shared_start, "MAX_SANDBOXES", 2)
    busy = runner(base, "busy").start("sleep 30", log_name="busy")
    pid_namespace(runner(base, "idle1"))
    pid_namespace(runner(base, "idle2"))  # over the cap: idle1 closes, busy stays
    assert len(SHARED_SANDBOXES) == 2
    assert busy.wait(0.5) is None
    busy.kill()
    assert busy.wait(10) is not None


def test_concurrent_starts_each_get_their_own_output(base: Path) -> None:
    run = runner(base)
    results: dict[int, str] = {}

    def one(i: int) -> None:
        results[i] = text(run.run(f"echo {i}", log_name=f"c{i}"))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == {i: f"{i}\n" for i in range(40)}


HOST = r"""
import sys, time
from pathlib import Path
from toolhub.backends.process import ProcessRunner
from toolhub.sandbox import SandboxMode, SandboxPolicy
ws, tmp = Path(sys.argv[1]), Path(sys.argv[2])
policy = SandboxPolicy(ws, SandboxMode.WORKSPACE_WRITE, tmp_dir=tmp)
runner = ProcessRunner(ws, ws.parent / "logs", sandbox=policy)
runner.start(sys.argv[3], log_name="c")
print("started", flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not shutil.which("setpriv"), reason="needs util-linux setpriv")
def test_the_shared_sandbox_dies_with_the_process_that_started_it(base: Path) -> None:
    tag = "7" * 7
    (base / "tmp").mkdir()
    command = f"sleep {tag}1 & sleep {tag}2 & wait"
    host = [sys.executable, "-c", HOST, str(base / "ws"), str(base / "tmp"), command]
    seconds_until_gone_after_kill(host, tag)  # AssertionError while one is left


def test_the_launcher_shows_no_secret_of_the_worker(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLHUB_REDIS_URL", "redis://:hunter2@redis.internal:6379/0")
    SHARED_SANDBOXES.close_all()
    out = text(
        runner(base, "secret").run(
            "tr '\\0' '\\n' < /proc/1/environ; tr '\\0' '\\n' < /proc/$PPID/environ",
            log_name="env",
        )
    )
    assert "PATH=" in out  # both were read
    assert "hunter2" not in out


def test_a_command_holds_no_descriptor_of_the_launcher_or_another_command(base: Path) -> None:
    run = runner(base)
    other = run.start("sleep 30", log_name="other")
    try:
        fds = text(run.run("ls /proc/self/fd", log_name="fds")).split()
        # stdin, the output pipe twice, and the directory ``ls`` reads.
        assert sorted(fds) == ["0", "1", "2", "3"]
    finally:
        other.kill()
        other.wait(10)


def test_an_aborted_command_ends_at_once_while_another_is_held(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_host, "START_TIMEOUT_S", 30.0)
    run = runner(base)
    pid_namespace(run)
    if not run.cgroups.available:
        pytest.skip("no pids cgroup here: nothing is joined")
    second_held, first_done = threading.Event(), threading.Event()
    joined: list[int] = []

    def join(self: object, cgroup: object, pid: int) -> None:
        joined.append(pid)
        if len(joined) == 1:  # the first command: refused once the second is held too
            assert second_held.wait(10)
            raise OSError("cgroup refused")
        second_held.set()
        first_done.wait(10)

    monkeypatch.setattr("toolhub.backends.cgroups.CommandCgroups.join", join)
    refused_after: list[float] = []

    def first() -> None:
        started = time.monotonic()
        try:
            run.start("true", log_name="first")
        except ToolError:
            refused_after.append(time.monotonic() - started)
        finally:
            first_done.set()

    thread = threading.Thread(target=first)
    thread.start()
    seconds_until(lambda: len(joined) == 1, 10)
    second = run.start("echo second", log_name="second")
    thread.join(30)
    # The refused command ended on its own abort, not when the start gave up on it.
    assert refused_after and refused_after[0] < 15
    assert text(second.wait(10)) == "second\n"


def test_commands_end_normally_when_the_process_has_past_1024_descriptors(base: Path) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1300:
        pytest.skip("cannot open 1,100 descriptors here")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1300), hard))
    held = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        run = runner(base, "many-fds")
        results = [run.start(f"sleep 0.{i}; echo {i}", log_name=f"m{i}") for i in range(3)]
        for i, running in enumerate(results):
            result = running.wait(20)
            assert result is not None and result.exit_code == 0 and text(result) == f"{i}\n"
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_the_launcher_outlives_a_commands_pkill(base: Path) -> None:
    run = runner(base)
    shared = pid_namespace(run)
    out = run.run(
        "for s in TERM INT HUP QUIT USR1; do kill -$s $PPID; done; sleep 0.2; echo alive",
        log_name="pkill",
    )
    assert text(out) == "alive\n" and out.exit_code == 0
    assert pid_namespace(run) == shared


def test_a_request_too_large_for_one_message_gets_a_sandbox_of_its_own(base: Path) -> None:
    run = runner(base)
    shared = pid_namespace(run)
    # JSON escapes each of these characters to six bytes: well past one message.
    filler = "\u4e2d" * 40_000
    out = run.run(f": '{filler}'; {SANDBOX_ID}", log_name="large")
    assert out.exit_code == 0
    assert text(out).strip() not in {"", shared}
    assert pid_namespace(run) == shared  # the shared sandbox is still there


def test_read_only_sessions_keep_a_fresh_tmp_per_command(base: Path) -> None:
    ws = base / "ws"
    policy = SandboxPolicy(ws, SandboxMode.READ_ONLY, tmp_dir=base / "ro-tmp")
    run = ProcessRunner(ws, base / "logs", sandbox=policy)
    assert run.run("touch /tmp/mark", log_name="mark").exit_code == 0
    assert text(run.run("ls /tmp", log_name="look")).split() == ["home"]


def test_a_send_the_kernel_refuses_starts_that_command_alone_and_the_sandbox_stays(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sandbox_host, "IDLE_SECONDS", 2.0)
    before = bwraps()
    run = runner(base, "refused")
    shared = pid_namespace(run)
    real = socket.send_fds
    refused: list[int] = []

    def refuse_once(sock: socket.socket, buffers: list[bytes], fds: list[int]) -> int:
        if not refused:  # as when another process holds too many descriptors in flight
            refused.append(1)
            raise OSError(errno.ETOOMANYREFS, "Too many references")
        return real(sock, buffers, fds)

    monkeypatch.setattr(socket, "send_fds", refuse_once)
    alone = text(run.run(SANDBOX_ID, log_name="alone")).strip()
    assert refused and alone not in {"", shared}
    # The shared sandbox was neither ended nor left open for ever: it closes once idle.
    seconds_until(lambda: not (bwraps() - before), 30)


def test_a_missing_working_directory_is_said_in_the_output(base: Path) -> None:
    run = runner(base)
    out = run.start("pwd", log_name="nocwd", cwd=base / "ws" / "gone").wait(10)
    assert out is not None and out.exit_code == 127
    assert text(out).startswith("toolhub: cannot start the command: ")
    assert "gone" in text(out)


def test_starts_waiting_on_a_stopped_launcher_do_not_hold_up_another_session(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Starts take turns through a gate two wide (``start_gate``); a start waiting for its
    launcher's answer steps out of it. Here both places would be taken by starts of a session
    whose launcher is stopped, for ``START_TIMEOUT_S``: another session starts at once."""
    monkeypatch.setattr(sandbox_host, "STATUS_GRACE_S", 60.0)
    monkeypatch.setattr(sandbox_host, "START_TIMEOUT_S", 8.0)
    stopped, other = runner(base, "stopped"), runner(base, "other")
    assert text(other.run("echo warm", log_name="warm")).strip() == "warm"
    stopper = stopped.start("kill -STOP $PPID", log_name="stopper")
    seconds_until(lambda: psutil.Process(stopper.pid).status() == psutil.STATUS_ZOMBIE, 5)
    results: list[CommandResult | None] = []
    waiting = [
        threading.Thread(target=lambda: results.append(stopped.run("true", log_name="w")))
        for _ in range(2)
    ]
    for thread in waiting:
        thread.start()
    time.sleep(0.5)  # both are waiting for the stopped launcher's answer by now
    began = time.monotonic()
    for i in range(3):
        assert text(other.run(f"echo {i}", log_name="other")).strip() == str(i)
    assert time.monotonic() - began < 4, "the other session waited for the stopped launcher"
    for thread in waiting:
        thread.join(30)
    # They got their answer from a new sandbox once the stopped one was given up.
    assert [r.exit_code if r else None for r in results] == [0, 0]
