"""Command and session cgroups. ``CommandCgroups.reap_stale`` over a directory shaped like a
cgroup base: the cgroups of a dead creator go, a live creator's stay, and each creator's
liveness is read once per sweep however many commands it runs (a worker hosting hundreds of
commands sweeps them every quarter lease). On the real kernel: a command past its memory limit
is OOM-killed while its neighbour lives, a session's commands together stay under its memory
and pids, a fork bomb stops at the per-command ceiling while another session's command runs,
and what each command used is charged to the meter open when it started."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from toolhub.backends import cgroups as limits
from toolhub.backends.cgroup_fs import CgroupFs, Hierarchy
from toolhub.backends.cgroups import CommandCgroups, SessionQuota, session_name
from toolhub.backends.limits import ResourceLimits
from toolhub.backends.process import ProcessRunner
from toolhub.backends.running import CommandResult, RunningCommand
from toolhub.core.usage import metering


def test_reap_stale_reads_each_owner_once_and_removes_only_the_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pid above the kernel's limit: no process has it, and none can while the test runs.
    gone = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    live = [tmp_path / f"{limits._owner_tag(os.getpid())}-{n}" for n in range(300)]
    dead = [tmp_path / f"toolhub-{gone}-12345-{n}" for n in range(5)]
    older = tmp_path / f"toolhub-{gone}-7"  # the three-part name of earlier releases
    # Names of another shape are not judged, nor taken for an owner of the others.
    other, foreign = tmp_path / "not-ours", tmp_path / f"toolhub-{gone}"
    for path in [*live, *dead, older, other, foreign]:
        path.mkdir()
    reads: list[int] = []
    start_time = limits._start_time

    def counted(pid: int) -> str | None:
        reads.append(pid)
        return start_time(pid)

    monkeypatch.setattr(limits, "_start_time", counted)
    assert _at(tmp_path).reap_stale() == 0  # none had processes left in it
    assert sorted(reads) == sorted([os.getpid(), gone, gone])
    assert all(p.is_dir() for p in [*live, other, foreign])
    assert not any(p.exists() for p in [*dead, older])


def _at(base: Path) -> CommandCgroups:
    return CommandCgroups(CgroupFs([Hierarchy(base, frozenset({"pids"}), unified=False)]))


# -- on the real kernel: what a command and a session may take ---------------------------------

HOST_CGROUPS = CommandCgroups.detect()
needs = pytest.mark.skipif(
    not {"memory", "pids"} <= HOST_CGROUPS.controllers, reason="needs memory and pids cgroups"
)
_MIB = 1 << 20
#: Holds ``$1`` MiB of touched memory for ``$2`` seconds, then prints ``held``.
HOLD = (
    "python3 -c 'import sys, time; b = bytearray(int(sys.argv[1]) << 20); "
    'time.sleep(float(sys.argv[2])); print("held")\''
)
#: Starts up to ``$1`` threads that sleep ``$2`` seconds; prints how many started.
THREADS = (
    "python3 -c 'import sys, threading, time\n"
    "n = 0\n"
    "try:\n"
    "    for _ in range(int(sys.argv[1])):\n"
    "        threading.Thread(target=time.sleep, args=(float(sys.argv[2]),)).start(); n += 1\n"
    "except RuntimeError:\n"
    "    pass\n"
    "print(n)'"
)


def _runner(tmp_path: Path, session: str, **quota: int) -> ProcessRunner:
    root = tmp_path / session
    root.mkdir()
    runner = ProcessRunner(root, root / "logs")
    runner.quota = SessionQuota(f"{session}-{os.getpid()}-{root}", **quota)
    return runner


def _out(running: RunningCommand) -> tuple[CommandResult, str]:
    result = running.wait(60)
    assert result is not None, "the command ended"
    return result, result.output.head_and_tail(10_000)[0]


@needs
def test_a_command_past_its_memory_limit_is_oom_killed_and_its_neighbour_lives(
    tmp_path: Path,
) -> None:
    runner = _runner(tmp_path, "a", memory_per_command=64 * _MIB)
    neighbour = runner.start(f"{HOLD} 16 2", log_name="neighbour")
    hog = runner.start(f"{HOLD} 200 1", log_name="hog")
    result, _ = _out(hog)
    assert result.oom_killed and result.signal == "SIGKILL"
    assert result.memory_limit_bytes == 64 * _MIB
    assert result.peak_memory_bytes is not None and result.peak_memory_bytes <= 64 * _MIB
    calm, text = _out(neighbour)
    assert (calm.exit_code, calm.oom_killed, text) == (0, False, "held\n")


@needs
def test_a_sessions_commands_together_cannot_pass_its_memory(tmp_path: Path) -> None:
    runner = _runner(tmp_path, "b", memory_bytes=128 * _MIB, memory_per_command=100 * _MIB)
    first = runner.start(f"{HOLD} 80 3", log_name="first")
    second = runner.start(f"sleep 0.5; {HOLD} 80 1", log_name="second")
    results = [_out(first)[0], _out(second)[0]]
    # Each is under its own 100 MiB; the two together are not under the session's 128 MiB.
    assert any(r.oom_killed for r in results)
    other = _runner(tmp_path, "c", memory_bytes=128 * _MIB, memory_per_command=100 * _MIB)
    assert _out(other.start(f"{HOLD} 80 0", log_name="other"))[1] == "held\n"


@needs
def test_pids_are_capped_per_command_and_per_session_and_others_still_run(
    tmp_path: Path,
) -> None:
    runner = _runner(tmp_path, "d", pids=48, pids_per_command=32)
    # A config asking for more than the operator's per-command ceiling gets the ceiling.
    bomb = runner.start(
        ":(){ :|:& };:", log_name="bomb", limits=ResourceLimits(max_processes=4096), timeout_s=3
    )
    held = runner.start(f"{THREADS} 100 3", log_name="held")
    _, started = _out(held)
    assert int(started) < 32  # the command's pids.max, whatever the bomb beside it holds
    assert _out(bomb)[0].exit_code is not None
    first = runner.start(f"{THREADS} 28 3", log_name="first")
    time.sleep(1)
    _, second = _out(runner.start(f"{THREADS} 28 1", log_name="second"))
    _, first_count = _out(first)
    assert int(first_count) + int(second) < 48  # the session's pids.max, over both
    other = _runner(tmp_path, "e", pids=48, pids_per_command=32)
    assert _out(other.start(f"{THREADS} 28 1", log_name="other"))[1] == "28\n"


@needs
def test_usage_is_charged_to_the_meter_open_at_the_start(tmp_path: Path) -> None:
    runner = _runner(tmp_path, "f")
    burn = "python3 -c 'b = bytearray(48 << 20); import time; t = time.process_time()\n"
    burn += "while time.process_time() - t < 0.3: pass'"
    with metering() as meter:
        running = runner.start(burn, log_name="burn")
    result, _ = _out(running)  # it ends outside the meter's context: the start captured it
    used = meter.usage()
    assert result.cpu_seconds is not None and result.cpu_seconds >= 0.25
    assert result.peak_memory_bytes is not None and result.peak_memory_bytes >= 48 * _MIB
    assert used.cpu_seconds == result.cpu_seconds
    assert used.peak_memory_bytes == result.peak_memory_bytes


def test_without_a_cgroup_usage_comes_from_wait4(tmp_path: Path) -> None:
    root = tmp_path / "plain"
    root.mkdir()
    runner = ProcessRunner(root, root / "logs", cgroups=CommandCgroups(CgroupFs([])))
    result = runner.run("python3 -c 'b = bytearray(32 << 20)'", log_name="plain")
    assert result.cpu_seconds is not None and result.cpu_seconds > 0
    assert result.peak_memory_bytes is not None and result.peak_memory_bytes >= 32 * _MIB


@needs
def test_session_cgroups_carry_the_quota_and_go_when_empty(tmp_path: Path) -> None:
    runner = _runner(tmp_path, "g", memory_bytes=96 * _MIB, pids=40, cpu_weight=50)
    quota = runner.quota
    assert quota is not None
    running = runner.start("sleep 30", log_name="sleep")
    parent = session_name(quota.session_id)
    try:
        by_controller = {
            c: h.base / parent for h in HOST_CGROUPS.fs.hierarchies for c in h.controllers
        }
        assert (by_controller["pids"] / "pids.max").read_text().strip() == "40"
        memory = by_controller["memory"]
        limit = memory / ("memory.max" if HOST_CGROUPS.fs.version == 2 else "memory.limit_in_bytes")
        assert int(limit.read_text()) == 96 * _MIB
        if "cpu" in by_controller and HOST_CGROUPS.fs.version == 1:
            assert (by_controller["cpu"] / "cpu.shares").read_text().strip() == "512"
    finally:
        running.kill()
        running.wait(10)
    deadline = time.monotonic() + 10
    while any(p.exists() for p in HOST_CGROUPS.fs.paths(parent)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(p.exists() for p in HOST_CGROUPS.fs.paths(parent))
