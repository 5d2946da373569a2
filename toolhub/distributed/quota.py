"""A tenant's quotas, checked by the dispatcher in the script that creates a call, before
anything is recorded or queued (``lua/quota.lua``).

The threat: one tenant's sessions flooding the fleet (a burst of calls queued in front of
everyone, more calls or background tasks in flight than its share, commands burning CPU for
hours), across every gateway replica and dispatcher at once. So the counts live in Redis and
are taken in the same script, and round trip, as the call's record (``create_and_enqueue``,
``create``): two replicas share one bucket, and a refused call leaves nothing behind.

Per tenant, under ``{prefix}quota:{tenant}:`` (docs/distributed.md):

* ``rate``: the token bucket of ``calls_per_second`` and ``burst`` (hash ``tokens``, ``at``,
  by Redis's clock), expiring once it would be full again;
* ``calls`` / ``tasks``: sorted sets of the calls (background tasks) in flight, call id →
  the call's deadline. ``finalize`` removes a call in every terminal path (the record names
  its set, ``quota_held``); an entry whose deadline passed (a call nobody finished) is dropped
  by the next check, so a dead fleet's calls free their slots at the latest then;
* CPU-seconds per hour read from the usage hashes ``{prefix}usage:{tenant}:{hour}`` (written by
  the usage meter when a call finishes): this hour's, plus the previous hour's weighted by the
  part of it still inside the sliding hour. Checked for calls that run commands (workloads
  ``command`` and ``background``, and background tasks): other tools still answer.

Over quota, the script answers ``RATE_LIMITED`` with the quota, its limit and ``retry_after``
(``OverQuota``); ``over_quota_error`` is the typed ``rate_limited`` error a caller reads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from toolhub.core import ErrorKind, ToolError
from toolhub.errors import ErrorCode

from .keys import Keys

__all__ = [
    "NO_QUOTA",
    "OverQuota",
    "QuotaLimits",
    "SupportsQuotas",
    "over_quota_error",
    "quota_args",
    "script_reply",
]

#: The quota arguments of a call no quota applies to (``lua/quota.lua`` skips them all).
NO_QUOTA: list[Any] = ["", "", 0, 0, 0, 1, 0, ""]

#: Workloads whose calls run commands: the CPU quota holds them back.
CPU_WORKLOADS = frozenset({"command", "background"})

Counted = Literal["calls", "tasks"]


class SupportsQuotas(Protocol):
    """The dispatcher's fields of ``toolhub.tenancy.Quotas`` (the operator's policy)."""

    @property
    def calls_per_second(self) -> float | None: ...
    @property
    def burst(self) -> int: ...
    @property
    def concurrent_calls(self) -> int | None: ...
    @property
    def concurrent_background_tasks(self) -> int | None: ...
    @property
    def cpu_seconds_per_hour(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class QuotaLimits:
    """One tenant's quotas as the dispatcher enforces them (``None``: unbounded)."""

    tenant: str
    calls_per_second: float | None = None
    burst: int = 1
    concurrent_calls: int | None = None
    concurrent_background_tasks: int | None = None
    cpu_seconds_per_hour: float | None = None

    @classmethod
    def of(cls, tenant: str, quotas: SupportsQuotas) -> QuotaLimits:
        return cls(
            tenant,
            quotas.calls_per_second,
            quotas.burst,
            quotas.concurrent_calls,
            quotas.concurrent_background_tasks,
            quotas.cpu_seconds_per_hour,
        )


def quota_args(
    keys: Keys,
    limits: QuotaLimits | None,
    *,
    counted: Counted,
    workload: str,
    hold_seconds: float,
) -> tuple[list[Any], dict[str, str]]:
    """The 8 quota arguments of ``create``/``create_and_enqueue`` for one call, and the record
    fields to add (``quota_held``: the set ``finalize`` removes the call from). ``counted``:
    which count of calls in flight the call joins (a background task is no call, and takes no
    token: the call that started it took one)."""
    if limits is None:
        return NO_QUOTA, {}
    base = f"{keys.prefix}quota:{limits.tenant}:"
    limit = (
        limits.concurrent_calls if counted == "calls" else limits.concurrent_background_tasks
    ) or 0
    rate = (limits.calls_per_second or 0) if counted == "calls" else 0
    cpu = (limits.cpu_seconds_per_hour or 0) if workload in CPU_WORKLOADS else 0
    args = [
        base,
        counted if limit else "",
        limit,
        hold_seconds,
        rate,
        limits.burst,
        cpu,
        f"{keys.prefix}usage:{limits.tenant}:",
    ]
    return args, ({"quota_held": base + counted} if limit else {})


@dataclass(frozen=True, slots=True)
class OverQuota:
    """A ``RATE_LIMITED`` reply: which quota, its limit, and when to try again (seconds)."""

    quota: str
    limit: float
    retry_after: float


def script_reply(raw: Any) -> int | OverQuota:
    """A creating script's reply: its code, or the refusal it carries."""
    if isinstance(raw, list):
        quota, limit, retry = raw[1:4]
        return OverQuota(_text(quota), float(limit), float(retry))
    return int(raw)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


_WHAT = {
    "calls_per_second": "calls per second",
    "concurrent_calls": "calls in flight at once",
    "concurrent_background_tasks": "background tasks running at once",
    "cpu_seconds_per_hour": "command CPU-seconds per hour",
}


def over_quota_error(tenant: str, over: OverQuota) -> ToolError:
    """The typed ``rate_limited`` error of a refused call, saying what to the model reads."""
    retry = math.ceil(over.retry_after * 1000) / 1000
    limit = int(over.limit) if over.limit == int(over.limit) else over.limit
    what = _WHAT.get(over.quota, over.quota)
    detail = (
        f"Over the quota of tenant {tenant!r}: at most {limit} {what}. "
        f"Nothing ran and nothing was queued; retry after {retry:g} s."
    )
    return ToolError(
        ErrorKind.RATE_LIMITED,
        detail,
        {
            "code": ErrorCode.QUOTA_EXCEEDED.value,
            "quota": over.quota,
            "limit": over.limit,
            "retry_after": retry,
            "tenant": tenant,
        },
    )
