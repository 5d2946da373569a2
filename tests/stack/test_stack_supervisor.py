"""The supervisor: children in their own process groups, restarted with backoff after a crash,
and stopped with every descendant gone (even one that left the group)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from toolhub.stack.local import queue_plan
from toolhub.stack.supervisor import ChildSpec, Supervisor, descendants

pytestmark = pytest.mark.timeout(180)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ")[1].startswith("Z"))


def wait_for(check, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_crashed_child_is_restarted_with_backoff(tmp_path: Path) -> None:
    events: list[str] = []
    supervisor = Supervisor(events.append)
    counter = tmp_path / "starts"
    script = f"open({str(counter)!r}, 'a').write('x'); raise SystemExit(3)"
    child = supervisor.add(ChildSpec("crashy", [sys.executable, "-c", script], tmp_path / "c.log"))
    try:
        wait_for(lambda: counter.exists() and counter.read_text().count("x") >= 3)
        assert child.restarts >= 2
        assert any("exited with code 3; restarting in 0.5s" in e for e in events)
        assert any("restarting in 1s" in e for e in events), "the delay doubles"
    finally:
        supervisor.stop_all()


def test_stop_kills_the_group_and_stray_descendants(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    script = (
        "import subprocess, sys, time\n"
        "a = subprocess.Popen(['sleep', '300'])\n"
        "b = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        f"open({str(pids)!r}, 'w').write(f'{{a.pid}} {{b.pid}}')\n"
        "time.sleep(300)\n"
    )
    supervisor = Supervisor()
    child = supervisor.add(
        ChildSpec("parent", [sys.executable, "-c", script], tmp_path / "p.log", stop_grace_s=2)
    )
    wait_for(lambda: pids.exists() and len(pids.read_text().split()) == 2)
    grandchildren = [int(p) for p in pids.read_text().split()]
    assert child.pid is not None
    assert os.getpgid(child.pid) == child.pid, "own process group"
    assert set(grandchildren) <= descendants(child.pid)
    supervisor.stop_all()
    for pid in [child.pid, *grandchildren]:
        wait_for(lambda pid=pid: not alive(pid), timeout=5)
    assert child.restarts == 0, "a stopped child is not restarted"


@pytest.mark.parametrize(
    ("workers", "plan"),
    [
        (1, [["toolhub.fast", "toolhub.command", "toolhub.background"]]),
        (2, [["toolhub.fast"], ["toolhub.command", "toolhub.background"]]),
        (4, [["toolhub.fast"], ["toolhub.command"], ["toolhub.background"], ["toolhub.fast"]]),
    ],
)
def test_queue_plan(workers: int, plan: list[list[str]]) -> None:
    assert queue_plan(workers) == plan
