"""The gateway's sessions: created on ``POST /v1/sessions``, looked up by id, closed on delete
or shutdown.

A session is built off the event loop (building may start MCP servers), and its workspace must
stay inside the gateway's workspace root: a client names a sub-directory, never a path of its
own choosing on the server.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from toolhub.session import Session
from toolhub.toolset import ConfigSource

from .settings import GatewaySettings

SessionFactory = Callable[[ConfigSource, Path, str], Session]
"""``(config, workspace, session_id) -> Session``; the default picks embedded or distributed."""


class Recover(Protocol):
    """The shared store's view of sessions, for a distributed gateway: ``__call__`` rebuilds
    a session this process does not hold (another replica created it), or None; ``exists``
    says whether a session is still stored (another replica may have ended it)."""

    def __call__(self, session_id: str) -> Session | None: ...

    def exists(self, session_id: str) -> bool: ...


#: How long a held session counts as still stored before the store is asked again: a session
#: another replica ended is dropped here within this long.
RECHECK_S = 1.0


class WorkspaceError(ValueError):
    """A requested workspace outside the gateway's root."""


class TooManySessions(RuntimeError):
    pass


def default_factory(settings: GatewaySettings) -> SessionFactory:
    def make(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        if settings.redis_url:
            return Session.connect(settings.redis_url, config, workspace, session_id=session_id)
        return Session.embedded(config, workspace, session_id=session_id)

    return make


def resolve_workspace(root: Path, requested: str | None) -> Path:
    """``requested`` (relative to ``root``, or absolute inside it) as a directory in the root."""
    if not requested:
        return root
    shown = repr(requested[:120]) + ("…" if len(requested) > 120 else "")
    if "\x00" in requested:
        raise WorkspaceError(f"workspace {shown} contains a NUL byte")
    try:
        path = (root / requested).resolve()
        if path != root and root not in path.parents:
            raise WorkspaceError(f"workspace {shown} is outside the gateway's workspace root")
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WorkspaceError(f"workspace {shown} cannot be used: {exc.strerror}") from None
    return path


def new_session_id() -> str:
    return "s_" + os.urandom(8).hex()


class Sessions:
    def __init__(
        self,
        settings: GatewaySettings,
        factory: SessionFactory | None = None,
        recover: Callable[[Path, SessionFactory], Recover] | None = None,
    ) -> None:
        self.settings = settings
        self.factory = factory or default_factory(settings)
        self._recover = recover(settings.workspace, self.factory) if recover else None
        self._sessions: dict[str, Session] = {}
        self._creating: dict[str, asyncio.Future[Session]] = {}
        self._checked: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def held(self, session_id: str) -> Session | None:
        """The session when this gateway holds it and may use it without asking the shared
        store (held, and a distributed one checked within ``RECHECK_S``); otherwise None, and
        ``lookup`` says."""
        session = self._sessions.get(session_id)
        if session is None or self._recover is None:
            return session
        return session if self._checked_lately(session_id) else None

    def _checked_lately(self, session_id: str) -> bool:
        return time.monotonic() - self._checked.get(session_id, 0.0) < RECHECK_S

    async def lookup(self, session_id: str) -> Session | None:
        """The session, rebuilt from the shared store when another replica created it."""
        session = self._sessions.get(session_id)
        if self._recover is None:
            return session
        if session is not None:
            return session if await self._still_stored(session_id) else None
        pending = self._creating.get(session_id)
        if pending is not None:
            return await asyncio.shield(pending)
        recovered = await asyncio.to_thread(self._recover, session_id)
        if recovered is None:
            return None
        existing = self._sessions.setdefault(session_id, recovered)
        if existing is not recovered:
            await asyncio.to_thread(recovered.close)
        return existing

    async def _still_stored(self, session_id: str) -> bool:
        """Whether a held distributed session is still stored, asked at most every
        ``RECHECK_S``; one that is not (ended by another replica) is closed here."""
        if self._checked_lately(session_id):
            return True
        assert self._recover is not None
        now = time.monotonic()
        if await asyncio.to_thread(self._recover.exists, session_id):
            self._checked[session_id] = now
            return True
        session = self._sessions.pop(session_id, None)
        self._checked.pop(session_id, None)
        if session is not None:
            await asyncio.to_thread(session.close)
        return False

    def all(self) -> list[Session]:
        return list(self._sessions.values())

    async def create(
        self, config: Any, workspace: str | None, session_id: str | None = None
    ) -> tuple[Session, bool]:
        """The session (built now, or the existing one of that id) and whether it is new."""
        sid = session_id or new_session_id()
        existing = await self.lookup(sid) if session_id else None
        if existing is not None:
            return existing, False
        pending = self._creating.get(sid)
        if pending is not None:
            return await asyncio.shield(pending), False
        if len(self._sessions) + len(self._creating) >= self.settings.max_sessions:
            raise TooManySessions(f"the gateway holds {self.settings.max_sessions} sessions")
        path = resolve_workspace(self.settings.workspace, workspace)
        source = config if config is not None else self.settings.config
        future: asyncio.Future[Session] = asyncio.get_running_loop().create_future()
        self._creating[sid] = future
        try:
            session = await asyncio.to_thread(self.factory, source, path, sid)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody else needs to
            raise
        finally:
            self._creating.pop(sid, None)
        self._sessions[sid] = session
        self._checked[sid] = time.monotonic()
        future.set_result(session)
        return session, True

    async def close(self, session_id: str) -> bool:
        """End the session (``DELETE``): here and, distributed, for every replica, which would
        otherwise rebuild it from the shared store on its next request."""
        if await self.lookup(session_id) is None:
            return False
        session = self._sessions.pop(session_id, None)
        self._checked.pop(session_id, None)
        if session is None:
            return False
        await asyncio.to_thread(session.end)
        return True

    async def close_all(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await asyncio.to_thread(session.close)
