"""The process runner: streaming, exit codes, timeouts and kills of whole groups, leftovers,
bounded memory on huge output, capped logs, and resource limits (fork bomb, memory, CPU)."""

from __future__ import annotations

import os
import resource
import signal
import threading
import time
from pathlib import Path

import pytest

from toolhub.backends.limits import ResourceLimits
from toolhub.backends.process import ProcessRunner, shared_cgroups


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
