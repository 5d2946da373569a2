"""What one tenant may consume of the shared fleet: the operator's quotas and resource ceilings.

The threat: one tenant's sessions (its configs and its models' commands) using so much of the
fleet that other tenants' calls fail or wait: memory and pids that make the kernel kill
toolhub's own processes, output that fills the gateway's memory or Redis, sessions and
background tasks without end, a burst of calls queued in front of everyone else. Each field is
a bound the operator sets in the policy file (``quotas``, with ``tenants.<name>`` overriding
any field for one tenant); the tenant's config cannot raise any of them. Who enforces which:
the kernel (cgroups: memory, pids, CPU weight, per command and per session), the dispatcher
(rates, concurrency, CPU-seconds per hour, sessions, background tasks, before anything is
queued), the gateway and Redis scripts (bytes held per call and per session).

The defaults fit one worker host with a few GiB for commands; a fleet sizes them to its hosts.
"""

from __future__ import annotations

from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

_MIB = 1 << 20
_GIB = 1 << 30

__all__ = ["Quotas", "TenantQuotas"]


class Quotas(BaseModel):
    """One tenant's bounds. ``None`` where allowed means unbounded, which only the operator
    can choose."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # -- the dispatcher: before anything is queued -------------------------------------------
    calls_per_second: float | None = Field(
        50.0, gt=0, description="Sustained call rate (token bucket), across gateway replicas."
    )
    burst: int = Field(100, ge=1, description="Calls a tenant may make at once above the rate.")
    concurrent_calls: int | None = Field(
        64, ge=1, description="Calls queued or running at once (background tasks excluded)."
    )
    concurrent_background_tasks: int | None = Field(
        16, ge=1, description="Background tasks running at once, all sessions together."
    )
    cpu_seconds_per_hour: float | None = Field(
        3600.0, gt=0, description="Command CPU-seconds in the last hour; over it, calls wait."
    )
    sessions: int | None = Field(200, ge=1, description="Live sessions at once.")
    session_idle_seconds: float = Field(
        3600.0, gt=0, description="A session not used for this long is evicted (its files kept)."
    )
    background_tasks_per_session: int | None = Field(
        32, ge=1, description="Background tasks one session may have running at once."
    )

    # -- bytes a tenant can push into the fleet's memory -------------------------------------
    stream_bytes_per_call: int = Field(
        1 * _MIB, ge=4096, description="Progress bytes kept in Redis per call (older trimmed)."
    )
    stream_bytes_per_session: int = Field(
        16 * _MIB, ge=4096, description="Progress bytes kept in Redis per session."
    )

    # -- the kernel: per command and per session ---------------------------------------------
    memory_per_command: int = Field(
        1 * _GIB, ge=16 * _MIB, description="Memory cgroup limit of one command."
    )
    memory_per_session: int = Field(
        2 * _GIB, ge=16 * _MIB, description="Memory of all of one session's commands together."
    )
    pids_per_command: int = Field(512, ge=8, description="Processes and threads of one command.")
    pids_per_session: int = Field(1024, ge=8, description="Of all of one session's commands.")
    disk_per_session: int = Field(
        2 * _GIB, ge=_MIB, description="Workspace, tmp and logs of one session together."
    )
    cpu_weight: int = Field(
        100, ge=1, le=10000, description="cgroup CPU weight of each session's commands."
    )


class TenantQuotas(BaseModel):
    """The policy's ``quotas`` section: the default for every tenant and per-tenant overrides."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: Quotas = Field(default_factory=Quotas)
    tenants: dict[str, dict[str, object]] = Field(
        default_factory=dict, description="Tenant name → the fields that differ for it."
    )

    @model_validator(mode="after")
    def _overrides_are_quotas(self) -> Self:
        for tenant in self.tenants:
            self.for_tenant(tenant)
        return self

    def for_tenant(self, tenant: str) -> Quotas:
        """``tenant``'s bounds: the default with its overrides applied."""
        override = self.tenants.get(tenant)
        if not override:
            return self.default
        return Quotas.model_validate({**self.default.model_dump(), **override})
