"""A principal is a tenant, as proved by one of its API keys; everything a tenant owns
(sessions, and through them calls, background tasks, MCP tasks and event streams) is keyed by
the tenant, so a tenant's several keys (one per agent, or old and new during a rotation) see the
same sessions, and no other tenant sees them at all.

Session ids are scoped: the id a client sees (chosen by it, or ``s_…`` made by the gateway) is
not the id toolhub stores. A named tenant's stored id is ``<tenant>~<client id>``; the default
tenant's (the single ``TOOLHUB_API_TOKEN``, or no token on loopback) is the client id itself, so
a one-tenant fleet stores what it always stored. ``~`` is outside the client id alphabet, so no
client of one tenant can name another tenant's session, and a leaked or guessed id is no
capability: it is looked up under the caller's own tenant. The tenant is therefore readable from
the stored id alone (``tenant_of_session``) wherever a session is known, workers included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: The tenant of the single-token (or no-token, loopback) case.
DEFAULT_TENANT = "default"
#: A tenant name: lower-case, starts with a letter or digit, at most 40 characters.
TENANT_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,39}$"
_TENANT = re.compile(TENANT_PATTERN)
#: Between the tenant and the client's id in a stored session id; never in a client id.
SEPARATOR = "~"


@dataclass(frozen=True, slots=True)
class Principal:
    """A caller: its tenant and the id of the key it authenticated with (``key_id`` is never
    the secret; it is what logs and ``toolhub keys list`` show)."""

    tenant: str
    key_id: str

    def __post_init__(self) -> None:
        if not _TENANT.match(self.tenant):
            raise ValueError(f"tenant name {self.tenant!r} does not match {TENANT_PATTERN}")

    def __str__(self) -> str:
        return f"{self.tenant}/{self.key_id}"


#: The principal of a gateway with no token at all (loopback only).
ANONYMOUS = Principal(DEFAULT_TENANT, "anonymous")


def scoped_session_id(tenant: str, client_id: str) -> str:
    """The stored id of ``tenant``'s session that its client calls ``client_id``."""
    if SEPARATOR in client_id:
        raise ValueError(f"a client session id may not contain {SEPARATOR!r}")
    return client_id if tenant == DEFAULT_TENANT else f"{tenant}{SEPARATOR}{client_id}"


def client_session_id(stored_id: str) -> str:
    """What the owning tenant's client calls the stored session ``stored_id``."""
    return stored_id.partition(SEPARATOR)[2] if SEPARATOR in stored_id else stored_id


def tenant_of_session(stored_id: str) -> str:
    """The tenant that owns the stored session ``stored_id``."""
    return stored_id.partition(SEPARATOR)[0] if SEPARATOR in stored_id else DEFAULT_TENANT


def tenant_root(workspace_root: Path, tenant: str, *, multi_tenant: bool) -> Path:
    """Where ``tenant``'s workspaces live: the gateway's workspace root itself on a one-tenant
    gateway (no named keys), else ``<root>/tenants/<tenant>`` for every tenant, the default one
    included, so that no tenant's root holds another's."""
    if not multi_tenant:
        return workspace_root
    if not _TENANT.match(tenant):
        raise ValueError(f"tenant name {tenant!r} does not match {TENANT_PATTERN}")
    return workspace_root / "tenants" / tenant
