"""A session's kernel bounds, from its tenant's quotas: what its commands' cgroups hold.

The threat: a session whose commands, each within its own limits, together take a host's
memory or pids, or whose config asks for a per-command limit above the operator's. The process
runner puts each command of the session in the session's cgroup with these bounds and clamps
each command's own limits to the per-command ceilings (``toolhub.backends.cgroups``);
admission refuses a config asking for more (``param_rules.py``).

The policy file is read as ``session_quotas`` reads it (again only when it changed).
"""

from __future__ import annotations

from toolhub.backends.cgroups import SessionQuota

from .policy import OperatorPolicy
from .principal import tenant_of_session
from .quotas import Quotas
from .session_quotas import quotas_of_session

__all__ = ["session_quota"]


def session_quota(session_id: str, policy: OperatorPolicy | None = None) -> SessionQuota:
    """The kernel bounds of stored session ``session_id``, from its tenant's quotas in
    ``policy`` (default: the policy file ``TOOLHUB_POLICY`` names, as it is now)."""
    if policy is None:
        return quota_of(session_id, quotas_of_session(session_id))
    return quota_of(session_id, policy.quotas.for_tenant(tenant_of_session(session_id)))


def quota_of(session_id: str, quotas: Quotas) -> SessionQuota:
    return SessionQuota(
        session_id,
        memory_bytes=quotas.memory_per_session,
        pids=quotas.pids_per_session,
        cpu_weight=quotas.cpu_weight,
        memory_per_command=quotas.memory_per_command,
        pids_per_command=quotas.pids_per_command,
    )
