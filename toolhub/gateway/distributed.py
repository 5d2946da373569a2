"""What a distributed gateway reads from the shared Redis: a session's call's events and record
(so any replica can serve ``/v1/sessions/{sid}/calls/{cid}/events`` with ``Last-Event-ID``;
the record says which session a call belongs to), cancellation of calls
another process started, sessions another replica created, readiness (Redis answers and at
least one worker answers a ping) and queue depths.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

from toolhub.core import closing
from toolhub.distributed.fair import PRIORITY_SEP, PRIORITY_STEPS
from toolhub.distributed.settings import ALL_QUEUES, Settings
from toolhub.distributed.shared import shared_backend
from toolhub.distributed.store import RedisStore
from toolhub.session import Session
from toolhub.toolset import ToolSetConfig

from .calllog import Item
from .sessions import SessionFactory, WorkspaceError, resolve_workspace

logger = logging.getLogger("toolhub.gateway.distributed")

#: kombu's default priority steps on Redis, which a producer with its defaults would fill.
KOMBU_PRIORITY_STEPS = (0, 3, 6, 9)
#: kombu's Redis transport keeps one list per queue and priority step (``q``, ``q\x06\x163`` …):
#: toolhub's own steps (level 0 and the over and sunk levels of fair dispatch, ``fair.py``) and
#: kombu's default ones are all counted.
PRIORITY_SUFFIXES = tuple(
    "" if step == 0 else PRIORITY_SEP.decode() + str(step)
    for step in sorted({*PRIORITY_STEPS, *KOMBU_PRIORITY_STEPS})
)
WORKERS_OK_TTL_S = 10.0
PING_TIMEOUT_S = 1.0


class StoreCalls:
    """``RemoteCalls`` over the Redis store."""

    def __init__(self, store: RedisStore) -> None:
        self.store = store

    async def follow(self, call_id: str, session_id: str) -> AsyncIterator[Item] | None:
        if await self.record(call_id, session_id) is None:
            return None
        return self._items(call_id)

    async def _items(self, call_id: str) -> AsyncIterator[Item]:
        async with closing(self.store.follow(call_id, must_exist=False)) as events:
            async for event in events:
                yield event.item

    async def record(self, call_id: str, session_id: str) -> dict[str, Any] | None:
        found = await asyncio.to_thread(self.store.get_record, call_id)
        return found if found is not None and found.get("session_id") == session_id else None

    async def cancel(self, call_id: str, session_id: str) -> bool | None:
        if await self.record(call_id, session_id) is None:
            return None
        outcome = await asyncio.to_thread(self.store.records.cancel, call_id)
        if outcome == "unknown":
            return None
        return outcome in {"cancelled", "signalled"}


class Readiness:
    """Redis answers a PING and some worker answers a Celery ping (cached while positive, so
    frequent probes cost one Redis round trip)."""

    def __init__(self, store: RedisStore, app: Any) -> None:
        self.store = store
        self.app = app
        self._workers_ok_until = 0.0

    async def __call__(self) -> dict[str, str]:
        try:
            await asyncio.to_thread(self.store.client.ping)
        except RedisError as exc:
            return {"redis": f"unreachable: {exc}", "workers": "unknown"}
        if time.monotonic() < self._workers_ok_until:
            return {"redis": "ok", "workers": "ok"}
        try:
            replies = await asyncio.to_thread(
                self.app.control.ping, timeout=PING_TIMEOUT_S, limit=1
            )
        except Exception as exc:
            return {"redis": "ok", "workers": f"ping failed: {exc}"}
        if not replies:
            return {"redis": "ok", "workers": f"no worker answered within {PING_TIMEOUT_S:g}s"}
        self._workers_ok_until = time.monotonic() + WORKERS_OK_TTL_S
        return {"redis": "ok", "workers": "ok"}


def queue_depths(store: RedisStore) -> dict[str, int]:
    """Calls waiting in each queue: its messages (every priority level) and the call ids in
    its backlog (``toolhub/distributed/backlog.py``)."""
    pipe = store.client.pipeline()
    for queue in ALL_QUEUES:
        for suffix in PRIORITY_SUFFIXES:
            pipe.llen(queue + suffix)
        pipe.llen(store.keys.backlog(queue))
    counts = pipe.execute()
    step = len(PRIORITY_SUFFIXES) + 1
    return {q: sum(counts[i * step : (i + 1) * step]) for i, q in enumerate(ALL_QUEUES)}


class SessionRecovery:
    """``Recover`` over the Redis store: rebuild a session another replica created, from its
    stored config and workspace; say whether one is still stored. The id asked for is the
    stored one, already scoped to the asking tenant (``Sessions.lookup``), and the stored
    workspace must lie inside that tenant's root: a session is only ever rebuilt for its own
    tenant, in its own tenant's tree."""

    def __init__(self, store: RedisStore, factory: SessionFactory) -> None:
        self.store, self.factory = store, factory

    def __call__(self, session_id: str, root: Path) -> Session | None:
        stored = self.store.get_session(session_id)
        if stored is None:
            return None
        try:
            workspace = resolve_workspace(root, stored.get("workspace"))
        except WorkspaceError as refused:
            logger.warning("session %s not recovered: %s", session_id, refused)
            return None
        config = ToolSetConfig.model_validate_json(stored["config"])
        return self.factory(config, workspace, session_id)

    def exists(self, session_id: str) -> bool:
        try:
            return self.store.has_session(session_id)
        except RedisError:
            return True  # unknown: keep serving it; its calls will say what Redis says


def distributed_parts(redis_url: str) -> dict[str, Any]:
    """``create_app`` keyword arguments for a gateway in front of the workers at ``redis_url``."""
    store, app = shared_backend(Settings.from_env(redis_url))
    return {
        "remote": StoreCalls(store),
        "readiness": Readiness(store, app),
        "queue_depths": lambda: queue_depths(store),
        "recover": lambda factory: SessionRecovery(store, factory),
    }
