"""A command never outlives the process that started it: SIGKILL the host process (as a worker
is killed) and the command, its children and what left its process group are gone at once;
a stale command cgroup of a dead process is reaped by the next sweep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import GONE_WITHIN_S, seconds_until, tagged_sleeps
from toolhub.backends.limits import PidsCgroups

HOST = r"""
import os, signal, sys, time
from pathlib import Path
from toolhub.backends.process import ProcessRunner
if os.environ.get("HOST_IGNORES_HUP"):  # as under nohup: the ignore passes on through exec
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
if len(sys.argv) > 3:  # run inside a cgroup of its own, out of other sweeps' sight
    (Path(sys.argv[3]) / "cgroup.procs").write_text(str(os.getpid()))
root = Path(sys.argv[1])
runner = ProcessRunner(root, root / "logs")
runner.start(sys.argv[2], log_name="c")
print("started", flush=True)
time.sleep(120)
"""


def _host(tmp_path: Path, command: str, *, ignoring_hup: bool = False) -> subprocess.Popen[str]:
    env = {**os.environ, "HOST_IGNORES_HUP": "1" if ignoring_hup else ""}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOST, str(tmp_path), command],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    return proc


@pytest.mark.skipif(not Path("/usr/bin/setpriv").exists(), reason="needs util-linux setpriv")
@pytest.mark.parametrize("ignoring_hup", [False, True], ids=["plain", "host-under-nohup"])
def test_command_and_its_children_die_with_the_host_process(
    tmp_path: Path, ignoring_hup: bool
) -> None:
    """Also when the host ignores SIGHUP (started by ``nohup``): its commands' shells would
    inherit the ignore, and a shell cannot trap a signal ignored when it started."""
    tag = f"3{2 if ignoring_hup else 1}{os.getpid() % 1000:03d}"
    proc = _host(
        tmp_path, f"sleep {tag}1 & sleep {tag}2 & echo up; wait", ignoring_hup=ignoring_hup
    )
    seconds_until(lambda: len(tagged_sleeps(tag)) == 2, GONE_WITHIN_S)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    seconds_until(lambda: not tagged_sleeps(tag), GONE_WITHIN_S)


@pytest.mark.skipif(not PidsCgroups.detect().available, reason="needs a writable pids cgroup")
@pytest.mark.skipif(not Path("/usr/bin/setpriv").exists(), reason="needs util-linux setpriv")
def test_a_process_that_left_the_group_dies_too(tmp_path: Path) -> None:
    tag = f"33{os.getpid() % 1000:03d}"
    proc = _host(tmp_path, f"setsid sleep {tag}1 & sleep {tag}2")
    seconds_until(lambda: len(tagged_sleeps(tag)) == 2, GONE_WITHIN_S)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    seconds_until(lambda: not tagged_sleeps(tag), GONE_WITHIN_S)


@pytest.mark.skipif(not PidsCgroups.detect().available, reason="needs a writable pids cgroup")
def test_reap_stale_kills_what_a_dead_process_left_in_its_cgroups(tmp_path: Path) -> None:
    base = PidsCgroups.detect().base
    assert base is not None
    # A cgroup of this test's own: the sweeps of workers on this host reap their base's
    # children, and would otherwise do this test's job before it looks.
    nest = base / f"nest-{os.getpid()}"
    nest.mkdir()
    try:
        _orphan_then_reap(tmp_path, nest)
    finally:
        PidsCgroups.remove(nest)


def _orphan_then_reap(tmp_path: Path, nest: Path) -> None:
    tag = f"33{os.getpid() % 1000:03d}"
    # A host without the parent-death guard (as if setpriv were missing): its command survives.
    env = {**os.environ, "PATH": "/nonexistent"}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOST, str(tmp_path), f"/bin/sleep {tag}1", str(nest)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "started"
    seconds_until(lambda: len(tagged_sleeps(tag)) == 1, GONE_WITHIN_S)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(0.3)
    assert len(tagged_sleeps(tag)) == 1  # orphaned: nothing but the sweep can find it now
    mine = list(nest.glob(f"toolhub-{proc.pid}-*"))
    assert mine, "the dead host's cgroup is there"
    assert PidsCgroups(nest).reap_stale() == 1
    seconds_until(lambda: not tagged_sleeps(tag), GONE_WITHIN_S)
    assert not any(p.exists() for p in mine)
