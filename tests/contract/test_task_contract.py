"""``task`` under every executor (see conftest.py): a scripted host agent
(``tests/distributed/plugin_subagents.py``; on the fleet the workers get it from their plugin)
edits real files through its child session in the foreground and in the background, the
background sub-agent is a task that task_output / wait_tasks / kill_task work on, it resumes,
and bad inputs are typed errors."""

from __future__ import annotations

import time
from pathlib import Path

from tests.distributed.plugin_subagents import runner_for
from toolhub import Progress, Session
from toolhub.core import ErrorKind
from toolhub.executors import LocalExecutor
from toolhub.subagents import SubagentRunner

TASK_TOOLS = {
    "tools": [
        {"id": "Main:task", "name": "delegate", "rename": {"run_in_background": "background"}},
        {"id": "Main:task_output"},
        {"id": "Main:wait_tasks"},
        {"id": "Main:kill_task"},
    ]
}


def _open(session_factory, session_id: str, home: Path) -> Session:
    session: Session = session_factory(TASK_TOOLS, session_id=session_id)
    if isinstance(session.executor, LocalExecutor):  # embedded: the host sets it by hand
        session.resources.set(runner_for(session.toolset.container, home), SubagentRunner)
    return session


def test_foreground_subagent_writes_and_streams(session_factory, tmp_path: Path) -> None:
    session = _open(session_factory, f"task-fg-{time.time_ns()}", tmp_path)
    args = {"prompt": "write made.txt by-agent", "description": "write", "background": False}
    items = list(session.stream_sync("delegate", args))
    result = items[-1]
    assert not result.is_error, result.prompt_text
    assert result.output.value["text"] == "wrote"
    assert (tmp_path / "ws" / "made.txt").read_text() == "by-agent"
    streamed = "".join(i.payload["delta"] for i in items if isinstance(i, Progress))
    assert "finished" in streamed
    refused = session.call_sync("delegate", {**args, "cwd": "../.."})
    assert refused.is_error and refused.error.kind is ErrorKind.PERMISSION_DENIED
    unknown = session.call_sync("delegate", {**args, "resume_from": "agent-none"})
    assert unknown.is_error and unknown.error.code == "unknown_subagent"
    nogit = session.call_sync("delegate", {**args, "isolation": "worktree"})
    assert nogit.is_error and nogit.error.code == "not_a_git_repository"


def test_background_subagent_is_a_task_and_resumes(session_factory, tmp_path: Path) -> None:
    session = _open(session_factory, f"task-bg-{time.time_ns()}", tmp_path)
    started = session.call_sync("delegate", {"prompt": "first", "description": "bg"})
    assert not started.is_error, started.prompt_text
    task_id, sid = started.output.value["task_id"], started.output.value["subagent_id"]
    waited = session.call_sync("wait_tasks", {"task_ids": [task_id], "timeout_ms": 120_000})
    (snap,) = waited.output.value["tasks"]
    assert snap["status"] == "exited" and snap["exit_code"] == 0, snap
    assert "echoing first" in snap["output"] and "done: first" in snap["output"]
    again = session.call_sync(
        "delegate", {"prompt": "remember", "description": "bg", "resume_from": sid}
    )
    assert not again.is_error, again.prompt_text
    done = session.call_sync("task_output", {"task_ids": again.output.value["task_id"],
                                             "timeout_ms": 120_000})  # fmt: skip
    assert "first | remember" in done.output.value["tasks"][0]["output"]


def test_background_subagent_progress_and_kill(session_factory, tmp_path: Path) -> None:
    session = _open(session_factory, f"task-kill-{time.time_ns()}", tmp_path)
    marker = tmp_path / "runs.txt"
    started = session.call_sync("delegate", {"prompt": f"slow 100 {marker}", "description": "s"})
    task_id = started.output.value["task_id"]
    deadline = time.monotonic() + 20
    output = ""
    while "step 2" not in output and time.monotonic() < deadline:
        output = session.call_sync("task_output", {"task_ids": task_id}).prompt_text
        time.sleep(0.1)
    assert "step 2" in output and "Still running" in output, output
    killed = session.call_sync("kill_task", {"task_id": task_id})
    assert killed.output.value["outcome"] == "killed", killed.prompt_text
    final = session.call_sync("task_output", {"task_ids": task_id, "timeout_ms": 10_000})
    assert final.output.value["tasks"][0]["status"] == "killed"


def test_concurrency_limit_holds_for_background_subagents(session_factory, tmp_path) -> None:
    config = {
        "tools": [
            {"id": "Main:task", "params": {"max_concurrent": 1}},
            {"id": "Main:task_output"},
            {"id": "Main:kill_task"},
        ]
    }
    session: Session = session_factory(config, session_id=f"task-limit-{time.time_ns()}")
    if isinstance(session.executor, LocalExecutor):
        session.resources.set(runner_for(session.toolset.container, tmp_path), SubagentRunner)
    marker = tmp_path / "runs.txt"
    first = session.call_sync("task", {"prompt": f"slow 100 {marker}", "description": "a"})
    assert not first.is_error, first.prompt_text
    second = session.call_sync("task", {"prompt": "quick", "description": "b"})
    assert second.is_error and second.error.code == "too_many_subagents", second.prompt_text
    killed = session.call_sync("kill_task", {"task_id": first.output.value["task_id"]})
    assert killed.output.value["outcome"] == "killed"
    third = session.call_sync("task", {"prompt": "quick", "description": "c"})
    assert not third.is_error, third.prompt_text
