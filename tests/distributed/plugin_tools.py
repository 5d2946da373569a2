"""Test tools for the distributed suite, loaded by worker subprocesses through
``TOOLHUB_PLUGINS=tests.distributed.plugin_tools`` and by the test dispatchers directly.

Each one exercises one failure mode: progress timing, a process group to kill, a worker that
dies mid-call (or every time), and concurrent compare-and-set merges of session state.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from toolhub.core import Progress, State, Tool, ToolContext, ToolKind
from toolhub.toolset import ToolSetBuilder

KILL_GRACE_S = 0.5


class NoArgs(BaseModel):
    pass


class Empty(BaseModel):
    pass


class Noop(Tool[NoArgs, Empty]):
    """The round-trip benchmark's tool: does nothing, fast queue."""

    id = "noop"
    namespace = "Test"
    kind = ToolKind.OTHER
    read_only = True
    description_template = "Do nothing."

    def run(self, ctx: ToolContext, args: NoArgs) -> Empty:
        return Empty()


class TicksArgs(BaseModel):
    n: int = Field(default=3, ge=0, le=100_000)
    delay_ms: float = 0.0
    marker: str | None = None


class TicksOutput(BaseModel):
    total: int
    worker_pid: int


class Ticks(Tool[TicksArgs, TicksOutput]):
    """Streams ``n`` progress items stamped with the emit time; with ``marker`` it appends
    ``start <pid>`` / ``done <pid>`` lines to that file (to count how often it really ran)."""

    id = "ticks"
    namespace = "Test"
    kind = ToolKind.EXECUTE
    workload = "command"
    description_template = "Stream ticks."

    async def execute(self, ctx: ToolContext, args: TicksArgs):  # type: ignore[override]
        marker = Path(args.marker) if args.marker else None
        if marker is not None:
            with marker.open("a") as handle:
                handle.write(f"start {os.getpid()}\n")
        for i in range(args.n):
            yield Progress.custom("tick", {"i": i, "t": time.time(), "pid": os.getpid()})
            if args.delay_ms:
                await asyncio.sleep(args.delay_ms / 1000)
        if marker is not None:
            with marker.open("a") as handle:
                handle.write(f"done {os.getpid()}\n")
        yield TicksOutput(total=args.n, worker_pid=os.getpid())


class SleeperArgs(BaseModel):
    seconds: float = 30.0


class SleeperOutput(BaseModel):
    exit_code: int | None


class Sleeper(Tool[SleeperArgs, SleeperOutput]):
    """Spawns ``sleep`` in its own process group and reports its pid; cancel kills the group
    (TERM, then KILL after a grace), the way the real process runner does."""

    id = "sleeper"
    namespace = "Test"
    kind = ToolKind.EXECUTE
    workload = "command"
    description_template = "Sleep in a child process."

    async def execute(self, ctx: ToolContext, args: SleeperArgs):  # type: ignore[override]
        proc = subprocess.Popen(["sleep", str(args.seconds)], start_new_session=True)

        def kill() -> None:
            _signal_group(proc.pid, signal.SIGTERM)
            timer = threading.Timer(KILL_GRACE_S, _signal_group, (proc.pid, signal.SIGKILL))
            timer.daemon = True
            timer.start()

        ctx.cancel.on_cancel(kill)
        yield Progress.custom("pid", {"pid": proc.pid, "t": time.time()})
        code = await asyncio.to_thread(proc.wait)
        yield SleeperOutput(exit_code=code)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


class Suicide(Tool[NoArgs, Empty]):
    """Kills the worker process that runs it, every time: a poison call."""

    id = "suicide"
    namespace = "Test"
    kind = ToolKind.EXECUTE
    workload = "command"
    description_template = "Kill the worker."

    def run(self, ctx: ToolContext, args: NoArgs) -> Empty:
        os.kill(os.getpid(), signal.SIGKILL)
        return Empty()


class Items(BaseModel):
    resource_id: ClassVar[str] = "test_items"
    items: list[str] = Field(default_factory=list)


class MergeArgs(BaseModel):
    item: str


class MergeOutput(BaseModel):
    count: int


class Merge(Tool[MergeArgs, MergeOutput]):
    """Adds one item to the session's list with ``Container.update`` (a todo_write-style
    merge); the pause inside widens the race window on purpose."""

    id = "merge"
    namespace = "Test"
    kind = ToolKind.PLAN
    description_template = "Merge an item."
    state_models = (Items,)

    def run(self, ctx: ToolContext, args: MergeArgs) -> MergeOutput:
        def add(current: Items) -> Items:
            time.sleep(0.002)
            return Items(items=[*current.items, args.item])

        new = ctx.container.update(State[Items], add)
        return MergeOutput(count=len(new.items))


TOOLS: tuple[type[Tool[Any, Any]], ...] = (Noop, Ticks, Sleeper, Suicide, Merge)
TOOL_IDS = [t.fq_id() for t in TOOLS]
#: The drills re-run what a lost worker ran (``on_worker_lost: rerun``); the default policy for
#: tools that are not read-only, ``fail``, has tests of its own (``test_worker_loss.py``).
CONFIG = {"tools": [{"id": fq, "on_worker_lost": "rerun"} for fq in TOOL_IDS]}
DEFAULT_POLICY_CONFIG = {"tools": [{"id": fq} for fq in TOOL_IDS]}


def register(builder: ToolSetBuilder) -> None:
    builder.register(*TOOLS)


def make_builder() -> ToolSetBuilder:
    """What the tests' dispatchers use: these tools only, no entry-point plugins."""
    return ToolSetBuilder(plugins=False).register(*TOOLS)
