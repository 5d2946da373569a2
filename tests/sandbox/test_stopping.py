"""Stopping a sandboxed command works as it does unsandboxed: timeout and kill end every process
of it within the grace, a command that handles TERM gets to, one that ignores TERM is KILLed
after the grace, the pids cgroup holds the sandbox's processes, and a SIGKILLed host takes the
sandboxed command with it."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tests.processes import seconds_until, seconds_until_gone_after_kill, tagged_sleeps
from toolhub.backends.cgroups import CommandCgroups
from toolhub.backends.limits import ResourceLimits
from toolhub.sandbox import SandboxMode

from .conftest import Layout, requires_bwrap, text

pytestmark = requires_bwrap


def _tag(n: int) -> str:
    return f"4{n}{os.getpid() % 1000:03d}"


@pytest.mark.parametrize("mode", [SandboxMode.WORKSPACE_WRITE, SandboxMode.READ_ONLY])
def test_timeout_ends_every_process_of_the_sandbox(layout: Layout, mode: SandboxMode) -> None:
    tag = _tag(1)
    runner = layout.runner(layout.policy(mode))
    started = time.monotonic()
    res = runner.run(
        f"sleep {tag}1 & sleep {tag}2 & (setsid sleep {tag}3 &); wait", log_name="t", timeout_s=0.5
    )
    assert res.killed == "timeout"
    # Ended at its timeout, not when the sleeps would have (days): room for a busy machine.
    assert time.monotonic() - started < 0.5 + runner.kill_grace_s + 10
    seconds_until(lambda: not tagged_sleeps(tag), 15)


def test_kill_ends_the_sandbox_at_once(layout: Layout) -> None:
    tag = _tag(2)
    # A grace far past the bound below: ended by the kill itself, not by its escalation.
    runner = layout.runner(layout.policy(SandboxMode.WORKSPACE_WRITE), kill_grace_s=60.0)
    running = runner.start(f"sleep {tag}1 & sleep {tag}2; wait", log_name="k")
    seconds_until(lambda: len(tagged_sleeps(tag)) == 2, 15)
    started = time.monotonic()
    assert running.kill("cancelled") is True
    result = running.wait(30)
    assert result is not None and result.killed == "cancelled"
    assert time.monotonic() - started < 20
    seconds_until(lambda: not tagged_sleeps(tag), 15)


def test_a_command_that_handles_term_gets_to_finish(layout: Layout) -> None:
    runner = layout.runner(layout.policy(SandboxMode.WORKSPACE_WRITE))
    res = runner.run(
        "trap 'echo got-term; sleep 0.2; echo cleaned; exit 7' TERM; echo up; sleep 30 & wait",
        log_name="term",
        timeout_s=0.5,
    )
    assert res.killed == "timeout" and res.exit_code == 7
    out = text(res)  # (bash runs the trap twice, sandboxed or not)
    assert out.startswith("up\ngot-term\n") and out.endswith("cleaned\n")


def test_term_ignored_then_killed_after_grace(layout: Layout) -> None:
    runner = layout.runner(layout.policy(SandboxMode.WORKSPACE_WRITE))
    started = time.monotonic()
    res = runner.run("trap '' TERM; sleep 30", log_name="ign", timeout_s=0.5)
    elapsed = time.monotonic() - started
    assert res.killed == "timeout" and res.signal == "SIGKILL"
    assert 1.4 <= elapsed < 20  # after the grace, long before the sleep's 30 s


@pytest.mark.skipif(
    "pids" not in CommandCgroups.detect().controllers, reason="needs a writable pids cgroup"
)
def test_sandboxed_processes_are_in_the_commands_pids_cgroup(layout: Layout) -> None:
    tag = _tag(3)
    runner = layout.runner(layout.policy(SandboxMode.WORKSPACE_WRITE))
    running = runner.start(f"sleep {tag}1", log_name="cg", limits=ResourceLimits(max_processes=64))
    try:
        seconds_until(lambda: len(tagged_sleeps(tag)) == 1, 30)
        pid = tagged_sleeps(tag)[0].pid
        assert f"toolhub-{os.getpid()}-" in Path(f"/proc/{pid}/cgroup").read_text()
    finally:
        running.kill()
        running.wait(5)
    bomb = runner.run(
        ":(){ :|:& };:", log_name="bomb", limits=ResourceLimits(max_processes=64), timeout_s=3
    )
    assert bomb.exit_code is not None
    assert text(runner.run("echo still here", log_name="after")) == "still here\n"


HOST = r"""
import sys, time
from pathlib import Path
from toolhub.backends.process import ProcessRunner
from toolhub.sandbox import SandboxPolicy
ws = Path(sys.argv[1])
runner = ProcessRunner(ws, ws.parent / "logs", sandbox=SandboxPolicy(ws))
runner.start(sys.argv[2], log_name="c")
print("started", flush=True)
time.sleep(120)
"""


@pytest.mark.skipif(not Path("/usr/bin/setpriv").exists(), reason="needs util-linux setpriv")
def test_sandboxed_command_dies_with_the_host_process(layout: Layout) -> None:
    tag = _tag(4)
    command = f"sleep {tag}1 & sleep {tag}2 & wait"
    host = [sys.executable, "-c", HOST, str(layout.ws), command]
    seconds_until_gone_after_kill(host, tag)  # AssertionError while one is left
