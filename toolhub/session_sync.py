"""The session's sync twins: ``call_sync``, ``stream_sync``, ``follow_sync``, ``record_sync``,
``cancel_sync`` for agent loops that are not async.

Each runs the async operation on the session's own private event-loop thread (started on first
use, stopped by ``Session.close``) and waits for it, so a sync caller needs no event loop of its
own, and one called from a thread that runs a loop does not try to nest in it. ``SyncTwins`` is
a mixin of ``Session``: the async surface it drives is declared here for the type checker and
defined in ``toolhub/session.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

from toolhub.core import CallResult, Progress
from toolhub.loop_thread import LoopThread
from toolhub.tracing import TraceContext, captured

if TYPE_CHECKING:
    from toolhub.executors import Executor
    from toolhub.executors.refused import RefusedCalls
    from toolhub.toolset import Prepared
    from toolhub.tracing.calls import CallSpan


class SyncTwins:
    """The blocking twins of ``Session``'s async operations, on a private loop thread."""

    _loop: LoopThread | None = None

    if TYPE_CHECKING:
        executor: Executor
        _refused: RefusedCalls

        def _prepare(
            self, name: str, arguments: Any, call_id: str | None
        ) -> Prepared | CallResult: ...

        async def _result_of(
            self, prepared: Prepared, timeout: float | None = None
        ) -> CallResult: ...

        async def call(
            self,
            name: str,
            arguments: Any = None,
            *,
            call_id: str | None = None,
            timeout: float | None = None,
            trace_context: TraceContext | None = None,
        ) -> CallResult: ...

        def stream(
            self,
            name: str,
            arguments: Any = None,
            *,
            call_id: str | None = None,
            timeout: float | None = None,
            cancel_on_exit: bool = True,
            trace_context: TraceContext | None = None,
        ) -> AsyncIterator[Progress | CallResult]: ...

        def _traced(self, name: str, trace_context: object) -> CallSpan | None: ...

        def follow(
            self, call_id: str, *, after_seq: int = 0, timeout: float | None = None
        ) -> AsyncIterator[Progress | CallResult]: ...

        async def cancel(self, call_id: str) -> bool: ...

    def call_sync(
        self,
        name: str,
        arguments: Any = None,
        *,
        call_id: str | None = None,
        timeout: float | None = None,
        trace_context: TraceContext | None = None,
    ) -> CallResult:
        traced = self._traced(name, trace_context)
        if traced is not None:
            return self._call_sync_traced(traced, name, arguments, call_id, timeout)
        if timeout is None:
            prepared = self._prepare(name, arguments, call_id)
            if isinstance(prepared, CallResult):
                return prepared
            result = self.executor.call_sync(prepared)
            if result is not None:
                return result
            drained: CallResult = self._run(self._result_of(prepared))
            return drained
        answered: CallResult = self._run(
            self.call(name, arguments, call_id=call_id, timeout=timeout)
        )
        return answered

    def _call_sync_traced(
        self,
        traced: CallSpan,
        name: str,
        arguments: Any,
        call_id: str | None,
        timeout: float | None,
    ) -> CallResult:
        prepared = traced.prepare(lambda: self._prepare(name, arguments, call_id))
        if isinstance(prepared, CallResult):
            return prepared
        if timeout is None:
            result = traced.run(lambda: self.executor.call_sync(prepared))
            if result is not None:
                return result
        answered: CallResult = self._run(traced.result(self._result_of(prepared, timeout)))
        return answered

    def stream_sync(
        self,
        name: str,
        arguments: Any = None,
        *,
        call_id: str | None = None,
        timeout: float | None = None,
        trace_context: TraceContext | None = None,
    ) -> Iterator[Progress | CallResult]:
        # The stream runs on the loop thread: the caller's current context goes with it.
        parent: Any = trace_context if trace_context is not None else captured()
        items = self.stream(name, arguments, call_id=call_id, timeout=timeout, trace_context=parent)
        return self._iterate(items)

    def record_sync(self, call_id: str) -> dict[str, Any] | None:
        """``record``'s twin; a call refused before it ran has the record this session kept."""
        return self.executor.record(call_id) or self._refused.record(call_id)

    def follow_sync(
        self, call_id: str, *, after_seq: int = 0, timeout: float | None = None
    ) -> Iterator[Progress | CallResult]:
        return self._iterate(self.follow(call_id, after_seq=after_seq, timeout=timeout))

    def _iterate(
        self, agen: AsyncIterator[Progress | CallResult]
    ) -> Iterator[Progress | CallResult]:
        loop = self._loop_thread()
        while True:
            try:
                item = loop.run(anext(agen))
            except StopAsyncIteration:
                return
            yield item

    def cancel_sync(self, call_id: str) -> bool:
        return bool(self._run(self.cancel(call_id)))

    def _run(self, coro: Any) -> Any:
        return self._loop_thread().run(coro)

    def _loop_thread(self) -> LoopThread:
        if self._loop is None:
            self._loop = LoopThread("toolhub-session")
        return self._loop
