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

The table is bounded per tenant (``Quotas.sessions`` of the operator's policy) and a session
unused for ``Quotas.session_idle_seconds`` (and running no call) is evicted: closed here, its
files and stored state kept, so a later request recovers it (distributed: ``Recover``) or the
client re-creates it by its id (embedded: its state is read back). Threat: one tenant creating
sessions until the gateway's table is full, so that every other tenant's client is refused; a
tenant at its share gets ``TenantAtCap`` (HTTP 429, ``rate_limited``, with ``Retry-After``)
while other tenants still create sessions.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from toolhub.session import Session
from toolhub.tenancy import OperatorPolicy, Quotas, admit
from toolhub.tenancy.principal import (
    Principal,
    scoped_session_id,
    tenant_of_session,
    tenant_root,
)
from toolhub.toolset import ConfigSource

from .session_use import SessionUse, TenantAtCap
from .settings import GatewaySettings

logger = logging.getLogger("toolhub.gateway.sessions")

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


#: How often at most the table is scanned for idle sessions (it is scanned on create and on
#: recovery, the two ways it grows).
IDLE_SCAN_S = 1.0


def default_factory(settings: GatewaySettings, policy: OperatorPolicy) -> SessionFactory:
    """Distributed sessions hold their tenant's calls to the policy's quotas; every session
    to the policy's permission rules."""

    def make(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        if settings.redis_url:
            quotas = policy.quotas.for_tenant(tenant_of_session(session_id))
            return Session.connect(
                settings.redis_url,
                config,
                workspace,
                session_id=session_id,
                quotas=quotas,
                permissions=policy.permissions,
            )
        return Session.embedded(
            config, workspace, session_id=session_id, permissions=policy.permissions
        )

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
        busy: Callable[[str], bool] | None = None,
    ) -> None:
        self.settings = settings
        #: What any tenant's config may ask for (``TOOLHUB_POLICY``; none: the strict
        #: defaults). A malformed file raises here, so a gateway never serves a policy it
        #: did not mean.
        self.policy = policy if policy is not None else OperatorPolicy.load()
        self.factory = factory or default_factory(settings, self.policy)
        self._recover = recover(self.factory) if recover else None
        self._multi_tenant = multi_tenant or (lambda: False)
        #: Whether a session has a call running here (such a session is never evicted).
        self._busy = busy or (lambda _sid: False)
        self._sessions: dict[str, Session] = {}
        self._creating: dict[str, asyncio.Future[Session]] = {}
        self._checked: dict[str, float] = {}
        #: When each held session was last used (monotonic), and how many each tenant holds.
        self._use = SessionUse()
        self._scanned = 0.0

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: str) -> Session | None:
        return self._touch(session_id)

    def held(self, session_id: str) -> Session | None:
        """The session when this gateway holds it and may use it without asking the shared
        store (held, and a distributed one checked within ``RECHECK_S``); otherwise None, and
        ``lookup`` says."""
        session = self._touch(session_id)
        if session is None or self._recover is None:
            return session
        return session if self._checked_lately(session_id) else None

    def _touch(self, session_id: str) -> Session | None:
        self._use.touch(session_id)
        return self._sessions.get(session_id)

    def _hold(self, session_id: str, session: Session) -> Session:
        """Hold ``session`` (or the one already held under its id, which is returned)."""
        existing = self._sessions.setdefault(session_id, session)
        self._use.hold(session_id)
        return existing

    def _release(self, session_id: str) -> Session | None:
        session = self._sessions.pop(session_id, None)
        self._checked.pop(session_id, None)
        self._use.release(session_id)
        return session

    def quotas(self, tenant: str) -> Quotas:
        return self.policy.quotas.for_tenant(tenant)

    def held_by(self, tenant: str) -> int:
        """Sessions ``tenant`` holds here, and those being built."""
        building = sum(1 for sid in self._creating if tenant_of_session(sid) == tenant)
        return self._use.count(tenant) + building

    async def evict_idle(self, *, force: bool = False) -> int:
        """Close the sessions unused for their tenant's ``session_idle_seconds`` and running
        no call (files and stored state kept); at most once per ``IDLE_SCAN_S`` unless
        ``force``. Returns how many were evicted."""
        now = time.monotonic()
        if not force and now - self._scanned < IDLE_SCAN_S:
            return 0
        self._scanned = now
        idle = self._use.idle(lambda t: self.quotas(t).session_idle_seconds, self._busy)
        for sid in idle:
            await self._evict(sid)
        return len(idle)

    async def _evict(self, session_id: str) -> None:
        session = self._release(session_id)
        if session is not None:
            logger.info("session %s evicted (idle or over its tenant's share)", session_id)
            await asyncio.to_thread(session.close)

    async def _make_room(self, tenant: str) -> None:
        """Before ``tenant`` holds one more session: raise ``TenantAtCap`` at its share."""
        await self.evict_idle()
        limit = self.quotas(tenant).sessions
        if limit is None or self.held_by(tenant) < limit:
            return
        await self.evict_idle(force=True)
        self._check_share(tenant)

    def _check_share(self, tenant: str) -> None:
        """Raise ``TenantAtCap`` when ``tenant`` holds its share; no await between this and
        registering the session being built, so a burst of creates cannot all pass it."""
        limit = self.quotas(tenant).sessions
        if limit is None or self.held_by(tenant) < limit:
            return
        idle_s = self.quotas(tenant).session_idle_seconds
        raise TenantAtCap(tenant, limit, self._use.retry_after(tenant, idle_s))

    async def _room_to_recover(self, tenant: str) -> None:
        """Before recovering one of ``tenant``'s sessions at its share: its least recently
        used session not running a call is evicted (it is stored, so it comes back the same
        way when asked for)."""
        await self.evict_idle()
        limit = self.quotas(tenant).sessions
        if limit is None or self.held_by(tenant) < limit:
            return
        oldest = self._use.least_recent(tenant, self._busy)
        if oldest is not None:
            await self._evict(oldest)

    def _checked_lately(self, session_id: str) -> bool:
        return time.monotonic() - self._checked.get(session_id, 0.0) < RECHECK_S

    async def lookup(self, session_id: str) -> Session | None:
        """The session, rebuilt from the shared store when another replica created it."""
        session = self._sessions.get(session_id)
        if self._recover is None:
            return session
        if session is not None:
            self._use.touch(session_id)
            return session if await self._still_stored(session_id) else None
        pending = self._creating.get(session_id)
        if pending is not None:
            return await asyncio.shield(pending)
        tenant = tenant_of_session(session_id)
        try:
            root = self.root_of(tenant)
        except WorkspaceError:
            return None
        recovered = await asyncio.to_thread(self._recover, session_id, root)
        if recovered is None:
            return None
        if session_id not in self._sessions:
            await self._room_to_recover(tenant)
        existing = self._hold(session_id, recovered)
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
        session = self._release(session_id)
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
        await self._make_room(principal.tenant)
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
        self._check_share(principal.tenant)
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
        self._hold(sid, session)
        self._checked[sid] = time.monotonic()
        future.set_result(session)
        return session, True

    async def close(self, session_id: str) -> bool:
        """End the session (``DELETE``): here and, distributed, for every replica, which would
        otherwise rebuild it from the shared store on its next request."""
        if await self.lookup(session_id) is None:
            return False
        session = self._release(session_id)
        if session is None:
            return False
        await asyncio.to_thread(session.end)
        return True

    async def close_all(self) -> None:
        sessions, self._sessions = list(self._sessions.values()), {}
        self._use.clear()
        for session in sessions:
            await asyncio.to_thread(session.close)
