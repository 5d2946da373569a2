"""When each session a gateway holds was last used, and how many each tenant holds: what the
session table's per-tenant share and idle eviction are decided from (``sessions.py``).

Threat: one tenant creating sessions until the gateway's table is full, so every other
tenant's client is refused. Each tenant gets its own share (``Quotas.sessions``); past it,
``TenantAtCap`` says when an idle one will have been evicted.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable

from toolhub.tenancy.principal import tenant_of_session

__all__ = ["SessionUse", "TenantAtCap"]


class TenantAtCap(RuntimeError):
    """The tenant holds its share of sessions (``Quotas.sessions``), none of them idle long
    enough to be evicted: retry after ``retry_after`` seconds (when the first may be)."""

    def __init__(self, tenant: str, limit: int, retry_after: float) -> None:
        super().__init__(
            f"tenant {tenant} holds its {limit} sessions (quota `sessions`); end one "
            f"(DELETE /v1/sessions/{{id}}) or retry after {math.ceil(retry_after)}s, when an "
            "idle one is evicted"
        )
        self.tenant = tenant
        self.limit = limit
        self.retry_after = retry_after


class SessionUse:
    """Last use (monotonic) of each held session id, and the count per tenant."""

    def __init__(self) -> None:
        self._used: dict[str, float] = {}
        self._per_tenant: Counter[str] = Counter()

    def touch(self, session_id: str) -> None:
        if session_id in self._used:
            self._used[session_id] = time.monotonic()

    def hold(self, session_id: str) -> None:
        if session_id not in self._used:
            self._per_tenant[tenant_of_session(session_id)] += 1
        self._used[session_id] = time.monotonic()

    def release(self, session_id: str) -> None:
        if self._used.pop(session_id, None) is None:
            return
        tenant = tenant_of_session(session_id)
        self._per_tenant[tenant] -= 1
        if self._per_tenant[tenant] <= 0:
            del self._per_tenant[tenant]

    def clear(self) -> None:
        self._used.clear()
        self._per_tenant.clear()

    def count(self, tenant: str) -> int:
        return self._per_tenant.get(tenant, 0)

    def idle(self, idle_seconds: Callable[[str], float], busy: Callable[[str], bool]) -> list[str]:
        """The sessions unused for longer than their tenant's ``idle_seconds`` and not busy."""
        now = time.monotonic()
        return [
            sid
            for sid, used in self._used.items()
            if now - used > idle_seconds(tenant_of_session(sid)) and not busy(sid)
        ]

    def least_recent(self, tenant: str, busy: Callable[[str], bool]) -> str | None:
        """``tenant``'s least recently used session that is not busy."""
        ours = [
            (used, sid)
            for sid, used in self._used.items()
            if tenant_of_session(sid) == tenant and not busy(sid)
        ]
        return min(ours)[1] if ours else None

    def retry_after(self, tenant: str, idle_seconds: float) -> float:
        """Seconds until ``tenant``'s least recently used session may be evicted as idle."""
        now = time.monotonic()
        first = min(
            (used for sid, used in self._used.items() if tenant_of_session(sid) == tenant),
            default=now,
        )
        return max(1.0, first + idle_seconds - now)
