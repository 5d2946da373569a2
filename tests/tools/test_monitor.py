"""monitor: a real background command, matched line by line; and its reminder."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.tools.servers.base import wait_until
from tests.tools.servers.drive import call, snapshot
from toolhub.backends.process import ProcessRunner
from toolhub.backends.workspace import Workspace
from toolhub.core import (
    Container,
    ErrorKind,
    Outcome,
    Params,
    Progress,
    State,
    ToolContext,
    ToolOutput,
)
from toolhub.tools.monitor import (
    Monitor,
    MonitorMatch,
    MonitorMatches,
    MonitorMatchesReminder,
    MonitorOutput,
    MonitorParams,
    _adding,
)

NOTHING = ToolOutput.plain_text("")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    return workspace


def context(root: Path, call_id: str = "mon1", **params: Any) -> ToolContext:
    container = Container()
    container.insert(Workspace(root))
    container.insert(ProcessRunner(root, root.parent / "logs"))
    if params:
        container.insert(MonitorParams(**params), Params[MonitorParams])
    return ToolContext(call_id=call_id, container=container)


def watch(ctx: ToolContext, **args: Any) -> tuple[list[Progress], Outcome]:
    return call(Monitor(), ctx, args)


def summary(outcome: Outcome) -> MonitorOutput:
    assert outcome.error is None and outcome.output is not None, outcome.error
    return outcome.output.parse(MonitorOutput)


def test_matching_lines_stream_and_summarise(root: Path) -> None:
    script = "echo starting; echo 'ERROR: disk full'; echo ok; printf 'ERROR: last, no newline'"
    progress, out = watch(context(root), command=script, pattern=r"^ERROR")
    assert [(p.subkind, p.payload["line_number"], p.payload["line"]) for p in progress] == [
        ("monitor_match", 2, "ERROR: disk full"),
        ("monitor_match", 4, "ERROR: last, no newline"),
    ]
    result = summary(out)
    assert (result.ended, result.exit_code, result.match_count) == ("exited", 0, 2)
    assert result.last_lines == ["starting", "ERROR: disk full", "ok", "ERROR: last, no newline"]
    assert result.log_path is not None and Path(result.log_path).is_file()
    assert "Pattern `^ERROR` matched 2 line(s)." in out.text and "L2: ERROR: disk full" in out.text


def test_runs_in_the_workspace_in_its_own_process_group(root: Path) -> None:
    script = 'echo "cwd $(pwd)"; echo "group $(cut -d" " -f5 /proc/$$/stat) $$"'
    result = summary(watch(context(root), command=script, pattern=".")[1])
    assert result.last_lines[0] == f"cwd {root}"
    _, group, pid = result.last_lines[1].split()
    assert group == pid and int(group) != os.getpgid(0)


def test_timeout_ends_the_watch_and_the_command(root: Path) -> None:
    started = time.monotonic()
    script = "echo $$ > ../pid; while true; do echo tick; sleep 0.05; done"
    progress, out = watch(context(root), command=script, pattern="tick", timeout_ms=400)
    result = summary(out)
    assert result.ended == "timeout" and result.match_count == len(progress) > 2
    assert time.monotonic() - started < 20  # not the command's endless loop or 30 s sleep
    pid = int((root.parent / "pid").read_text())
    assert wait_until(lambda: not _alive(pid))


def test_cancel_kills_the_command(root: Path) -> None:
    ctx = context(root)
    threading.Timer(0.3, ctx.cancel.cancel).start()
    started = time.monotonic()
    out = watch(ctx, command="echo $$ > ../pid; sleep 30", pattern="x")[1]
    assert out.error is not None and out.error.kind is ErrorKind.CANCELLED
    assert time.monotonic() - started < 20  # not the command's endless loop or 30 s sleep
    assert wait_until(lambda: not _alive(int((root.parent / "pid").read_text())))


def test_limits_on_streamed_and_listed_matches(root: Path) -> None:
    ctx = context(root, max_progress_matches=3, max_reported_matches=2, tail_lines=1)
    progress, out = watch(ctx, command="seq 1 10", pattern=r"\d")
    result = summary(out)
    assert len(progress) == 3 and result.match_count == 10
    assert [m.line for m in result.matches] == ["9", "10"] and result.last_lines == ["10"]


def test_bad_input_is_typed_and_harmless(root: Path) -> None:
    (root / "keep.txt").write_text("keep")
    before = snapshot(root)
    ctx = context(root)
    for args in (
        {"command": "touch made", "pattern": "("},
        {"command": "", "pattern": "x"},
        {"command": "touch made", "pattern": "x", "timeout_ms": 0},
        {"command": "touch made"},
    ):
        out = watch(ctx, **args)[1]
        assert out.error is not None and out.error.kind is ErrorKind.INVALID_ARGUMENTS, args
    assert snapshot(root) == before


def test_own_matches_are_not_reminded(root: Path) -> None:
    ctx = context(root)
    summary(watch(ctx, command="echo hit", pattern="hit")[1])
    assert MonitorMatchesReminder().collect(ctx.container, NOTHING) == []


def test_reminder_reports_unseen_matches_exactly_once(root: Path) -> None:
    ctx = context(root, call_id="bg1")
    script = "echo 'ERROR one'; sleep 0.3; echo 'ERROR two'; sleep 30"
    runner = threading.Thread(
        target=watch, args=(ctx,), kwargs={"command": script, "pattern": "ERROR"}
    )
    runner.start()
    reminder = MonitorMatchesReminder()
    try:
        state = ctx.container
        assert wait_until(lambda: bool(state.get_or_default(State[MonitorMatches]).pending))
        (first,) = reminder.collect(state, NOTHING)
        assert first == "Monitor `bg1` matched 1 new line(s):\n  L1: ERROR one"
        assert reminder.collect(state, NOTHING) == []
        assert wait_until(lambda: bool(state.get_or_default(State[MonitorMatches]).pending))
        (second,) = reminder.collect(state, NOTHING)
        assert "L2: ERROR two" in second and "ERROR one" not in second
    finally:
        ctx.cancel.cancel()
        runner.join(5)
    assert not runner.is_alive()


def test_concurrent_readers_never_report_twice() -> None:
    container = Container()
    matches = [MonitorMatch(call_id="m", line_number=n, line=f"hit {n}") for n in range(1, 6)]
    for match in matches:
        container.update(State[MonitorMatches], _adding(match, 3))
    assert container.require(State[MonitorMatches]).dropped == 2
    reports: list[str] = []
    barrier = threading.Barrier(8)

    def read() -> None:
        barrier.wait()
        reports.extend(MonitorMatchesReminder().collect(container, NOTHING))

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    (report,) = reports
    assert "matched 3 new line(s)" in report and "L3: hit 3" in report and "L1:" not in report
    assert "(2 older monitor matches were not kept.)" in report


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
