"""``task`` embedded: a scripted host agent drives a real child session (real tools, real files),
in the foreground and as a background task seen by task_output / wait_tasks / kill_task and the
completion reminder; every bad input is a typed error."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from toolhub import Session
from toolhub.core import ErrorKind, Progress
from toolhub.session_runner import (
    SessionSubagentRunner,
    SubagentCancelled,
    SubagentTranscript,
)
from toolhub.subagents import SubagentRunner
from toolhub.tasks import BackgroundTasks

TOOLS = ["Main:task", "Main:task_output", "Main:wait_tasks", "Main:kill_task", "Main:read_file"]
CHILD_TOOLS = {
    "tools": [
        {"id": "Main:read_file"},
        {"id": "Main:write_file"},
        {"id": "Main:bash", "params": {"enabled_background": False}},
        {"id": "Main:task", "params": {"enabled_background": False}},
    ]
}


def scripted_agent(prompt: str, child: Session, emit: Callable[[str], None]) -> str:
    """The host's agent loop, scripted: the prompt says what to do, real tools do it."""
    names = {d["function"]["name"] for d in child.definitions()}
    emit(f"tools: {','.join(sorted(names))}\n")
    if prompt.startswith("read "):
        result = child.call_sync("read_file", {"path": prompt.split(" ", 1)[1]})
        emit("read it\n")
        return result.output.value["content"].strip().splitlines()[-1].split("|")[-1].strip()
    if prompt.startswith("write "):
        _, path, text = prompt.split(" ", 2)
        result = child.call_sync("write_file", {"path": path, "content": text})
        return "wrote" if not result.is_error else f"refused: {result.error.detail}"
    if prompt == "remember":
        transcript = child.resources.get(SubagentTranscript)
        assert transcript is not None
        return " | ".join(t.prompt for t in transcript.turns)
    if prompt.startswith("slow"):
        for i in range(200):
            emit(f"step {i}\n")
            time.sleep(0.05)
        return "slow done"
    if prompt == "fail":
        raise RuntimeError("the model gave up")
    return f"done: {prompt}"


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Callable[..., Session]]:
    opened: list[Session] = []

    def build(
        agent: Any = scripted_agent,
        *,
        params: dict[str, Any] | None = None,
        workspace: Path | None = None,
        runner: bool = True,
        tools: list[str] = TOOLS,
    ) -> Session:
        ws = workspace or tmp_path / "ws"
        ws.mkdir(exist_ok=True)
        config = {"tools": [{"id": t} for t in tools]}
        if params is not None:
            config["tools"][0]["params"] = params
        session = Session.embedded(
            config, ws, session_id="parent", state_dir=tmp_path / "state" / str(len(opened))
        )
        if runner:
            made = SessionSubagentRunner(agent, config=CHILD_TOOLS, state_dir=tmp_path / "agents")
            session.resources.set(made, SubagentRunner)
        opened.append(session)
        return session

    yield build
    for session in opened:
        session.close()


def fg(session: Session, prompt: str, **extra: Any) -> Any:
    args = {"prompt": prompt, "description": "test", "run_in_background": False, **extra}
    return session.call_sync("task", args)


def test_foreground_reads_through_real_tools_and_streams_progress(make, tmp_path) -> None:
    session = make()
    (tmp_path / "ws" / "notes.txt").write_text("alpha\nbeta\n")
    items = list(
        session.stream_sync(
            "task", {"prompt": "read notes.txt", "description": "read", "run_in_background": False}
        )
    )
    progress = [i for i in items if isinstance(i, Progress)]
    result = items[-1]
    assert not result.is_error, result.prompt_text
    assert result.output.value["text"] == "beta"
    assert result.output.value["status"] == "completed"
    streamed = "".join(p.payload["delta"] for p in progress)
    assert "read it" in streamed
    assert "resume_from" in result.prompt_text


def test_subagent_tools_default_to_read_write_without_task_or_bash(make) -> None:
    items = list(
        make().stream_sync("task", {"prompt": "x", "description": "d", "run_in_background": False})
    )
    streamed = "".join(i.payload["delta"] for i in items if isinstance(i, Progress))
    assert streamed.startswith("tools: read_file,write_file\n"), streamed


def test_subagent_writes_land_in_the_workspace(make, tmp_path) -> None:
    result = fg(make(), "write out.txt hello")
    assert result.output.value["text"] == "wrote"
    assert (tmp_path / "ws" / "out.txt").read_text() == "hello"


def test_cwd_confines_the_subagent(make, tmp_path) -> None:
    (tmp_path / "ws" / "sub").mkdir(parents=True)
    result = fg(make(), "write ../escape.txt x", cwd="sub")
    assert "refused" in result.output.value["text"]
    assert not (tmp_path / "ws" / "escape.txt").exists()
    fg(make(), "write inside.txt y", cwd="sub")
    assert (tmp_path / "ws" / "sub" / "inside.txt").read_text() == "y"


def test_cwd_outside_the_workspace_is_refused(make, tmp_path) -> None:
    for cwd in ("..", str(tmp_path), "/etc"):
        result = fg(make(), "x", cwd=cwd)
        assert result.is_error and result.error.kind is ErrorKind.PERMISSION_DENIED, cwd
    (tmp_path / "ws" / "file.txt").write_text("x")
    result = fg(make(), "x", cwd="file.txt")
    assert result.error.kind is ErrorKind.INVALID_ARGUMENTS


def test_resume_continues_the_same_subagent(make) -> None:
    session = make()
    first = fg(session, "one")
    sid = first.output.value["subagent_id"]
    again = fg(session, "remember", resume_from=sid)
    assert again.output.value["subagent_id"] == sid
    assert again.output.value["text"] == "one | remember"
    assert again.output.value["turn"] == 2


def test_unknown_resume_from_is_refused(make) -> None:
    result = fg(make(), "x", resume_from="agent-nope")
    assert result.is_error and result.error.kind is ErrorKind.NOT_FOUND
    assert result.error.code == "unknown_subagent"
    bad = fg(make(), "x", resume_from="../../etc/passwd")
    assert bad.error.code == "unknown_subagent"


def test_no_runner_names_what_the_host_must_provide(make) -> None:
    result = fg(make(runner=False), "x")
    assert result.is_error and result.error.code == "no_subagent_runner"
    assert (
        "SubagentRunner" in result.error.detail and "session.resources.set" in result.error.detail
    )


def test_depth_limit_drops_task_from_the_child_and_refuses_a_nested_call(make) -> None:
    seen: list[Any] = []

    def nesting(prompt: str, child: Session, emit: Callable[[str], None]) -> str:
        seen.append({d["function"]["name"] for d in child.definitions()})
        seen.append(child.call_sync("task", {"prompt": "x", "description": "d"}))
        return "ok"

    # Even with sub-agents in mode `all` (so `task` survives the mode filter), the child's tool
    # set has no `task` at the depth limit, and a call of it fails.
    session = make(nesting, params={"subagent_mode": "all"})
    assert fg(session, "go").output.value["text"] == "ok"
    names, nested = seen
    assert "task" not in names and "read_file" in names
    assert nested.is_error


def test_a_task_call_at_the_depth_limit_is_a_typed_error(make) -> None:
    from toolhub.subagents import SubagentDepth

    session = make()
    session.resources.set(SubagentDepth(1))  # what a child session of the runner carries
    result = fg(session, "x")
    assert result.is_error and result.error.kind is ErrorKind.PERMISSION_DENIED
    assert result.error.code == "subagent_depth_exceeded" and "depth 1" in result.error.detail


def test_concurrency_limit(make) -> None:
    session = make(params={"max_concurrent": 1})
    started = session.call_sync("task", {"prompt": "slow", "description": "a"})
    assert not started.is_error, started.prompt_text
    refused = session.call_sync("task", {"prompt": "slow", "description": "b"})
    assert refused.is_error and refused.error.code == "too_many_subagents"
    assert refused.error.kind is ErrorKind.RATE_LIMITED
    killed = session.call_sync("kill_task", {"task_id": started.output.value["task_id"]})
    assert killed.output.value["outcome"] == "killed"
    assert not session.call_sync("task", {"prompt": "quick", "description": "c"}).is_error


def test_worktree_isolation(make, tmp_path) -> None:
    ws = tmp_path / "repo"
    ws.mkdir()
    (ws / "a.txt").write_text("base\n")
    for cmd in (
        ["git", "init", "-q"],
        ["git", "add", "."],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
    ):
        subprocess.run(cmd, cwd=ws, check=True)
    session = make(workspace=ws)
    result = fg(session, "write a.txt changed", isolation="worktree")
    assert result.output.value["text"] == "wrote", result.prompt_text
    worktree = Path(result.output.value["worktree"])
    assert (worktree / "a.txt").read_text() == "changed"
    assert (ws / "a.txt").read_text() == "base\n"
    assert not worktree.is_relative_to(ws)


def test_worktree_on_a_non_git_workspace_is_refused(make, tmp_path) -> None:
    result = fg(make(), "x", isolation="worktree")
    assert result.is_error and result.error.code == "not_a_git_repository"
    assert result.error.kind is ErrorKind.INVALID_ARGUMENTS and "git" in result.error.detail
    assert list((tmp_path / "state").glob("*/worktrees/*")) == []


def test_a_failing_host_agent_is_a_typed_error(make) -> None:
    result = fg(make(), "fail")
    assert result.is_error and result.error.kind is ErrorKind.EXECUTION
    assert result.error.code == "subagent_failed" and "the model gave up" in result.error.detail


def test_cancel_stops_the_subagent_at_once(make) -> None:
    running, stopped = threading.Event(), threading.Event()

    def agent(prompt: str, child: Session, emit: Callable[[str], None]) -> str:
        running.set()
        try:
            while True:
                emit(".")
                time.sleep(0.02)
        except SubagentCancelled:
            stopped.set()
            raise

    session = make(agent)
    args = {"prompt": "spin", "description": "d", "run_in_background": False}
    cancelled_at: list[float] = []

    def cancel_once_running() -> None:
        # Once the agent runs (a cancel before that is answered before it starts at all).
        running.wait(30)
        cancelled_at.append(time.monotonic())
        session.cancel_sync("c1")

    threading.Thread(target=cancel_once_running, daemon=True).start()
    result = session.call_sync("task", args, call_id="c1")
    assert result.is_error and result.error.kind is ErrorKind.CANCELLED
    # The agent spins until cancelled: any bound tells a prompt cancel from none, and this one
    # holds on a busy machine.
    assert cancelled_at and time.monotonic() - cancelled_at[0] < 15
    assert stopped.wait(30)


# -- background --------------------------------------------------------------------------------


def test_background_subagent_is_a_background_task(make) -> None:
    session = make()
    started = session.call_sync("task", {"prompt": "hello", "description": "greet"})
    assert not started.is_error, started.prompt_text
    task_id = started.output.value["task_id"]
    assert task_id and "task_output" in started.prompt_text
    waited = session.call_sync("wait_tasks", {"task_ids": [task_id], "timeout_ms": 10_000})
    (snap,) = waited.output.value["tasks"]
    assert snap["status"] == "exited" and snap["exit_code"] == 0
    assert "done: hello" in snap["output"] and "sub-agent" in snap["command"]
    again = session.call_sync("read_file", {"path": "."})
    assert not any(task_id in n for n in again.prompt_text.split("Background task")[1:])


def test_completion_reminder_announces_a_background_subagent(make) -> None:
    session = make()
    started = session.call_sync("task", {"prompt": "announce me", "description": "d"})
    runner = session.resources.get(SubagentRunner)
    assert isinstance(runner, SessionSubagentRunner)
    sid = started.output.value["subagent_id"]
    deadline = time.monotonic() + 60
    while runner.transcript(sid).turns[-1].status is None and time.monotonic() < deadline:
        time.sleep(0.02)
    # The task ends once the run's done callbacks ran (after the transcript's status is set).
    tasks = session.resources.get(BackgroundTasks)
    assert tasks is not None
    tasks.wait([started.output.value["task_id"]], "wait_all", 60)
    result = session.call_sync("read_file", {"path": "missing.txt"})
    assert f'Background task "{started.output.value["task_id"]}" completed' in result.prompt_text
    assert "done: announce me" in result.prompt_text
    later = session.call_sync("read_file", {"path": "missing.txt"})
    assert "Background task" not in later.prompt_text


def test_background_progress_shows_in_task_output_and_kill_cancels(make) -> None:
    session = make()
    started = session.call_sync("task", {"prompt": "slow", "description": "d"})
    task_id = started.output.value["task_id"]
    time.sleep(0.4)
    running = session.call_sync("task_output", {"task_ids": task_id})
    (snap,) = running.output.value["tasks"]
    assert snap["status"] == "running" and "step 1" in snap["output"]
    killed = session.call_sync("kill_task", {"task_id": task_id})
    assert killed.output.value["outcome"] == "killed"
    assert killed.output.value["task"]["status"] == "killed"


def test_background_resume(make) -> None:
    session = make()
    started = session.call_sync("task", {"prompt": "first", "description": "d"})
    session.call_sync("wait_tasks", {"task_ids": started.output.value["task_id"]})
    sid = started.output.value["subagent_id"]
    resumed = session.call_sync(
        "task", {"prompt": "remember", "description": "d", "resume_from": sid}
    )
    done = session.call_sync("wait_tasks", {"task_ids": resumed.output.value["task_id"]})
    assert "first | remember" in done.output.value["tasks"][0]["output"]


def test_background_disabled(make) -> None:
    session = make(params={"enabled_background": False}, tools=["Main:task"])
    (definition,) = session.definitions()
    assert "run_in_background" not in definition["function"]["parameters"]["properties"]
    result = session.call_sync("task", {"prompt": "x", "description": "d"})
    assert result.output.value["mode"] == "foreground"
    refused = session.call_sync(
        "task", {"prompt": "x", "description": "d", "run_in_background": True}
    )
    assert refused.error.kind is ErrorKind.INVALID_ARGUMENTS


# -- requirements and the builder's resource providers ----------------------------------------


def test_requirements_task_needs_the_task_tools_and_satisfies_them() -> None:
    from toolhub.session_parts import default_builder

    builder = default_builder()
    assert builder.validate({"tools": [{"id": t} for t in TOOLS]}).ok
    alone = builder.validate({"tools": [{"id": "Main:task"}]})
    assert not alone.ok
    assert {v.category for v in alone.violations} == {"requirements"}
    assert "background_task_action" in alone.violations[0].message
    # task_output / wait_tasks / kill_task accept `task` (with background) as their producer.
    no_bg = {"id": "Main:task", "params": {"enabled_background": False}}
    orphan = builder.validate({"tools": [no_bg, {"id": "Main:task_output"}]})
    assert not orphan.ok and any("task_output" in v.tool for v in orphan.violations)


def test_a_builder_provider_gives_every_tool_set_a_runner(tmp_path: Path) -> None:
    from toolhub.tools import CATALOG
    from toolhub.toolset import ToolSetBuilder

    builder = ToolSetBuilder(CATALOG, plugins=False)
    made: list[object] = []

    def factory(container: object) -> SessionSubagentRunner:
        runner = SessionSubagentRunner(scripted_agent, config=CHILD_TOOLS, state_dir=tmp_path / "a")
        made.append(container)
        return runner

    builder.provide(SubagentRunner, factory)
    (tmp_path / "ws").mkdir()
    config = {"tools": [{"id": t} for t in TOOLS]}
    with Session.embedded(config, tmp_path / "ws", state_dir=tmp_path / "s", builder=builder) as s:
        assert isinstance(s.resources.get(SubagentRunner), SessionSubagentRunner)
        result = fg(s, "hi")
        assert result.output.value["text"] == "done: hi", result.prompt_text
    assert len(made) == 1


def test_plan_mode_makes_subagents_read_only(make) -> None:
    session = make(tools=[*TOOLS, "Main:enter_plan_mode", "Main:exit_plan_mode"])
    session.call_sync("enter_plan_mode", {})
    items = list(
        session.stream_sync("task", {"prompt": "x", "description": "d", "run_in_background": False})
    )
    streamed = "".join(i.payload["delta"] for i in items if isinstance(i, Progress))
    assert streamed.startswith("tools: read_file\n"), streamed


def test_a_refused_start_leaves_no_worktree(make, tmp_path) -> None:
    ws = tmp_path / "repo"
    ws.mkdir()
    (ws / "a.txt").write_text("base\n")
    for cmd in (
        ["git", "init", "-q"],
        ["git", "add", "."],
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init"],
    ):
        subprocess.run(cmd, cwd=ws, check=True)
    session = make(workspace=ws, params={"max_concurrent": 1})
    first = session.call_sync("task", {"prompt": "slow", "description": "a"})
    assert not first.is_error
    refused = session.call_sync(
        "task", {"prompt": "x", "description": "b", "isolation": "worktree"}
    )
    assert refused.error.code == "too_many_subagents"
    listed = subprocess.run(
        ["git", "worktree", "list"], cwd=ws, capture_output=True, text=True, check=True
    )
    assert len(listed.stdout.strip().splitlines()) == 1, listed.stdout
    session.call_sync("kill_task", {"task_id": first.output.value["task_id"]})
