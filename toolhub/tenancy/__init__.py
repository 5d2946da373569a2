"""Who is calling: principals (a tenant authenticated by one of its API keys), the session ids
scoped to them, where each tenant's workspaces live, and the operator policy every tenant's
config is admitted against. Trust model: docs/security.md.

Admission (``admit``, ``effective``) is imported on first use (PEP 562): it needs the whole tool
catalog, which the key file and the principal's checks (the CLI's ``keys``, the gateway's
authentication) do not.
"""

from typing import TYPE_CHECKING, Any

from .policy import POLICY_ENV, OperatorPolicy
from .principal import (
    DEFAULT_TENANT,
    TENANT_PATTERN,
    Principal,
    client_session_id,
    scoped_session_id,
    tenant_of_session,
    tenant_root,
)
from .quotas import Quotas, TenantQuotas

__all__ = [
    "DEFAULT_TENANT",
    "POLICY_ENV",
    "TENANT_PATTERN",
    "OperatorPolicy",
    "Principal",
    "Quotas",
    "TenantQuotas",
    "admit",
    "client_session_id",
    "effective",
    "scoped_session_id",
    "tenant_of_session",
    "tenant_root",
]


if TYPE_CHECKING:
    from .admission import admit, effective


def __getattr__(name: str) -> Any:
    if name in ("admit", "effective"):
        from . import admission

        value = getattr(admission, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'toolhub.tenancy' has no attribute {name!r}")
