"""Calls started through the gateway: each runs as its own task that feeds the session's stream
into the call's event log (``CallLog.feed``), so the call neither depends on nor dies with the
HTTP request that started it. A client that disconnects can come back to
``/v1/sessions/{sid}/calls/{cid}/events``; the call is cancelled only when a client asks
(``DELETE``, or ``cancel_on_disconnect``).

A call belongs to the session that started it, and every read, follow, cancel and answer names
that session: a call id alone reaches nothing, so one session that learns (or guesses) another's
call id can neither read its record, follow its events, cancel it nor take the id over. A named
tenant's call is stored under its session (``call_ids.py``), so another tenant using the same
id meets nothing, not even a "taken". ``start`` takes the client's call id; every other method
takes the stored one (``stored_call_id``).

An embedded gateway runs its calls itself, so it also counts what each tenant used on its
``/metrics`` (``count_usage``; a distributed fleet's workers count the calls they run).

When the gateway is distributed, calls it did not start itself (another replica, the CLI) are
read from the shared store through ``RemoteCalls``, and followed through a mirror of their
events (``mirrors.py``): a log like this gateway's own, fed the same way from the store.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from toolhub.core import CallResult, Progress, ToolError, new_call_id
from toolhub.distributed.usage import CallUsage
from toolhub.errors import ErrorCode
from toolhub.logs import call_context
from toolhub.session import Session
from toolhub.tenancy import tenant_of_session
from toolhub.tracing import TraceContext

from .call_ids import stored_call_id
from .calllog import CallLog, CallLogs, Item
from .metrics import UNKNOWN_TOOL, Metrics
from .mirrors import Mirrors, RemoteCalls
from .window import DEFAULT_CALL_WINDOW_BYTES

logger = logging.getLogger("toolhub.gateway.calls")


class CallConflict(RuntimeError):
    """A call with this id is still running."""


def outcome_of(result: CallResult) -> str:
    return "ok" if result.error is None else result.error.kind.value


class Calls:
    def __init__(
        self,
        metrics: Metrics,
        logs: CallLogs | None = None,
        remote: RemoteCalls | None = None,
        *,
        window: int = DEFAULT_CALL_WINDOW_BYTES,
        count_usage: bool = False,
    ) -> None:
        self.metrics = metrics
        self.count_usage = count_usage
        #: Each call's log holds at most ``window`` bytes of it (``window.py``).
        self.logs = logs or CallLogs(window=window)
        self.remote = remote
        self.mirrors = Mirrors(remote, window=window) if remote is not None else None
        self._owners: dict[str, Session] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def start(
        self,
        session: Session,
        name: str,
        arguments: Any,
        call_id: str | None = None,
        trace_context: TraceContext | None = None,
    ) -> CallLog:
        """Start ``session``'s call ``call_id`` (the client's id; default a new one). The call
        runs under its stored id (``stored_call_id``): it can conflict only with a call of this
        session or, for the ``default`` tenant, of another of its sessions. ``trace_context``:
        the request's ``traceparent``/``tracestate`` headers (its span's parent)."""
        client_id = call_id or new_call_id()
        call_id = stored_call_id(session.session_id, client_id)
        previous = self.logs.get(call_id)
        if previous is not None and previous.session_id != session.session_id:
            raise CallConflict(f"call id {client_id} is taken: choose another")
        if self.logs.running(call_id):
            raise CallConflict(f"call {client_id} is still running")
        log = self.logs.open(call_id, session.session_id)
        self._owners[call_id] = session
        items = self._run(session, name, arguments, call_id, trace_context)
        # The task copies the context it is created in: its log lines name the call.
        with call_context(call_id, session.session_id, name):
            task = asyncio.create_task(log.feed(items), name=call_id)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return log

    async def _run(
        self,
        session: Session,
        name: str,
        arguments: Any,
        call_id: str,
        trace_context: TraceContext | None = None,
    ) -> AsyncIterator[Item]:
        """The session's stream of the call, ending with exactly one result whatever happens
        to it (a crash, the gateway's shutdown, a stream without a result), counted in the
        metrics."""
        tool = name if name in session.toolset.entries else UNKNOWN_TOOL
        started = time.perf_counter()
        self.metrics.in_flight.inc()
        result: CallResult | None = None
        try:
            # A connected call outlives this gateway's shutdown on its worker (another replica
            # follows it by id); a client's cancel goes through ``cancel``.
            items = session.stream(
                name, arguments, call_id=call_id, cancel_on_exit=False, trace_context=trace_context
            )
            async for item in items:
                if isinstance(item, Progress):
                    yield item
                else:
                    result = item
        except asyncio.CancelledError:
            result = CallResult.failure(
                name, ToolError.cancelled("The gateway shut down."), call_id=call_id
            )
        except Exception as exc:
            logger.exception("call %s (%s) crashed", call_id, name)
            error = ToolError.execution(f"internal error: {type(exc).__name__}")
            result = CallResult.failure(name, error, call_id=call_id)
        finally:
            self.metrics.in_flight.dec()
            self._owners.pop(call_id, None)
        if result is None:
            error = ToolError.custom(ErrorCode.STREAM_NO_TERMINAL, "no result")
            result = CallResult.failure(name, error, call_id=call_id)
        self.metrics.observe_call(tool, outcome_of(result), time.perf_counter() - started)
        if self.count_usage:
            self._count_usage(session, call_id, result)
        yield result

    def running_in(self, session_id: str) -> bool:
        """Whether a call of ``session_id`` runs here (its session must not be evicted)."""
        return any(s.session_id == session_id for s in self._owners.values())

    def _count_usage(self, session: Session, call_id: str, result: CallResult) -> None:
        """The figures of a call this gateway ran itself, from its record."""
        record = session.record_sync(call_id) or {}
        if "wall_seconds" not in record:
            return  # never reached the executor (unknown tool, invalid arguments)
        usage = CallUsage(
            tenant_of_session(session.session_id),
            str(record["tool"]),
            float(record["cpu_seconds"]),
            float(record["wall_seconds"]),
            int(record["peak_memory_bytes"]),
            int(record["output_bytes"]),
        )
        failed = result.error is not None and result.error.kind != "cancelled"
        self.metrics.usage.count(usage, failed=failed)

    def _local(self, call_id: str, session_id: str) -> CallLog | None:
        log = self.logs.get(call_id)
        return log if log is not None and log.session_id == session_id else None

    async def follow(self, call_id: str, session_id: str) -> CallLog | None:
        """The log of the session's call: this gateway's own, or the mirror of a call started
        elsewhere; None when the session has no such call."""
        log = self._local(call_id, session_id)
        if log is not None:
            return log
        if self.mirrors is not None and self.logs.get(call_id) is None:
            return await self.mirrors.open(call_id, session_id)
        return None

    async def record(self, call_id: str, session: Session) -> dict[str, Any] | None:
        if self.remote is not None:
            found = await self.remote.record(call_id, session.session_id)
            if found is not None:
                return found
        log = self.logs.get(call_id)
        if log is not None and log.session_id != session.session_id:
            return None
        found = session.record_sync(call_id)
        return (
            found if found is not None and found.get("session_id") == session.session_id else None
        )

    async def owns(self, call_id: str, session: Session) -> bool:
        """Whether ``call_id`` is a call of ``session`` (started here or on another replica)."""
        if self._local(call_id, session.session_id) is not None:
            return True
        return await self.record(call_id, session) is not None

    async def cancel(self, call_id: str, session_id: str) -> bool | None:
        """True when a cancel was sent, False when the call already finished, None when the
        session has no such call."""
        owner = self._owners.get(call_id)
        if owner is not None:
            return await owner.cancel(call_id) if owner.session_id == session_id else None
        log = self.logs.get(call_id)
        if log is not None:
            return False if log.session_id == session_id else None
        if self.remote is not None:
            return await self.remote.cancel(call_id, session_id)
        return None

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.mirrors is not None:
            await self.mirrors.shutdown()
