"""The distributed executor: calls run on Celery workers, results come back through Redis.

The dispatcher stays thin. The session has already looked the tool up, remapped and validated
the arguments, so a bad call never enters a queue; the message carries them under their
canonical names, which the worker validates again but never remaps. Here the call record is
written and the message goes to the queue of the tool's workload (``celery_dispatch.py``), and
the caller follows the call's own event stream (pub/sub for live items, the stream for replay):
no Celery result backend, no subscription per call left behind. External tools are the
exception: their handlers live in this process, so they run here, through the embedded executor.
Except the tools of a config MCP server that offers tasks (``mcp_servers.<name>.tasks``): the
workers connect to that server too, and there the call gets a record and a lease, so its remote
task outlives this process and the worker polling it (``toolhub/sources/mcp_task_resume.py``).
And the tools of a stdio server: only workers run it (``toolhub/sources/mcp_fleet_tools.py``),
so its calls go to them like a built-in's.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, cast

from celery import Celery
from redis.exceptions import RedisError

from toolhub.core import CallResult, Progress, ToolError, closing
from toolhub.distributed.following import FollowLost
from toolhub.distributed.quota import QuotaLimits
from toolhub.distributed.settings import Settings
from toolhub.distributed.shared import enqueuer_for
from toolhub.distributed.store import CallNotFound, RedisStore
from toolhub.errors import ErrorCode, RedisUnavailable
from toolhub.hooks import SessionHooks
from toolhub.state.redis import RedisStateSync
from toolhub.tenancy import tenant_of_session
from toolhub.toolset import Entry, ExternalTool, Prepared, ToolSet
from toolhub.tracing.worker import span

from .celery_dispatch import CeleryDispatch, dispatch_failure
from .local import LocalExecutor, unknown_call

logger = logging.getLogger("toolhub.executor.celery")


class CeleryExecutor(CeleryDispatch):
    """Calls of one session on the fleet: dispatched (``CeleryDispatch``), followed through
    Redis, cancelled, and their records read, from any dispatcher."""

    def __init__(
        self,
        toolset: ToolSet,
        store: RedisStore,
        app: Celery,
        *,
        settings: Settings,
        session_id: str,
        config_hash: str,
        workspace: str,
        state: RedisStateSync,
        state_version: int,
        quotas: QuotaLimits | None = None,
    ) -> None:
        self.toolset = toolset
        self.store = store
        self.app = app
        self.settings = settings
        self.session_id = session_id
        #: Whose share of the queues this session's calls take (fair dispatch).
        self.tenant = tenant_of_session(session_id)
        self.config_hash = config_hash
        self.workspace = workspace
        self.state = state
        self._state_version = state_version
        #: The session's hooks: ``after`` of the calls run here (external tools), and what a
        #: worker's ``after`` stage needs, in each message.
        self.hooks = SessionHooks.of(toolset.config.hooks, session_id)
        self._local = LocalExecutor(toolset, self.hooks)
        #: Calls dispatched from here whose stream or result is still awaited: call id ->
        #: whether the call is cancelled when its consumer leaves before the result.
        self._open: dict[str, bool] = {}
        self.enqueuer = enqueuer_for(app)
        #: The session's tenant's quotas, checked in the script that creates each call
        #: (``toolhub.distributed.quota``); None: no quota.
        self.quotas = quotas

    def call_sync(self, prepared: Prepared) -> CallResult | None:
        if self._runs_here(prepared.entry):
            return self._local.call_sync(prepared)
        return None

    def _runs_here(self, entry: Entry) -> bool:
        """An external tool whose handler exists only in this process: not a tool of a config
        MCP server that the workers run (a stdio one) or connect to as well (one with
        ``tasks``)."""
        if not entry.external:
            return False
        handle = entry.handle
        server = handle.spec.source.get("mcp") if isinstance(handle, ExternalTool) else None
        config = self.toolset.config.mcp_servers.get(server) if isinstance(server, str) else None
        return config is None or not (config.tasks or config.command)

    async def result(self, prepared: Prepared) -> CallResult:
        """``stream``'s end without its generators: while in flight, the call holds this
        coroutine, its subscription and a cursor (``RedisStore.terminal``)."""
        if self._runs_here(prepared.entry):
            return await self._local.result(prepared)
        cid = prepared.ctx.call_id
        subscription = self.store.subscribe(cid)
        answered = False
        try:
            with span("toolhub.enqueue", producer=True):
                dispatched = await self._dispatch(prepared, subscription)
            if isinstance(dispatched, CallResult):
                answered = True
                return dispatched
            self._open[cid] = True
            try:
                event = await self.store.terminal(cid, subscription, fresh=dispatched)
            except FollowLost as lost:
                answered = True
                return dispatch_failure(prepared, ErrorCode.REDIS_UNAVAILABLE, str(lost))
            answered = True
            self._refresh_state(event.state_version)
            return cast(CallResult, event.item)  # ``terminal`` returns the CallResult's event
        finally:
            subscription.close()
            self._left(cid, answered)

    async def stream(
        self, prepared: Prepared, *, cancel_on_exit: bool = True
    ) -> AsyncIterator[Progress | CallResult]:
        if self._runs_here(prepared.entry):
            async with closing(self._local.stream(prepared)) as local:
                async for item in local:
                    yield item
            return
        cid = prepared.ctx.call_id
        subscription = self.store.subscribe(cid)
        answered = False
        try:
            with span("toolhub.enqueue", producer=True):
                dispatched = await self._dispatch(prepared, subscription)
            if isinstance(dispatched, CallResult):
                answered = True
                yield dispatched
                return
            self._open[cid] = cancel_on_exit
            events = self.store.follow(
                cid, subscription=subscription, must_exist=False, fresh=dispatched
            )
            try:
                # Closed here, not by the garbage collector: a caller that stops reading at the
                # result (the gateway, a framework adapter) would leave it to a loop that may
                # no longer run.
                async with closing(events):
                    async for event in events:
                        if isinstance(event.item, CallResult):
                            answered = True
                            self._refresh_state(event.state_version)
                        yield event.item
            except FollowLost as lost:
                answered = True
                yield dispatch_failure(prepared, ErrorCode.REDIS_UNAVAILABLE, str(lost))
        finally:
            subscription.close()
            self._left(cid, answered)

    def _left(self, call_id: str, answered: bool) -> None:
        """The consumer of a call this executor dispatched is gone. Before the result (it
        closed the stream, or its task was cancelled: a framework's tool timeout), the call is
        cancelled on its worker, unless its stream was opened with ``cancel_on_exit=False``."""
        if self._open.pop(call_id, False) and not answered:
            self._cancel_now(call_id)

    def _cancel_now(self, call_id: str) -> None:
        try:
            self.store.records.cancel(call_id)
        except RedisError as exc:
            logger.warning("cancel %s: Redis unreachable: %s", call_id, exc)

    def _refresh_state(self, version: int | None) -> None:
        """Reload the session state here when a call changed it, so ``session.resources``
        reads what the workers wrote."""
        if version is None or version == self._state_version:
            return
        try:
            self._state_version = self.state.load_into(self.toolset.container)
        except RedisError as exc:
            logger.warning("could not refresh session state: %s", exc)

    def record(self, call_id: str) -> dict[str, Any] | None:
        """This session's call record, from any dispatcher; None for a call of another
        session, as for an unknown one: a call id alone reaches no other session's call."""
        try:
            found = self.store.get_record(call_id)
        except RedisError as exc:
            raise RedisUnavailable(self.settings.redis_url, exc) from None
        if found is None:
            return self._local.record(call_id)
        return found if self._owns(found) else None

    def _owns(self, record: dict[str, Any] | None) -> bool:
        return record is not None and record.get("session_id") == self.session_id

    async def follow(
        self, call_id: str, after_seq: int = 0
    ) -> AsyncIterator[Progress | CallResult]:
        """Any call of this session by its id, from any dispatcher: replay after
        ``after_seq``, then live, each event once (``RedisStore.follow``). Another session's
        call is unknown here."""
        try:
            if not self._owns(self.store.get_record(call_id)):
                yield unknown_call(call_id)
                return
            async with closing(self.store.follow(call_id, after_seq)) as events:
                async for event in events:
                    yield event.item
        except CallNotFound:
            yield unknown_call(call_id)
        except FollowLost as lost:
            yield CallResult.failure(
                "", ToolError.custom(ErrorCode.REDIS_UNAVAILABLE, str(lost)), call_id=call_id
            )
        except RedisError as exc:
            yield CallResult.failure(
                "",
                ToolError.custom(ErrorCode.REDIS_UNAVAILABLE, f"cannot reach Redis: {exc}"),
                call_id=call_id,
            )

    def deadline_seconds(self, workload: str | None) -> float | None:
        return self.settings.call_deadline_seconds(workload or "background")

    async def cancel(self, call_id: str) -> bool:
        local = await self._local.cancel(call_id)
        if local:
            return True
        try:
            if not self._owns(self.store.get_record(call_id)):
                return False
            outcome = self.store.records.cancel(call_id)
        except RedisError as exc:
            logger.warning("cancel %s: Redis unreachable: %s", call_id, exc)
            return False
        return outcome in {"cancelled", "signalled"}

    def end(self) -> None:
        try:
            self.store.drop_session(self.session_id)
        except RedisError as exc:
            raise RedisUnavailable(self.settings.redis_url, exc) from None

    def close(self) -> None:
        """Cancel what this session still waits for (calls whose consumer opted out with
        ``cancel_on_exit=False`` go on running on their workers), then the local calls."""
        for call_id, cancel in list(self._open.items()):
            if cancel:
                self._cancel_now(call_id)
        self._open.clear()
        self._local.close()
