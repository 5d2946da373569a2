"""The quotas of the tenant a session belongs to, as this process's operator policy sets them.

The components that bound what one session may consume (the emitter of a worker, a session's
background-task backend, its disk budget, its commands' cgroups) know a session id, not a
policy: this answers for any session id from the policy file ``TOOLHUB_POLICY`` names (none:
the defaults). The file is read again only when it changed, so a holder that makes a runner
for every background command does not parse it every time, and an operator's edit holds
without a restart. Threat: a bound a tenant's config or a dispatcher could choose; these come
only from the operator's file where the work runs.
"""

from __future__ import annotations

import functools
import os

from .policy import POLICY_ENV, OperatorPolicy
from .principal import tenant_of_session
from .quotas import Quotas

__all__ = ["current_policy", "quotas_of_session"]


def current_policy() -> OperatorPolicy:
    """The policy file ``TOOLHUB_POLICY`` names, as it is now (a malformed one raises
    ``ConfigError``, as ``OperatorPolicy.load`` does)."""
    named = os.environ.get(POLICY_ENV, "").strip()
    try:
        stamp = os.stat(named).st_mtime_ns if named else 0
    except OSError:
        stamp = -1  # unreadable: load says why
    return _load(named, stamp)


@functools.lru_cache(maxsize=4)
def _load(named: str, stamp: int) -> OperatorPolicy:
    return OperatorPolicy.load(named or None)


def quotas_of_session(session_id: str) -> Quotas:
    """The quotas of ``session_id``'s tenant."""
    return current_policy().quotas.for_tenant(tenant_of_session(session_id))
