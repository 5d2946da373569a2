"""``toolhub tasks list``'s tables: readable at 80 columns, whole ids at any width.

One table per session, the session's id in its title: ids are copied from here, so neither a
task's nor a session's is ever cut, and a session id (as long as a uuid) costs no column of its
own. The start time is a time of day when it is today (UTC), a date and minute otherwise (the
year only when it is not this one); how long it ran reads ``42.0s``, ``5m03s``, ``2h05m``,
``1d02h``. Those columns keep their width, and only the command gives way (cut with an
ellipsis: ``toolhub tasks show`` prints it whole).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from rich import box
from rich.table import Table

from .terminal_safe import clean

#: What a table adds to its columns' widths: an edge each side, two spaces between columns.
_EDGES, _GAP = 2, 2
_COMMAND_MIN = 7


def task_tables(tasks: Sequence[Any], width: int, now: datetime | None = None) -> list[Table]:
    """The tables of ``tasks`` (``TaskSnapshot``\\ s), one per session in order of first start,
    each fitting ``width`` columns (the command column takes what the others leave)."""
    now = now or datetime.now(UTC)
    sessions: dict[str, list[Any]] = {}
    for task in sorted(tasks, key=lambda t: t.started_at):
        sessions.setdefault(task.owner_session, []).append(task)
    return [_table(session, rows, width, now) for session, rows in sessions.items()]


def _table(session: str, tasks: list[Any], width: int, now: datetime) -> Table:
    count = f"{len(tasks)} background task{'s' if len(tasks) != 1 else ''}"
    table = Table(
        title=f"{count} of session {clean(session) or '(none)'}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    rows = [_row(task, now) for task in tasks]
    headers = ("task", "status", "exit", "started (UTC)", "ran")
    used = _EDGES + _GAP * len(headers)
    for index, header in enumerate(headers):
        widest = max(len(header), *(len(row[index]) for row in rows))
        right = header in ("exit", "ran")
        table.add_column(header, no_wrap=True, width=widest, justify="right" if right else "left")
        used += widest
    commands = max(len("command"), *(len(row[-1]) for row in rows))
    command_width = max(_COMMAND_MIN, min(commands, width - used))
    table.add_column("command", no_wrap=True, overflow="ellipsis", width=command_width)
    for row in rows:
        table.add_row(*row)
    return table


def _row(task: Any, now: datetime) -> tuple[str, ...]:
    seconds = task.duration_s
    if seconds is None:
        seconds = max(0.0, (now - task.started_at).total_seconds())
    status = "recovering" if task.status == "lost" else clean(task.status_text)
    if task.attempt > 1:
        status += f" (run {task.attempt}/{task.max_attempts})"
    return (
        clean(task.task_id),
        status,
        "" if task.exit_code is None else str(task.exit_code),
        _started(task.started_at.astimezone(UTC), now.astimezone(UTC)),
        _took(seconds),
        clean(task.command),
    )


def _started(started: datetime, now: datetime) -> str:
    if started.date() == now.date():
        return started.strftime("%H:%M:%S")
    return started.strftime("%m-%d %H:%M" if started.year == now.year else "%Y-%m-%d")


def _took(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, second = divmod(int(seconds), 60)
    hours, minute = divmod(minutes, 60)
    days, hour = divmod(hours, 24)
    if days:
        return f"{days}d{hour:02d}h"
    return f"{hours}h{minute:02d}m" if hours else f"{minutes}m{second:02d}s"
