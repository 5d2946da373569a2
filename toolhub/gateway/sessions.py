"""The gateway's sessions: created on ``POST /v1/sessions``, looked up by id, closed on delete
or shutdown.

Every session belongs to a tenant. The id a client names (in the URL or the create body) is
the client's own; the gateway keeps the session under ``scoped_session_id(tenant, client id)``
(``stored_id``), so a tenant that guesses, reads or picks another tenant's id reaches (or
creates) only a session of its own, never the other's: no lookup, and no session fixation.

A session is built off the event loop (building may start MCP servers), and its workspace must
stay inside its tenant's root (``tenant_root``: the gateway's workspace root on a one-tenant
gateway, ``<root>/tenants/<tenant>`` once named API keys exist): a client names a
sub-directory, never a path of its own choosing on the server, and no workspace at all means
the tenant's root, never the gateway's.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from toolhub.session import Session
from toolhub.tenancy import OperatorPolicy, admit
from toolhub.tenancy.principal import (
    Principal,
    scoped_session_id,
    tenant_of_session,
    tenant_root,
)
from toolhub.toolset import ConfigSource

from .settings import GatewaySettings

SessionFactory = Callable[[ConfigSource, Path, str], Session]
"""``(config, workspace, session_id) -> Session``; the default picks embedded or distributed."""


class Recover(Protocol):
    """The shared store's view of sessions, for a distributed gateway: ``__call__`` rebuilds
    a session this process does not hold (another replica created it) from its stored id, its
    workspace checked to lie inside ``root`` (its tenant's), or None; ``exists`` says whether
    a session is still stored (another replica may have ended it)."""

    def __call__(self, session_id: str, root: Path) -> Session | None: ...

    def exists(self, session_id: str) -> bool: ...


#: How long a held session counts as still stored before the store is asked again: a session
#: another replica ended is dropped here within this long.
RECHECK_S = 1.0


class WorkspaceError(ValueError):
    """A requested workspace outside the tenant's root."""


class TooManySessions(RuntimeError):
    pass


def default_factory(settings: GatewaySettings, policy: OperatorPolicy) -> SessionFactory:
    """Distributed sessions hold their tenant's calls to the policy's quotas."""

    def make(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        if settings.redis_url:
            quotas = policy.quotas.for_tenant(tenant_of_session(session_id))
            return Session.connect(
                settings.redis_url, config, workspace, session_id=session_id, quotas=quotas
            )
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
            raise WorkspaceError(f"workspace {shown} is outside the tenant's workspace root")
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WorkspaceError(f"workspace {shown} cannot be used: {exc.strerror}") from None
    return path


def new_session_id() -> str:
    return "s_" + os.urandom(8).hex()


def stored_id(principal: Principal, client_id: str) -> str | None:
    """The id the gateway keeps ``principal``'s session ``client_id`` under; None for an id no
    client can name (one with the tenant separator)."""
    try:
        return scoped_session_id(principal.tenant, client_id)
    except ValueError:
        return None


class Sessions:
    def __init__(
        self,
        settings: GatewaySettings,
        factory: SessionFactory | None = None,
        recover: Callable[[SessionFactory], Recover] | None = None,
        multi_tenant: Callable[[], bool] | None = None,
        policy: OperatorPolicy | None = None,
    ) -> None:
        self.settings = settings
        #: What any tenant's config may ask for (``TOOLHUB_POLICY``; none: the strict
        #: defaults). A malformed file raises here, so a gateway never serves a policy it
        #: did not mean.
        self.policy = policy if policy is not None else OperatorPolicy.load()
        self.factory = factory or default_factory(settings, self.policy)
        self._recover = recover(self.factory) if recover else None
        self._multi_tenant = multi_tenant or (lambda: False)
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
        try:
            root = self.root_of(tenant_of_session(session_id))
        except WorkspaceError:
            return None
        recovered = await asyncio.to_thread(self._recover, session_id, root)
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

    def root_of(self, tenant: str) -> Path:
        """Where ``tenant``'s workspaces live, made on first use. A tenant root that resolves
        anywhere but ``<root>/tenants/<tenant>`` (a link planted while the gateway was
        one-tenant) is refused."""
        workspace = self.settings.workspace
        root = tenant_root(workspace, tenant, multi_tenant=self._multi_tenant())
        if root == workspace:
            return root
        try:
            root.mkdir(parents=True, exist_ok=True)
            resolved = root.resolve(strict=True)
        except OSError as exc:
            raise WorkspaceError(f"tenant {tenant}'s root cannot be used: {exc.strerror}") from None
        if resolved != workspace.resolve() / "tenants" / tenant or not resolved.is_dir():
            raise WorkspaceError(f"tenant {tenant}'s root is not a directory of its own")
        return resolved

    async def create(
        self,
        principal: Principal,
        config: Any,
        workspace: str | None,
        client_id: str | None = None,
    ) -> tuple[Session, bool]:
        """``principal``'s session (built now, or its existing one of that client id) and
        whether it is new. The stored id is scoped to the tenant, so one tenant's id never
        names (or pre-creates) another's session."""
        sid = scoped_session_id(principal.tenant, client_id or new_session_id())
        existing = await self.lookup(sid) if client_id else None
        if existing is not None:
            return existing, False
        pending = self._creating.get(sid)
        if pending is not None:
            return await asyncio.shield(pending), False
        if len(self._sessions) + len(self._creating) >= self.settings.max_sessions:
            raise TooManySessions(f"the gateway holds {self.settings.max_sessions} sessions")
        root = self.root_of(principal.tenant)
        path = resolve_workspace(root, workspace)
        requested = config if config is not None else self.settings.config
        # Admission, before anything is built: the config as the operator's policy admits it
        # for this tenant (every violation listed, nothing clamped); the admitted config is
        # what is built and stored, so workers re-admit exactly it.
        source = await asyncio.to_thread(
            admit, requested, self.policy, tenant=principal.tenant, tenant_root=root
        )
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
