"""Approvals of an embedded session: kept in this process, decided under one lock.

The waiting call is the caller's own coroutine: an approval wakes it and it runs the call
itself, so a call nobody waits for any more (its caller cancelled it, or left) is
``cancelled`` and an approval answers that. A fleet's approvals outlive every process
(``toolhub.distributed.approvals``). Bounded: the newest ``MAX_DECIDED`` decided calls are
remembered for their records; a call awaiting approval is never dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from .base import AWAITING, NOT_AWAITING, UNKNOWN_CALL, ApprovalRefused, with_decision

MAX_DECIDED = 1_000


@dataclass(slots=True)
class _Entry:
    record: dict[str, Any]
    loop: asyncio.AbstractEventLoop | None = None
    woken: asyncio.Future[None] | None = None
    arguments: dict[str, Any] | None = field(default=None)


class MemoryApprovals:
    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def ask(self, call_id: str, name: str, tool: str | None, approval: dict[str, Any]) -> bool:
        """Keep the call as awaiting approval; False when the id is one already waiting."""
        record = {
            "call_id": call_id,
            "session_id": self.session_id,
            "name": name,
            "tool": tool,
            "status": AWAITING,
            "created_at": time.time(),
            "approval_expires": approval["expires_at"],
            "approval": approval,
        }
        with self._lock:
            known = self._entries.get(call_id)
            if known is not None and known.record["status"] == AWAITING:
                return False
            self._entries[call_id] = _Entry(record)
            self._entries.move_to_end(call_id)
            self._trim()
        return True

    async def wait(self, call_id: str, until: float) -> tuple[str, dict[str, Any] | None]:
        """The decision (``approved`` with the arguments to run, or ``denied``, ``expired``,
        ``cancelled``) once it is made, ``expired`` at ``until`` (epoch seconds)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            entry = self._entries[call_id]
            entry.loop, entry.woken = loop, loop.create_future()
            woken = entry.woken
        try:
            if entry.record["status"] == AWAITING:
                await asyncio.wait_for(asyncio.shield(woken), max(until - time.time(), 0))
        except TimeoutError:
            self._end_quietly(call_id, "expired", None)
        except asyncio.CancelledError:
            self._end_quietly(call_id, "cancelled", "its caller left")
            raise
        with self._lock:
            status = entry.record["status"]
        return status, entry.arguments

    def approve(self, call_id: str, principal: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self._decide(call_id, "approved", principal, arguments=arguments)

    def end(
        self, call_id: str, decision: str, principal: str, *, reason: str | None = None
    ) -> dict[str, Any]:
        """Deny (``denied``), expire or cancel a waiting call; its record."""
        return self._decide(call_id, decision, principal, reason=reason)

    def _end_quietly(self, call_id: str, decision: str, reason: str | None) -> None:
        """End the call unless an approver decided it first (then its decision stands)."""
        with contextlib.suppress(ApprovalRefused):
            self.end(call_id, decision, "toolhub", reason=reason)

    def _decide(
        self,
        call_id: str,
        decision: str,
        principal: str,
        *,
        arguments: dict[str, Any] | None = None,
        reason: str | None = None,
    ) -> dict[str, Any]:
        with self._lock:
            entry = self._entries.get(call_id)
            if entry is None:
                raise ApprovalRefused(UNKNOWN_CALL, f"no call {call_id!r} awaits approval", 404)
            record = entry.record
            if record["status"] != AWAITING:
                raise _decided(call_id, record)
            edited = arguments if arguments != record["approval"]["arguments"] else None
            record["approval"] = with_decision(
                record["approval"], decision, principal, reason=reason, arguments=edited
            )
            record["status"] = decision
            entry.arguments = arguments
            woken, loop = entry.woken, entry.loop
            out = dict(record)
        if woken is not None and loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(_wake, woken)
        return out

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return [
                dict(e.record) for e in self._entries.values() if e.record["status"] == AWAITING
            ]

    def waiting_count(self) -> int:
        with self._lock:
            return sum(e.record["status"] == AWAITING for e in self._entries.values())

    def record(self, call_id: str) -> dict[str, Any] | None:
        with self._lock:
            entry = self._entries.get(call_id)
            return dict(entry.record) if entry is not None else None

    def _trim(self) -> None:
        decided = [cid for cid, e in self._entries.items() if e.record["status"] != AWAITING]
        for cid in decided[: max(len(decided) - MAX_DECIDED, 0)]:
            del self._entries[cid]


def _decided(call_id: str, record: dict[str, Any]) -> ApprovalRefused:
    decisions = record.get("approval", {}).get("decisions") or [{}]
    return ApprovalRefused(
        NOT_AWAITING,
        f"call {call_id!r} no longer awaits approval: {record['status']}",
        409,
        status=record["status"],
        decided_by=decisions[-1].get("by"),
    )


def _wake(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)
