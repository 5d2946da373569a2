"""What each tenant used, per hour, in Redis: written as a call finishes, read by ``toolhub usage``
and by the CPU quota.

One hash per tenant and hour, ``{prefix}usage:{tenant}:{hour}`` (``hour`` = unix seconds //
3600), kept ``USAGE_TTL_SECONDS`` (8 days). Its fields are the tenant's totals: ``calls``,
``errors`` (calls that failed; a cancelled call is not an error), ``cpu_seconds``,
``wall_seconds``, ``output_bytes`` and ``peak_memory_bytes`` (the largest peak of any one call),
and the same per tool, as ``{tool}|calls``, ``{tool}|cpu_seconds`` … ``errors``,
``cpu_seconds`` and ``peak_memory_bytes`` are written only once not zero (absent reads as 0).
The finishing script writes
them (``lua/finish.lua``, ``record_usage`` in ``lua/prelude.lua``) in the step that writes the
call's terminal: no extra round trip, and a call is counted once, when it ends, however many
attempts it took (only the attempt that ends it is counted).

The names are a contract with the quotas (``cpu_seconds`` of the current and previous hour):
never rename one. Threat: a tenant's figures are written under the tenant of the call's stored
session id, which only the gateway chooses (``tenancy.principal``); a tool name is one the
dispatcher validated against the session's tool set, so the number of fields is bounded by it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

from redis import Redis

from .keys import Keys

__all__ = [
    "ALL_TOOLS",
    "USAGE_TTL_SECONDS",
    "CallUsage",
    "UsageRow",
    "hour_of",
    "read_usage",
    "usage_key",
]

#: How long an hour's totals are kept: a week and a day.
USAGE_TTL_SECONDS = 8 * 24 * 3600
#: Between a tool's name and the figure in a per-tool field.
TOOL_SEPARATOR = "|"
#: Figures that add up; ``peak_memory_bytes`` is a maximum.
SUMMED = ("calls", "errors", "cpu_seconds", "wall_seconds", "output_bytes")
#: The name ``read_usage`` gives a tenant's totals over all its tools.
ALL_TOOLS = "*"


def hour_of(unix_seconds: float) -> int:
    return int(unix_seconds // 3600)


def usage_key(keys: Keys, tenant: str, hour: int) -> str:
    return f"{_head(keys)}{tenant}:{hour}"


def _head(keys: Keys) -> str:
    return f"{keys.prefix}usage:"


@dataclass(frozen=True, slots=True)
class CallUsage:
    """One finished call's figures and whom they are charged to, as the finishing script takes
    them."""

    tenant: str
    tool: str
    cpu_seconds: float
    wall_seconds: float
    peak_memory_bytes: int
    output_bytes: int

    def script_args(self) -> list[Any]:
        """``ttl, tool, cpu, wall, peak, output``: the arguments of ``record_usage``."""
        return [
            USAGE_TTL_SECONDS,
            self.tool,
            f"{max(self.cpu_seconds, 0.0):.6f}",
            f"{max(self.wall_seconds, 0.0):.6f}",
            max(self.peak_memory_bytes, 0),
            max(self.output_bytes, 0),
        ]


@dataclass(slots=True)
class UsageRow:
    """A tenant's use of one tool (``ALL_TOOLS``: of every tool) over a window of hours."""

    tenant: str
    tool: str
    calls: int = 0
    errors: int = 0
    cpu_seconds: float = 0.0
    wall_seconds: float = 0.0
    output_bytes: int = 0
    peak_memory_bytes: int = 0

    def add(self, figure: str, raw: bytes) -> None:
        if figure == "peak_memory_bytes":
            self.peak_memory_bytes = max(self.peak_memory_bytes, int(raw))
        elif figure in ("cpu_seconds", "wall_seconds"):
            setattr(self, figure, getattr(self, figure) + float(raw))
        elif figure in SUMMED:
            setattr(self, figure, getattr(self, figure) + int(raw))

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


def read_usage(
    client: Redis,
    keys: Keys,
    *,
    hours: int,
    tenant: str | None = None,
    now: float | None = None,
) -> list[UsageRow]:
    """Every tenant's (or ``tenant``'s) use over the last ``hours`` hours, the current one
    included: one ``ALL_TOOLS`` row per tenant, then one per tool, sorted by tenant and tool."""
    current = hour_of(time.time() if now is None else now)
    window = range(current - max(hours, 1) + 1, current + 1)
    if tenant is not None:
        found = [(tenant, hour) for hour in window]
    else:
        found = list(_scan(client, keys, set(window)))
    pipe = client.pipeline(transaction=False)
    for name, hour in found:
        pipe.hgetall(usage_key(keys, name, hour))
    rows: dict[tuple[str, str], UsageRow] = {}
    for (name, _), raw in zip(found, pipe.execute(), strict=True):
        for field_name, value in raw.items():
            tool, _, figure = field_name.decode().rpartition(TOOL_SEPARATOR)
            tool = tool or ALL_TOOLS
            row = rows.setdefault((name, tool), UsageRow(name, tool))
            row.add(figure, value)
    return [rows[key] for key in sorted(rows, key=lambda k: (k[0], k[1] != ALL_TOOLS, k[1]))]


def _scan(client: Redis, keys: Keys, window: set[int]) -> Iterable[tuple[str, int]]:
    """(tenant, hour) of every usage hash in ``window``. A tenant name has no ``:``."""
    head = _head(keys)
    for raw in client.scan_iter(match=f"{head}*", count=1000):
        tenant, _, hour = raw.decode()[len(head) :].rpartition(":")
        if tenant and hour.isdigit() and int(hour) in window:
            yield tenant, int(hour)
