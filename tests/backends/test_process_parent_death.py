"""A command never outlives the process that started it: SIGKILL the host process (as a worker
is killed) and the command, its children and what left its process group are gone at once;
a stale command cgroup of a dead process is reaped by the next sweep."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.processes import GONE_WITHIN_S, seconds_until, tagged_sleeps
from toolhub.backends.cgroup_fs import CgroupFs
from toolhub.backends.cgroups import CommandCgroups

HOST = r"""
import os, signal, sys, time
from pathlib import Path
from toolhub.backends.process import ProcessRunner
if os.environ.get("HOST_IGNORES_HUP"):  # as under nohup: the ignore passes on through exec
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
if len(sys.argv) > 3:  # run inside cgroups of its own, out of other sweeps' sight
    for nest in sys.argv[3].split(":"):
        (Path(nest) / "cgroup.procs").write_text(str(os.getpid()))
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


@pytest.mark.skipif(not CommandCgroups.detect().available, reason="needs a writable cgroup")
@pytest.mark.skipif(not Path("/usr/bin/setpriv").exists(), reason="needs util-linux setpriv")
def test_a_process_that_left_the_group_dies_too(tmp_path: Path) -> None:
    tag = f"33{os.getpid() % 1000:03d}"
    proc = _host(tmp_path, f"setsid sleep {tag}1 & sleep {tag}2")
    seconds_until(lambda: len(tagged_sleeps(tag)) == 2, GONE_WITHIN_S)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    seconds_until(lambda: not tagged_sleeps(tag), GONE_WITHIN_S)


@pytest.mark.skipif(not CommandCgroups.detect().available, reason="needs a writable cgroup")
def test_reap_stale_kills_what_a_dead_process_left_in_its_cgroups(tmp_path: Path) -> None:
    host = CommandCgroups.detect()
    # Cgroups of this test's own: the sweeps of workers on this host reap their bases'
    # children, and would otherwise do this test's job before it looks.
    rel = f"nest-{os.getpid()}"
    host.fs.make(rel, memory_bytes=None, pids=None, cpu_weight=None)
    nest = CommandCgroups(
        CgroupFs(dataclasses.replace(h, base=h.base / rel) for h in host.fs.hierarchies)
    )
    try:
        _orphan_then_reap(tmp_path, nest)
    finally:
        host.remove(rel)


def _orphan_then_reap(tmp_path: Path, nest: CommandCgroups) -> None:
    tag = f"33{os.getpid() % 1000:03d}"
    # A host without the parent-death guard (as if setpriv were missing): its command survives.
    env = {**os.environ, "PATH": "/nonexistent"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOST,
            str(tmp_path),
            f"/bin/sleep {tag}1",
            ":".join(str(path) for path in nest.fs.paths("")),
        ],
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
    mine = [p for base in nest.fs.paths("") for p in base.glob(f"**/toolhub-{proc.pid}-*")]
    assert mine, "the dead host's cgroup is there"
    assert nest.reap_stale() == 1
    seconds_until(lambda: not tagged_sleeps(tag), GONE_WITHIN_S)
    assert not any(p.exists() for p in mine)
