"""The session: the one object an agent loop talks to.

It binds a tool set to an executor and offers the seed's session-layer operations: definitions,
calls (async, streaming and sync), cancellation, answers to ``ask_user``, external tools, prompt
rendering and resource access. ``Session.embedded`` runs everything in this process;
``Session.connect`` sends calls to Celery workers behind Redis.
"""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from toolhub.core import (
    CallResult,
    Progress,
    ToolError,
    closing,
    new_call_id,
)
from toolhub.executors import Executor
from toolhub.executors.deadline import bounded, bounded_result
from toolhub.executors.refused import RefusedCalls
from toolhub.hooks import SessionHooks
from toolhub.session_approvals import SessionApprovals
from toolhub.session_close import SessionClose
from toolhub.session_parts import (
    Resources,
    SessionParts,
    connected_parts,
    default_builder,
    embedded_parts,
)
from toolhub.session_sync import SyncTwins
from toolhub.state import DebouncedWriter
from toolhub.toolset import (
    ConfigSource,
    ExternalHandler,
    ExternalSpec,
    Prepared,
    ToolSet,
    ToolSetBuilder,
)
from toolhub.tracing import TraceContext, tracer
from toolhub.tracing.calls import CallSpan, session_attributes, start_call

if TYPE_CHECKING:
    from toolhub.approvals.rules import OperatorPermissions
    from toolhub.sources.attach import AttachedSources
    from toolhub.tenancy import Quotas

T = TypeVar("T")


class Session(SyncTwins, SessionApprovals, SessionClose):
    """A tool set bound to an executor: the async surface here, its sync twins in
    ``SyncTwins``, ending and closing in ``SessionClose``."""

    def __init__(
        self,
        toolset: ToolSet,
        executor: Executor,
        *,
        session_id: str,
        workspace: Path,
        writer: DebouncedWriter | None = None,
        warnings: list[str] | None = None,
        sources: AttachedSources | None = None,
    ) -> None:
        self.toolset = toolset
        self.executor = executor
        self.session_id = session_id
        self.workspace = workspace
        self.resources = Resources(toolset.container)
        self.warnings = warnings or []
        self._writer = writer
        self._loop = None
        self._closed = False
        self._sources = sources
        self._refused = RefusedCalls(session_id)
        self._span_attributes: dict[str, str] | None = None  # made on the first traced call
        #: The hooks around each call (docs/hooks.md); ``before`` runs in ``_prepare``.
        self.hooks = SessionHooks.of(toolset.config.hooks, session_id)

    @classmethod
    def embedded(
        cls,
        config: ConfigSource = None,
        workspace: str | os.PathLike[str] = ".",
        *,
        session_id: str | None = None,
        state_dir: str | os.PathLike[str] | None = None,
        builder: ToolSetBuilder | None = None,
        permissions: OperatorPermissions | None = None,
    ) -> Session:
        """A session that runs every call in this process: no Redis, no workers.

        Runtime state persists to ``<state_dir>/state.json`` (default
        ``$TOOLHUB_HOME/sessions/<session_id>``). ``permissions``: the operator's permission
        rules (``OperatorPolicy.permissions``), over the config's own (docs/approvals.md)."""
        return cls._of(
            embedded_parts(
                config,
                workspace,
                session_id,
                state_dir,
                builder or default_builder(),
                permissions,
            )
        )

    @classmethod
    def connect(
        cls,
        redis_url: str,
        config: ConfigSource = None,
        workspace: str | os.PathLike[str] = ".",
        *,
        session_id: str | None = None,
        builder: ToolSetBuilder | None = None,
        quotas: Quotas | None = None,
        permissions: OperatorPermissions | None = None,
    ) -> Session:
        """A session whose calls run on Celery workers behind Redis at ``redis_url``.

        Validation and remapping still happen here, so a bad call never enters a queue.
        ``quotas``: the operator's quotas of the session's tenant
        (``OperatorPolicy.quotas.for_tenant``), checked before each call is queued (a call
        over one is a ``rate_limited`` error); the gateway and ``toolhub mcp`` pass their
        policy's. None: no quota (a program with the fleet's Redis is the operator's).
        ``permissions``: the operator's permission rules, as for ``embedded``."""
        return cls._of(
            connected_parts(
                redis_url,
                config,
                workspace,
                session_id,
                builder or default_builder(),
                quotas,
                permissions,
            )
        )

    @classmethod
    def _of(cls, parts: SessionParts) -> Session:
        return cls(
            parts.toolset,
            parts.executor,
            session_id=parts.session_id,
            workspace=parts.workspace,
            writer=parts.writer,
            warnings=parts.warnings,
            sources=parts.sources,
        )

    # -- the model-facing surface ---------------------------------------------------------------

    def definitions(
        self, format: str = "openai", *, include_external: bool = True, strict: bool = False
    ) -> list[Any]:
        """The tool definitions in ``format`` (``openai``, ``anthropic``, ``mcp``). ``strict``:
        OpenAI strict form (closed objects, every property required, the optional ones
        nullable; ``strict: true`` on each OpenAI function that has it); ``null`` for an
        optional parameter is then taken as absent."""
        return self.toolset.definitions(format, include_external=include_external, strict=strict)

    async def call(
        self,
        name: str,
        arguments: Any = None,
        *,
        call_id: str | None = None,
        timeout: float | None = None,
        trace_context: TraceContext | None = None,
    ) -> CallResult:
        """Run one call and return its result. ``timeout``: seconds to wait at most; then the
        call is cancelled and the result is a ``timeout`` error (distributed calls always have
        a deadline, derived from their limits when none is given). ``trace_context``: the W3C
        ``traceparent``/``tracestate`` of the call's parent span when tracing is on (default:
        the current OpenTelemetry context; docs/tracing.md)."""
        traced = self._traced(name, trace_context)
        prepared = await self._admit(name, arguments, call_id, traced)
        if isinstance(prepared, CallResult):
            return prepared
        if traced is not None:
            return await traced.result(self._result_of(prepared, timeout))
        return await self._result_of(prepared, timeout)

    async def stream(
        self,
        name: str,
        arguments: Any = None,
        *,
        call_id: str | None = None,
        timeout: float | None = None,
        cancel_on_exit: bool = True,
        trace_context: TraceContext | None = None,
    ) -> AsyncIterator[Progress | CallResult]:
        """Progress items as they happen, then exactly one ``CallResult``.

        Leaving before the result (closing the stream, or cancelling the task that reads it,
        as a framework's tool timeout does) cancels the call: its command dies and its record
        says ``cancelled``. ``cancel_on_exit=False`` leaves a connected session's call running
        on its worker, to be followed by id (the gateway and the MCP server cancel explicitly
        and keep calls going through their own restart); an embedded call runs inside this
        stream and ends with it either way. ``trace_context``: as for ``call``."""
        traced = self._traced(name, trace_context)
        prepared = await self._admit(name, arguments, call_id, traced)
        if isinstance(prepared, CallResult):
            yield prepared
            return
        items = self._items(prepared, timeout, cancel_on_exit)
        if traced is not None:
            items = traced.stream(items)
        async with closing(items):
            async for item in items:
                yield item

    def _traced(self, name: str, trace_context: object) -> CallSpan | None:
        """The call's ``execute_tool`` span when tracing is on, else None."""
        if tracer() is None:
            return None
        return start_call(name, self._trace_attributes(), trace_context)

    def _trace_attributes(self) -> dict[str, str]:
        """The attributes of every call's span of this session (made on its first traced
        call)."""
        found = self._span_attributes
        if found is None:
            from toolhub.tenancy import tenant_of_session

            found = session_attributes(self.session_id, tenant_of_session(self.session_id))
            self._span_attributes = found
        return found

    def _prepare(self, name: str, arguments: Any, call_id: str | None) -> Prepared | CallResult:
        """The prepared call as the ``before`` hooks let it run, or the failed result of
        arguments, a tool name or a hook that refused it."""
        call_id = call_id or new_call_id()
        prepared: Prepared | CallResult
        try:
            prepared = self.toolset.prepare(name, arguments, call_id)
        except ToolError as err:
            prepared = CallResult.failure(name, err, call_id=call_id)
        else:
            prepared = self.hooks.before(self.toolset, prepared)
        if isinstance(prepared, CallResult):
            self._refused.add(name, prepared)
        return prepared

    async def _admit(
        self, name: str, arguments: Any, call_id: str | None, traced: CallSpan | None = None
    ) -> Prepared | CallResult:
        """``_prepare`` (in the call's span when traced), off the event loop when ``before``
        hooks run (a webhook waits on the network)."""

        def prepare() -> Prepared | CallResult:
            return self._prepare(name, arguments, call_id)

        run = prepare if traced is None else functools.partial(traced.prepare, prepare)
        if self.hooks.has_before:
            return await asyncio.to_thread(run)
        return run()

    def _items(
        self, prepared: Prepared, timeout: float | None, cancel_on_exit: bool = True
    ) -> AsyncIterator[Progress | CallResult]:
        """The executor's stream of a prepared call, under its deadline when it has one."""
        items = self.executor.stream(prepared, cancel_on_exit=cancel_on_exit)
        seconds = self._deadline(timeout, prepared.entry.workload)
        if seconds is not None:
            items = self._bounded(items, prepared.name, prepared.ctx.call_id, seconds)
        return items

    async def record(self, call_id: str) -> dict[str, Any] | None:
        """The record of a call by its id (status, attempts, result), or None when unknown;
        distributed, any call of the fleet, made by any dispatcher (``RedisUnavailable`` when
        Redis cannot be reached)."""
        return await asyncio.to_thread(self.record_sync, call_id)

    async def follow(
        self, call_id: str, *, after_seq: int = 0, timeout: float | None = None
    ) -> AsyncIterator[Progress | CallResult]:
        """A call made earlier, by its id: distributed, its events after ``after_seq`` (every
        one, replayed and then live) and its result, from any dispatcher, so a new one can
        collect the calls of one that crashed; embedded, its result once it has one."""
        items = self.executor.follow(call_id, after_seq)
        seconds = self._deadline(timeout, None)
        if seconds is not None:
            items = self._bounded(items, "", call_id, seconds)
        async with closing(items):
            async for item in items:
                yield item

    def _deadline(self, timeout: float | None, workload: str | None) -> float | None:
        return timeout if timeout is not None else self.executor.deadline_seconds(workload)

    def _bounded(
        self, items: AsyncIterator[Progress | CallResult], name: str, call_id: str, seconds: float
    ) -> AsyncIterator[Progress | CallResult]:
        return bounded(
            items,
            name=name,
            call_id=call_id,
            seconds=seconds,
            cancel=self.executor.cancel,
            record=self.executor.record,
        )

    async def cancel(self, call_id: str) -> bool:
        return await self.executor.cancel(call_id)

    def answer(self, call_id: str, answers: Any, *, principal: str = "answer") -> bool:
        """Deliver the user's answer to a waiting ``ask_user`` call; to a call awaiting
        approval, ``approve`` (its one answer) approves it and any other denies it, as
        ``principal`` (the MCP faces ask approvals as questions: ``toolhub.mcp.approvals``)."""
        from toolhub.answers import AnswerBox

        gate = self._gate()
        if gate is not None and gate.answer(call_id, answers, principal):
            return True
        box = self.toolset.container.get(AnswerBox)
        return box.answer(call_id, answers) if box is not None else False

    async def _result_of(self, prepared: Prepared, timeout: float | None = None) -> CallResult:
        """The result of a prepared call, from ``Executor.result``, not drained from
        ``stream``: no async generator between the caller and the call (their frames, an
        ``asend`` per item, the objects each call in flight holds and a busy dispatcher's full
        garbage collections walk)."""
        waiting = self.executor.result(prepared)
        seconds = self._deadline(timeout, prepared.entry.workload)
        if seconds is None:
            return await waiting
        return await bounded_result(
            waiting,
            name=prepared.name,
            call_id=prepared.ctx.call_id,
            seconds=seconds,
            cancel=self.executor.cancel,
            record=self.executor.record,
        )

    # -- dynamic tools, prompts, context managers ----------------------------------------------

    def register_external(
        self,
        name: str,
        description: str,
        input_schema: dict[str, Any],
        handler: ExternalHandler,
        *,
        source: dict[str, Any] | None = None,
    ) -> None:
        spec = ExternalSpec(name, description, input_schema, source or {})
        self.toolset.register_external(spec, handler)

    def unregister_external(self, name: str) -> bool:
        return self.toolset.unregister_external(name)

    def render_prompt(self, text: str) -> str:
        return self.toolset.render_prompt(text)

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()
