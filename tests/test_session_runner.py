"""The reference ``SubagentRunner`` on its own: a child session per sub-agent, progress
forwarded and kept, transcripts that outlive the runner (a second runner on the same state
directory resumes), the concurrency limit, unknown ids, a cancel that never waits on the host
function, and a host function that fails."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from toolhub import Session, ToolError
from toolhub.core import CapabilityMode, ErrorKind
from toolhub.session_runner import (
    SessionSubagentRunner,
    SubagentCancelled,
    SubagentTranscript,
)
from toolhub.subagents import SubagentDepth, SubagentRequest, SubagentRunner

CHILD = {"tools": [{"id": "Main:read_file"}, {"id": "Main:write_file"}, {"id": "Main:bash"}]}


def request(ws: Path, prompt: str, **extra: object) -> SubagentRequest:
    return SubagentRequest(prompt=prompt, description="d", workspace=str(ws), cwd=str(ws), **extra)


def agent(prompt: str, child: Session, emit: Callable[[str], None]) -> str:
    names = sorted(d["function"]["name"] for d in child.definitions())
    emit(f"tools {names}\n")
    depth = child.resources.get(SubagentDepth)
    transcript = child.resources.get(SubagentTranscript)
    assert depth is not None and transcript is not None
    if prompt.startswith("write "):
        _, path, text = prompt.split(" ", 2)
        child.call_sync("write_file", {"path": path, "content": text})
    return f"depth {depth.depth}; turns {[t.prompt for t in transcript.turns]}"


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    return root


def test_runs_a_child_session_under_the_requested_mode(ws: Path, tmp_path: Path) -> None:
    runner = SessionSubagentRunner(agent, config=CHILD, state_dir=tmp_path / "agents")
    assert isinstance(runner, SubagentRunner)
    seen: list[str] = []
    run = runner.start(request(ws, "write f.txt hi"), on_progress=seen.append)
    result = run.wait(10)
    assert result is not None and result.status == "completed", result
    assert result.text == "depth 1; turns ['write f.txt hi']"
    assert seen[0] == "tools ['read_file', 'write_file']\n"  # read_write: no bash
    assert "finished" in seen[-1] and result.text in seen[-1]
    assert (ws / "f.txt").read_text() == "hi"
    text, _ = run.output().last(10_000)
    assert text.startswith("tools") and result.text in text
    run = runner.start(request(ws, "x", capability_mode=CapabilityMode.ALL))
    assert run.wait(10) is not None
    assert "bash" in run.output().last(10_000)[0]


def test_a_transcript_outlives_its_runner(ws: Path, tmp_path: Path) -> None:
    first = SessionSubagentRunner(agent, config=CHILD, state_dir=tmp_path / "agents")
    run = first.start(request(ws, "one"))
    assert run.wait(10) is not None
    second = SessionSubagentRunner(agent, config=CHILD, state_dir=tmp_path / "agents")
    assert second.knows(run.subagent_id)
    again = second.start(request(ws, "two", resume_from=run.subagent_id))
    result = again.wait(10)
    assert result is not None and result.turn == 2
    assert result.text == "depth 1; turns ['one', 'two']"
    # A run under an id assigned ahead (a fleet's re-run) continues the stored sub-agent too.
    third = SessionSubagentRunner(agent, config=CHILD, state_dir=tmp_path / "agents")
    rerun = third.start(request(ws, "three", subagent_id=run.subagent_id))
    assert rerun.wait(10).text == "depth 1; turns ['one', 'two', 'three']"


def test_unknown_ids_and_ids_that_are_paths(ws: Path, tmp_path: Path) -> None:
    runner = SessionSubagentRunner(agent, state_dir=tmp_path / "agents")
    for bad in ("agent-missing", "../../etc/passwd", "/etc/passwd"):
        assert not runner.knows(bad)
        with pytest.raises(ToolError) as caught:
            runner.start(request(ws, "x", resume_from=bad))
        assert caught.value.kind is ErrorKind.NOT_FOUND and caught.value.code == "unknown_subagent"


def test_concurrency_limit_and_cancel(ws: Path, tmp_path: Path) -> None:
    running, stopped = threading.Event(), threading.Event()

    def spinning(prompt: str, child: Session, emit: Callable[[str], None]) -> str:
        running.set()
        try:
            while True:
                emit(".")
                time.sleep(0.02)
        except SubagentCancelled:
            stopped.set()
            raise

    runner = SessionSubagentRunner(spinning, config=CHILD, state_dir=tmp_path / "agents")
    run = runner.start(request(ws, "spin"), max_concurrent=1)
    with pytest.raises(ToolError) as caught:
        runner.start(request(ws, "spin"), max_concurrent=1)
    assert caught.value.code == "too_many_subagents"
    with pytest.raises(ToolError) as busy:  # the same sub-agent cannot run two turns at once
        runner.start(request(ws, "again", resume_from=run.subagent_id))
    assert busy.value.kind is ErrorKind.INVALID_ARGUMENTS
    # Once the agent runs (a cancel before that ends the run before it starts at all).
    assert running.wait(30)
    started = time.monotonic()
    assert runner.cancel(run.subagent_id)
    result = run.wait(30)
    assert result is not None and result.status == "cancelled"
    # The agent spins until cancelled: any bound tells a prompt cancel from none, and this one
    # holds on a busy machine.
    assert time.monotonic() - started < 10
    assert stopped.wait(30)
    assert not run.cancel()  # already ended
    assert runner.transcript(run.subagent_id).turns[-1].status == "cancelled"


def test_a_failing_host_function_fails_the_run(ws: Path, tmp_path: Path) -> None:
    def broken(prompt: str, child: Session, emit: Callable[[str], None]) -> str:
        raise ValueError("no model today")

    runner = SessionSubagentRunner(broken, state_dir=tmp_path / "agents")
    result = runner.start(request(ws, "x")).wait(10)
    assert result is not None and result.status == "failed"
    assert "no model today" in result.error


def test_close_cancels_running_subagents(ws: Path, tmp_path: Path) -> None:
    gate = threading.Event()

    def waiting(prompt: str, child: Session, emit: Callable[[str], None]) -> str:
        gate.wait(5)
        return "late"

    runner = SessionSubagentRunner(waiting, state_dir=tmp_path / "agents")
    run = runner.start(request(ws, "x"))
    runner.close()
    ended = run.wait(30)
    assert ended is not None and ended.status == "cancelled"
    gate.set()
