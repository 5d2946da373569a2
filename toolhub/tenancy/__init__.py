"""Who is calling: principals (a tenant authenticated by one of its API keys), the session ids
scoped to them, and where each tenant's workspaces live. Trust model: docs/security.md."""

from .principal import (
    DEFAULT_TENANT,
    TENANT_PATTERN,
    Principal,
    client_session_id,
    scoped_session_id,
    tenant_of_session,
    tenant_root,
)

__all__ = [
    "DEFAULT_TENANT",
    "TENANT_PATTERN",
    "Principal",
    "client_session_id",
    "scoped_session_id",
    "tenant_of_session",
    "tenant_root",
]
