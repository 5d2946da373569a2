"""One frame of ``toolhub top``: what was read (``Reading``) drawn as rich tables, one under the
other, so the same frame reads at 80 columns and wider.

Every name in a frame (tools, workers, sessions, tenants, commands) comes from the fleet, and a
command's text from whoever wrote it: each is drawn as plain ``Text`` through ``clean``, never
as rich markup, and with no control character reaching the terminal.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from toolhub.distributed.fleet_view import FleetView
from toolhub.distributed.usage import ALL_TOOLS, UsageRow
from toolhub.tasks import TaskSnapshot
from toolhub.tenancy import DEFAULT_TENANT

from .terminal_safe import clean
from .top_metrics import ToolFigures, WorkerSample

#: Rows per table; the rest is counted in a last line.
MAX_ROWS = 12
#: From this many columns on, two tables share a row.
SIDE_BY_SIDE = 110


@dataclass(slots=True)
class Reading:
    """Everything one refresh read; a part that could not be read carries its error."""

    source: str
    at: float
    fleet: FleetView | None = None
    fleet_error: str | None = None
    tools: list[ToolFigures] = field(default_factory=list)
    workers: list[WorkerSample] = field(default_factory=list)
    tasks: Sequence[TaskSnapshot] = ()
    tasks_error: str | None = None
    tenants: list[UsageRow] = field(default_factory=list)


def frame(reading: Reading, width: int = 80) -> RenderableType:
    """The frame for a terminal ``width`` columns wide: at ``SIDE_BY_SIDE`` and wider, the
    tables after the tools' go two to a row."""
    tables: list[RenderableType] = []
    if reading.fleet is not None:
        tables += [_queues(reading.fleet), _in_flight(reading.fleet)]
    tables += [_workers(reading.workers), _tasks(reading)]
    if any(row.tenant != DEFAULT_TENANT for row in reading.tenants):
        tables.append(_tenants(reading.tenants))
    parts: list[RenderableType] = [_header(reading)]
    if reading.fleet_error is not None:
        parts.append(Text(f"redis: {clean(reading.fleet_error)}", style="red"))
    parts.append(_tools(reading))
    if width < SIDE_BY_SIDE:
        return Group(*parts, *tables)
    grid = Table.grid(expand=True, padding=(0, 2))
    grid.add_column(ratio=1)
    grid.add_column(ratio=1)
    for index in range(0, len(tables), 2):
        grid.add_row(*tables[index : index + 2])
    return Group(*parts, grid)


def _header(reading: Reading) -> Text:
    clock = time.strftime("%H:%M:%S", time.localtime(reading.at))
    up = sum(w.up for w in reading.workers)
    line = Text("toolhub top", style="bold")
    line.append(f"  {clock}  {clean(reading.source)}  metrics: {up}/{len(reading.workers)} up")
    return line


def _table(title: str, *columns: str) -> Table:
    table = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        expand=True,
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
    )
    for index, name in enumerate(columns):
        if index == 0:
            table.add_column(name, no_wrap=True, overflow="ellipsis", ratio=1)
        else:
            table.add_column(name, justify="right", no_wrap=True)
    return table


def _more(table: Table, total: int) -> Table:
    if total > MAX_ROWS:
        table.caption = f"… and {total - MAX_ROWS} more"
    return table


def _tools(reading: Reading) -> RenderableType:
    if not reading.workers:
        return Text("tools: no worker metrics (--metrics URL; `toolhub up` prints them)")
    table = _table("Tools (attempts)", "tool", "calls/s", "calls", "errors", "p50", "p99")
    for row in reading.tools[:MAX_ROWS]:
        table.add_row(
            Text(clean(row.tool)),
            "-" if row.per_second is None else f"{row.per_second:.1f}",
            f"{row.calls:.0f}",
            f"{row.errors:.0f}",
            _duration(row.p50_s),
            _duration(row.p99_s),
        )
    if not reading.tools:
        table.add_row(Text("(no calls yet)"), "", "", "", "", "")
    return _more(table, len(reading.tools))


def _queues(fleet: FleetView) -> Table:
    table = _table("Queues", "queue", "depth", "sunk", "waiting", "oldest wait")
    for queue in fleet.queues:
        table.add_row(
            Text(clean(queue.name)),
            str(queue.depth),
            str(queue.sunk + queue.backlog),  # past their tenant's share: messages and ids
            str(queue.queued_calls),
            _duration(queue.oldest_wait_s) if queue.queued_calls else "-",
        )
    return table


def _in_flight(fleet: FleetView) -> Table:
    by_worker = fleet.by_worker()
    table = _table("Running calls by worker", "worker", "calls", "longest", "tool")
    for worker, calls in list(by_worker.items())[:MAX_ROWS]:
        longest = calls[0]
        table.add_row(
            Text(clean(worker or "(unknown)")),
            str(len(calls)),
            _duration(longest.running_s),
            Text(clean(longest.tool)),
        )
    if not by_worker:
        table.add_row(Text("(none running)"), "", "", "")
    return _more(table, len(by_worker))


def _workers(workers: list[WorkerSample]) -> RenderableType:
    if not workers:
        return Text("")
    table = _table("Workers (metrics)", "worker", "endpoint", "state", "in flight", "memory")
    for sample in workers[:MAX_ROWS]:
        table.add_row(
            Text(clean(sample.name or f"({sample.error or 'unnamed'})")),
            Text(clean(urlsplit(sample.url).netloc or sample.url)),
            "up" if sample.up else Text("down", style="red"),
            f"{sample.in_flight:.0f}" if sample.up else "-",
            f"{sample.rss_bytes / 2**20:.0f} MiB" if sample.up else "-",
        )
    return _more(table, len(workers))


def _tasks(reading: Reading) -> RenderableType:
    if reading.tasks_error is not None:
        return Text(f"background tasks: {clean(reading.tasks_error)}", style="red")
    running = [t for t in reading.tasks if t.status == "running"]
    title = f"Background tasks: {len(running)} running, {len(reading.tasks) - len(running)} ended"
    table = _table(title, "command", "task", "session", "for")
    for task in running[:MAX_ROWS]:
        table.add_row(
            Text(clean(task.command.splitlines()[0] if task.command else "")),
            Text(clean(task.task_id[:12])),
            Text(clean(task.owner_session[:12])),
            _duration(reading.at - task.started_at.timestamp()),
        )
    if not running:
        table.add_row(Text("(none running)"), "", "", "")
    return _more(table, len(running))


def _tenants(rows: list[UsageRow]) -> Table:
    table = _table("Tenants (this hour)", "tenant", "calls", "errors", "cpu s", "wall s")
    everything = [row for row in rows if row.tool == ALL_TOOLS]
    for row in everything[:MAX_ROWS]:
        table.add_row(
            Text(clean(row.tenant)),
            str(row.calls),
            str(row.errors),
            f"{row.cpu_seconds:.1f}",
            f"{row.wall_seconds:.1f}",
        )
    return _more(table, len(everything))


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 120:
        return f"{seconds:.1f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"
