"""``monitor``: run a command in the background and report the output lines that match a pattern.

The command runs through the session's ``ProcessRunner`` (its own process group, in the
workspace, logged, killable at once). Each matching line streams as a ``monitor_match`` progress
item while the command runs, until it exits, ``timeout_ms`` passes (the normal end of a watch) or
the call is cancelled. Matches are also recorded in ``State[MonitorMatches]``, so that when the
model is busy with other calls, ``MonitorMatchesReminder`` tells it about them — each match
exactly once, and none that the monitor's own result already showed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from toolhub.backends.process import ProcessRunner
from toolhub.backends.running import RunningCommand
from toolhub.backends.workspace import Workspace
from toolhub.core import (
    Container,
    Params,
    Progress,
    State,
    Tool,
    ToolContext,
    ToolError,
    ToolKind,
    ToolOutput,
)
from toolhub.core.requirements import Expr, Kind


class MonitorParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    default_timeout_ms: int = Field(600_000, ge=1)
    max_timeout_ms: int = Field(36_000_000, ge=1)
    max_line_chars: int = Field(2000, ge=20)
    tail_lines: int = Field(20, ge=0, description="Last output lines in the result.")
    max_reported_matches: int = Field(50, ge=1, description="Matches listed in the result.")
    max_progress_matches: int = Field(1000, ge=0, description="Matches streamed as progress.")
    max_pending_matches: int = Field(100, ge=1, description="Matches kept for the reminder.")


class MonitorArgs(BaseModel):
    command: str = Field(min_length=1, description="Shell command to run and watch.")
    pattern: str = Field(min_length=1, description="Python regular expression to match lines.")
    timeout_ms: int | None = Field(None, ge=1, description="Stop watching (and the command) after.")


class MonitorMatch(BaseModel):
    call_id: str
    line_number: int
    line: str


class MonitorMatches(BaseModel):
    """Matches the model has not seen yet, shared by every process of the session.

    Changes are pure functions of the old value (``Container.update`` may retry them). A reader
    claims the pending matches under a fresh token and reports them only if the stored value
    carries its token: two concurrent readers can never both report the same match.
    """

    resource_id: ClassVar[str] = "main.monitor_matches"

    pending: list[MonitorMatch] = Field(default_factory=list)
    dropped: int = 0
    claim: str = ""
    claimed: list[MonitorMatch] = Field(default_factory=list)
    claimed_dropped: int = 0

    def add(self, match: MonitorMatch, cap: int) -> MonitorMatches:
        pending = [*self.pending, match]
        overflow = max(0, len(pending) - cap)
        return self.model_copy(
            update={"pending": pending[overflow:], "dropped": self.dropped + overflow}
        )

    def seen(self, call_id: str) -> MonitorMatches:
        """The monitor's own result showed its matches: no reminder needed for them."""
        return self.model_copy(
            update={"pending": [m for m in self.pending if m.call_id != call_id]}
        )

    def take(self, token: str) -> MonitorMatches:
        return MonitorMatches(claim=token, claimed=self.pending, claimed_dropped=self.dropped)


class MonitorOutput(BaseModel):
    command: str
    pattern: str
    ended: Literal["exited", "timeout", "killed"]
    exit_code: int | None
    duration_s: float
    match_count: int
    matches: list[MonitorMatch]
    last_lines: list[str]
    log_path: str | None = None

    def model_text(self) -> str:
        ending = {
            "exited": f"the command exited with code {self.exit_code}",
            "timeout": "the watch timed out and the command was stopped",
            "killed": "the command was killed",
        }[self.ended]
        lines = [f"Monitor ended after {self.duration_s:.1f} s: {ending}."]
        lines.append(f"Pattern `{self.pattern}` matched {self.match_count} line(s).")
        if self.match_count > len(self.matches):
            lines.append(f"Last {len(self.matches)} matches:")
        lines += [f"  L{m.line_number}: {m.line}" for m in self.matches]
        if self.last_lines:
            lines.append("Last output lines:")
            lines += [f"  {line}" for line in self.last_lines]
        if self.log_path:
            lines.append(f"Full output: {self.log_path}")
        return "\n".join(lines)


class LineMatcher:
    """Splits output chunks into lines and keeps the tail; returns the matching lines.

    Runs on the runner's reader thread only (``feed`` then ``flush``), so it needs no lock.
    """

    def __init__(self, regex: re.Pattern[str], max_chars: int, tail: int) -> None:
        self.regex = regex
        self.max_chars = max_chars
        self.tail: deque[str] = deque(maxlen=tail)
        self.count = 0
        self._partial = b""

    def feed(self, chunk: bytes) -> list[tuple[int, str]]:
        *complete, self._partial = (self._partial + chunk).split(b"\n")
        return [hit for raw in complete if (hit := self._line(raw)) is not None]

    def flush(self) -> list[tuple[int, str]]:
        raw, self._partial = self._partial, b""
        hit = self._line(raw) if raw else None
        return [hit] if hit is not None else []

    def _line(self, raw: bytes) -> tuple[int, str] | None:
        self.count += 1
        text = raw.decode("utf-8", "replace").rstrip("\r")[: self.max_chars]
        self.tail.append(text)
        return (self.count, text) if self.regex.search(text) else None


class Monitor(Tool[MonitorArgs, MonitorOutput]):
    id = "monitor"
    kind = ToolKind.MONITOR
    params_model = MonitorParams
    state_models = (MonitorMatches,)
    workload = "background"
    description_template = (
        "Run a command in the background (in the workspace) and watch its output: every line "
        "matching `${{ params.monitor.pattern }}` (a Python regular expression) is reported as "
        "it appears, until the command exits or `${{ params.monitor.timeout_ms }}` passes (then "
        "the command is stopped). Use it for logs, dev servers and long builds, where only some "
        "lines matter."
    )

    async def execute(
        self, ctx: ToolContext, args: MonitorArgs
    ) -> AsyncIterator[Progress | MonitorOutput]:
        params = ctx.container.get_or_default(Params[MonitorParams])
        workspace = ctx.container.require(Workspace)
        runner = ctx.container.require(ProcessRunner)
        try:
            regex = re.compile(args.pattern)
        except re.error as exc:
            raise ToolError.invalid_arguments(
                f"`{ctx.param_name('pattern')}` is not a valid regular expression: {exc}"
            ) from None
        timeout_ms = min(args.timeout_ms or params.default_timeout_ms, params.max_timeout_ms)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[int, str] | None] = asyncio.Queue()
        lines = LineMatcher(regex, params.max_line_chars, params.tail_lines)

        def post(items: list[tuple[int, str] | None]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone: the call was abandoned
                for item in items:
                    loop.call_soon_threadsafe(queue.put_nowait, item)

        running = runner.start(
            args.command,
            log_name=f"monitor-{ctx.call_id or uuid.uuid4().hex}",
            cwd=workspace.root,
            timeout_s=timeout_ms / 1000,
            on_output=lambda chunk: post(list(lines.feed(chunk))),
        )
        running.add_done_callback(lambda _: post([*lines.flush(), None]))
        unregister = ctx.cancel.on_cancel(lambda: _kill(running))
        count = 0
        shown: deque[MonitorMatch] = deque(maxlen=params.max_reported_matches)
        try:
            while (hit := await queue.get()) is not None:
                count += 1
                match = MonitorMatch(call_id=ctx.call_id, line_number=hit[0], line=hit[1])
                shown.append(match)
                _record(ctx.container, _adding(match, params.max_pending_matches))
                if count <= params.max_progress_matches:
                    yield Progress.custom(
                        "monitor_match",
                        {"line_number": hit[0], "line": hit[1], "match_count": count},
                    )
        finally:
            unregister()
            running.kill("cancelled")
        result = running.result
        assert result is not None  # the end-of-output sentinel is posted after the result
        _record(ctx.container, lambda s: s.seen(ctx.call_id))
        if result.killed == "cancelled":
            raise ToolError.cancelled()
        yield MonitorOutput(
            command=args.command,
            pattern=args.pattern,
            ended="exited" if result.killed is None else result.killed,
            exit_code=result.exit_code,
            duration_s=round(result.duration_s, 3),
            match_count=count,
            matches=list(shown),
            last_lines=list(lines.tail),
            log_path=None if result.output.log_path is None else str(result.output.log_path),
        )


def _record(container: Container, change: Callable[[MonitorMatches], MonitorMatches]) -> None:
    container.update(State[MonitorMatches], change)


def _adding(match: MonitorMatch, cap: int) -> Callable[[MonitorMatches], MonitorMatches]:
    return lambda state: state.add(match, cap)


def _kill(running: RunningCommand) -> None:
    running.kill("cancelled")


class MonitorMatchesReminder:
    """Tells the model about monitor matches it has not seen, after any call, exactly once."""

    requires: Expr = Kind(ToolKind.MONITOR)

    def collect(self, container: Container, output: ToolOutput) -> list[str]:
        current = container.get(State[MonitorMatches])
        if current is None or not (current.pending or current.dropped):
            return []
        token = uuid.uuid4().hex
        taken = container.update(State[MonitorMatches], lambda s: s.take(token))
        if taken.claim != token or not (taken.claimed or taken.claimed_dropped):
            return []
        by_call: dict[str, list[MonitorMatch]] = {}
        for match in taken.claimed:
            by_call.setdefault(match.call_id, []).append(match)
        notes = [
            f"Monitor `{call_id}` matched {len(found)} new line(s):\n"
            + "\n".join(f"  L{m.line_number}: {m.line}" for m in found)
            for call_id, found in by_call.items()
        ]
        if taken.claimed_dropped:
            notes.append(f"({taken.claimed_dropped} older monitor matches were not kept.)")
        return ["\n\n".join(notes)]


TOOLS: list[type[Tool[Any, Any]]] = [Monitor]
REMINDERS = [MonitorMatchesReminder()]
