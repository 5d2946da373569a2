"""The quotas of the tenant a session belongs to, as this process's operator policy sets them.

The components that bound what one session may push (the emitter of a worker, a session's
background-task backend, its disk budget) know a session id, not a policy: this reads the
policy file once per process (``TOOLHUB_POLICY``; none: the defaults) and answers for any
session id. Threat: a bound a tenant's config or a dispatcher could choose; these come only
from the operator's file where the work runs.
"""

from __future__ import annotations

import functools
import os

from .policy import POLICY_ENV, OperatorPolicy
from .principal import tenant_of_session
from .quotas import Quotas, TenantQuotas

__all__ = ["quotas_of_session"]


@functools.cache
def _quotas(path: str | None) -> TenantQuotas:
    """The quotas of the policy file at ``path`` (read once per path)."""
    return OperatorPolicy.load().quotas


def quotas_of_session(session_id: str) -> Quotas:
    """The quotas of ``session_id``'s tenant."""
    return _quotas(os.environ.get(POLICY_ENV)).for_tenant(tenant_of_session(session_id))
