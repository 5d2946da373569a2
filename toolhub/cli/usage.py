"""``toolhub usage [--since 6h | --hours N] [--tenant NAME] [--json]``: what each tenant used.

Reads the per-tenant, per-hour totals the finishing script keeps in Redis
(``toolhub/distributed/usage.py``): calls, failed calls, CPU seconds of the calls' commands,
wall time, output bytes and the largest peak memory of one call, per tenant and per tool. The
totals are kept per hour, so a window is whole hours: the current one and as many before it as
the window reaches into (``--since 90m`` reads two). They are kept for 8 days.
"""

from __future__ import annotations

import math
import re
from typing import Annotated

import typer
from rich.table import Table

from .embedded import RedisOpt
from .output import fail, print_json, stdout
from .terminal_safe import clean

#: A duration: a number and a unit (s, m, h, d).
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
#: The longest window: what Redis keeps.
MAX_HOURS = 8 * 24


def register(app: typer.Typer) -> None:
    app.command("usage")(usage)


def window_hours(since: str | None, hours: int | None) -> int:
    """How many hours (the current one included) ``--since`` or ``--hours`` reaches into."""
    if since is not None and hours is not None:
        fail("give --since or --hours, not both")
    if hours is not None:
        if hours < 1:
            fail("--hours must be at least 1")
        return min(hours, MAX_HOURS)
    match = _DURATION.match(since or "1h")
    if match is None:
        fail(f"--since {since!r}: give a number and a unit, e.g. 30m, 6h, 2d")
    seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
    return min(max(1, math.ceil(seconds / 3600)), MAX_HOURS)


def usage(
    since: Annotated[
        str | None, typer.Option(help="Window back from now: 30m, 6h, 2d (default 1h).")
    ] = None,
    hours: Annotated[
        int | None, typer.Option(help="Window in hours, the current one included.")
    ] = None,
    tenant: Annotated[str | None, typer.Option(help="Only this tenant.")] = None,
    redis: RedisOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """What each tenant used, per tool, over a window of hours (from Redis)."""
    from redis.exceptions import RedisError

    from toolhub.distributed.settings import Settings
    from toolhub.distributed.store import RedisStore
    from toolhub.distributed.usage import ALL_TOOLS, read_usage
    from toolhub.errors import redis_reason

    if not redis:
        fail("usage is kept in Redis: give --redis URL (or set TOOLHUB_REDIS_URL)")
    span = window_hours(since, hours)
    store = RedisStore.from_settings(Settings.from_env(redis))
    try:
        rows = read_usage(store.client, store.records.keys, hours=span, tenant=tenant)
    except RedisError as exc:
        fail(f"cannot reach Redis: {redis_reason(exc)}")
    finally:
        store.close()
    if as_json:
        print_json({"hours": span, "rows": [row.as_dict() for row in rows]})
        return
    table = Table(title=f"Usage over the last {span} hour(s), per tenant and tool")
    # Names are never cut, however narrow the terminal; the figures fold.
    for column, values in (
        ("tenant", [row.tenant for row in rows]),
        ("tool", [row.tool for row in rows]),
    ):
        table.add_column(column, no_wrap=True, min_width=max(map(len, [column, *values])))
    for column in ("calls", "errors", "cpu s", "wall s", "output bytes", "peak memory"):
        table.add_column(column, justify="right", overflow="fold")
    for row in rows:
        everything = row.tool == ALL_TOOLS
        table.add_row(
            clean(row.tenant) if everything else "",
            "(all tools)" if everything else clean(row.tool),
            str(row.calls),
            str(row.errors),
            f"{row.cpu_seconds:.3f}",
            f"{row.wall_seconds:.3f}",
            str(row.output_bytes),
            _bytes(row.peak_memory_bytes),
            style="bold" if everything else None,
        )
    stdout.print(table)


def _bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"
