"""The process runner: streaming, exit codes, timeouts and kills of whole groups, leftovers,
bounded memory on huge output, capped logs, and resource limits (fork bomb, memory, CPU); a
full log disk or a failing output callback never stops the reader, and a log that cannot be
made is a typed start failure."""

from __future__ import annotations

import os
import resource
import signal
import threading
import time
from pathlib import Path

import pytest

from tests.small_disk import small_disk
from toolhub.backends.limits import ResourceLimits
from toolhub.backends.process import ProcessRunner, shared_cgroups
from toolhub.core import ToolError
from toolhub.errors import ErrorCode


@pytest.fixture
def runner(tmp_path: Path) -> ProcessRunner:
    root = tmp_path / "ws"
    root.mkdir()
    return ProcessRunner(root, tmp_path / "logs")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_exit_code_merged_output_and_log(runner: ProcessRunner) -> None:
    res = runner.run("echo out; echo err >&2; exit 3", log_name="a")
    assert res.exit_code == 3 and res.killed is None
    text, omitted = res.output.head_and_tail(1000)
    assert text == "out\nerr\n" and omitted == 0
    assert res.output.log_path is not None
    assert res.output.log_path.read_text() == "out\nerr\n"


def test_limits_prelude_prints_nothing(runner: ProcessRunner) -> None:
    limits = ResourceLimits(cpu_seconds=100, address_space_bytes=4 << 30, max_processes=500)
    res = runner.run("true", log_name="quiet", limits=limits)
    assert res.exit_code == 0
    assert res.output.total_bytes == 0


def test_limits_are_in_force_in_the_command(runner: ProcessRunner) -> None:
    limits = ResourceLimits(cpu_seconds=77, address_space_bytes=3 << 30, max_processes=321)
    res = runner.run("ulimit -St; ulimit -v; ulimit -u", log_name="l", limits=limits)
    cpu, memory, processes = res.output.head_and_tail(100)[0].split()
    assert (cpu, memory) == ("77", str(3 << 20))
    # A pids cgroup holds the process cap where there is one; RLIMIT_NPROC stands in elsewhere.
    own, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    inherited = "unlimited" if own == resource.RLIM_INFINITY else str(own)
    assert processes == (inherited if "pids" in runner.cgroups.controllers else "321")


def test_workspace_cwd_and_unbuffered_python(runner: ProcessRunner) -> None:
    res = runner.run('pwd; echo "$PYTHONUNBUFFERED"', log_name="env")
    cwd, flag = res.output.head_and_tail(1000)[0].split()
    assert Path(cwd) == runner.root and flag == "1"


def test_output_streams_before_the_command_ends(runner: ProcessRunner, tmp_path: Path) -> None:
    go = tmp_path / "go"
    seen: list[bytes] = []
    first = threading.Event()

    def on_output(chunk: bytes) -> None:
        seen.append(chunk)
        first.set()

    running = runner.start(
        f"echo first; until [ -e {go} ]; do sleep 0.02; done; echo second",
        log_name="s",
        on_output=on_output,
    )
    # The first line arrives while the command is still held (it waits for ``go``).
    assert first.wait(30)
    assert seen == [b"first\n"] and running.wait(0) is None
    go.touch()
    result = running.wait(30)
    assert result is not None and result.exit_code == 0
    assert seen[-1] == b"second\n"


def test_timeout_kills_the_whole_group(runner: ProcessRunner, tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    res = runner.run(f"sleep 60 & echo $! > {pidfile}; wait", log_name="t", timeout_s=0.5)
    assert res.killed == "timeout"
    assert time.monotonic() - started < 20  # at its timeout, not the sleep's minute
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 15
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child)


def test_term_ignored_then_killed_after_grace(runner: ProcessRunner) -> None:
    started = time.monotonic()
    res = runner.run("trap '' TERM; sleep 30", log_name="k", timeout_s=0.5)
    elapsed = time.monotonic() - started
    assert res.killed == "timeout" and res.signal == "SIGKILL"
    assert 1.4 <= elapsed < 20  # after the grace, long before the sleep's 30 s


def test_kill_from_another_thread_returns_at_once(tmp_path: Path) -> None:
    # TERM ignored and a grace longer than the test: the command outlives the kill's return.
    (tmp_path / "ws").mkdir()
    runner = ProcessRunner(tmp_path / "ws", tmp_path / "logs", kill_grace_s=600.0)
    up = threading.Event()
    running = runner.start(
        "trap '' TERM; echo up; sleep 30", log_name="c", on_output=lambda _: up.set()
    )
    assert up.wait(30)
    assert running.kill("cancelled") is True
    assert running.wait(0) is None  # returned without waiting for the end
    os.killpg(running.pid, signal.SIGKILL)
    result = running.wait(30)
    assert result is not None and result.killed == "cancelled"
    assert running.kill("cancelled") is False


def test_leftover_background_process_does_not_hang_the_call(
    runner: ProcessRunner, tmp_path: Path
) -> None:
    pidfile = tmp_path / "left.pid"
    started = time.monotonic()
    res = runner.run(f"sleep 60 & echo $! > {pidfile}; echo done", log_name="left")
    assert res.exit_code == 0 and res.killed is None
    assert time.monotonic() - started < 20  # not the leftover's minute
    assert res.output.head_and_tail(100)[0] == "done\n"
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 15
    while alive(child) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(child)


def test_gigabyte_of_output_keeps_memory_and_log_bounded(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    runner = ProcessRunner(root, tmp_path / "logs", log_limit_bytes=1 << 20)
    chunks = [0]

    def count(chunk: bytes) -> None:
        chunks[0] += len(chunk)

    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    running = runner.start(
        "yes | head -c 1000000000; echo; echo END", log_name="big", keep_bytes=4000, on_output=count
    )
    res = running.wait(60)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert res is not None
    assert res.exit_code == 0
    assert res.output.total_bytes == 1_000_000_000 + 5
    text, omitted = res.output.head_and_tail(4000)
    assert text.startswith("y\ny\n") and text.endswith("END\n")
    assert omitted > 999_000_000
    assert (after - before) < 100_000  # KiB: nowhere near the gigabyte that went through
    log = res.output.log_path
    assert log is not None and log.stat().st_size < (1 << 20) + 200
    assert log.read_bytes().endswith(b"[toolhub: log truncated at 1048576 bytes]\n")
    assert chunks == [res.output.total_bytes]


def test_address_space_limit_stops_a_memory_hog(runner: ProcessRunner) -> None:
    limits = ResourceLimits(address_space_bytes=256 << 20)
    res = runner.run(
        "python3 -c 'x = bytearray(1 << 30)'", log_name="mem", limits=limits, timeout_s=30
    )
    assert res.exit_code != 0
    assert "MemoryError" in res.output.head_and_tail(4000)[0]


def test_cpu_limit_stops_a_busy_loop(runner: ProcessRunner) -> None:
    started = time.monotonic()
    res = runner.run(
        "python3 -c 'while True: pass'",
        log_name="cpu",
        limits=ResourceLimits(cpu_seconds=1),
        timeout_s=20,
    )
    assert res.signal in ("SIGXCPU", "SIGKILL")
    assert res.killed is None
    assert time.monotonic() - started < 10


def _can_cap_processes() -> bool:
    return os.geteuid() != 0 or "pids" in shared_cgroups().controllers


@pytest.mark.skipif(not _can_cap_processes(), reason="root without a pids cgroup: no process cap")
def test_fork_bomb_is_contained(runner: ProcessRunner) -> None:
    limits = ResourceLimits(max_processes=64)
    started = time.monotonic()
    res = runner.run(":(){ :|:& };:", log_name="bomb", limits=limits, timeout_s=3)
    assert time.monotonic() - started < 10
    assert res.exit_code is not None
    probe = runner.run("echo still here", log_name="after")
    assert probe.output.head_and_tail(100)[0] == "still here\n"
    for base in runner.cgroups.fs.paths(""):
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            left = [p for p in base.glob(f"**/toolhub-{os.getpid()}-*")]
            if not left:
                break
            time.sleep(0.05)
        assert left == []


def test_many_concurrent_commands(runner: ProcessRunner) -> None:
    results: list[int | None] = []
    lock = threading.Lock()

    def one(n: int) -> None:
        res = runner.run(f"echo {n}", log_name=f"c{n}")
        with lock:
            results.append(res.exit_code)

    threads = [threading.Thread(target=one, args=(n,)) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [0] * 20


def _open_on(path: Path) -> list[str]:
    """This process's descriptors on files under ``path``."""
    found = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith(str(path)):
            found.append(target)
    return found


def test_a_full_log_disk_ends_the_command_whole_and_closes_everything(tmp_path: Path) -> None:
    """More output than the pipe holds, logged to a 256 KiB disk: the reader keeps draining
    the pipe, so the command ends, its result has every byte counted and its tail, the log is
    cut where the disk stopped it, and nothing of it stays open."""
    root = tmp_path / "ws"
    root.mkdir()
    with small_disk(tmp_path / "disk", "256k") as disk:
        runner = ProcessRunner(root, disk / "logs")
        streamed: list[int] = []
        running = runner.start(
            "head -c 3000000 /dev/zero | tr '\\0' x; echo; echo END",
            log_name="big",
            on_output=lambda chunk: streamed.append(len(chunk)),
        )
        result = running.wait(60)
        assert result is not None, "the command never ended"
        assert result.exit_code == 0 and result.reader_error is None
        out = result.output
        assert out.total_bytes == sum(streamed) == 3_000_005
        assert out.last(10)[0].endswith("END\n")
        assert out.log_cut is not None and out.log_cut.reason.startswith("ENOSPC")
        assert (disk / "logs" / "big.log").stat().st_size >= out.log_cut.written
        assert _open_on(disk) == []


def test_an_output_callback_that_raises_stops_streaming_not_the_command(
    runner: ProcessRunner,
) -> None:
    calls: list[bytes] = []

    def broken(chunk: bytes) -> None:
        calls.append(chunk)
        raise RuntimeError("the caller's loop is gone")

    running = runner.start(
        "for i in 1 2 3; do echo line$i; sleep 0.2; done", log_name="cb", on_output=broken
    )
    result = running.wait(30)
    assert result is not None and result.exit_code == 0 and result.reader_error is None
    assert len(calls) == 1
    assert result.output.first(100)[0] == "line1\nline2\nline3\n"


def test_a_log_directory_that_cannot_be_made_is_a_typed_start_failure(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    with small_disk(tmp_path / "disk", "256k", inodes=1) as disk:
        runner = ProcessRunner(root, disk / "logs")
        with pytest.raises(ToolError) as raised:
            runner.start(f"touch {root}/ran", log_name="never")
        assert raised.value.code == ErrorCode.START_FAILED
        assert "ENOSPC" in raised.value.detail and "Nothing ran" in raised.value.detail
        assert not (root / "ran").exists()
