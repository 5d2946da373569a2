"""What each tenant used, on a process's ``/metrics``: counters per tenant and tool.

``toolhub_usage_calls_total``, ``toolhub_usage_errors_total``, ``toolhub_usage_cpu_seconds_total``,
``toolhub_usage_wall_seconds_total`` and ``toolhub_usage_output_bytes_total``, each labelled
``tenant`` and ``tool``. A worker counts the calls it finished, an embedded gateway the calls it
ran: summed over a fleet's processes, they are the fleet's. (The same figures per hour are in
Redis, ``distributed/usage.py``, for ``toolhub usage`` and the CPU quota.)

Threat: label values are what a time-series database pays for. Tenant names come from the
operator's key file and tool names from validated tool sets, but a tenant's config may bring
MCP servers whose tools it names itself. So the label sets are bounded: the first
``max_tenants`` tenants and the first ``max_tools`` tools a process counts keep their own label
values; any later one is counted as ``(other)`` (a value no tenant or tool can take). First come
rather than the busiest: a counter must never change its labels, or its rate would jump.
"""

from __future__ import annotations

import threading
from typing import NamedTuple

from prometheus_client import CollectorRegistry, Counter

from toolhub.distributed.usage import CallUsage

__all__ = ["MAX_TENANT_LABELS", "MAX_TOOL_LABELS", "OTHER", "UsageCounters"]

#: Distinct tenant label values one process keeps; later tenants count as ``OTHER``.
MAX_TENANT_LABELS = 50
#: Distinct tool label values one process keeps; later tools count as ``OTHER``.
MAX_TOOL_LABELS = 100
#: The label value of everything past a bound.
OTHER = "(other)"


class _Bounded:
    """Label values in the order first seen, at most ``cap`` of them."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.kept: set[str] = set()

    def label(self, value: str) -> str:
        if value in self.kept:
            return value
        if len(self.kept) >= self.cap:
            return OTHER
        self.kept.add(value)
        return value


class UsageCounters:
    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        max_tenants: int = MAX_TENANT_LABELS,
        max_tools: int = MAX_TOOL_LABELS,
    ) -> None:
        self._lock = threading.Lock()
        self._tenants = _Bounded(max_tenants)
        self._tools = _Bounded(max_tools)
        #: (tenant, tool) label values -> their counters: as bounded as the label values.
        self._children: dict[tuple[str, str], _Children] = {}
        labels = ["tenant", "tool"]

        def counter(name: str, what: str) -> Counter:
            return Counter(f"toolhub_usage_{name}", what, labels, registry=registry)

        self.calls = counter("calls", "Finished calls by tenant and tool.")
        self.errors = counter("errors", "Finished calls that failed, by tenant and tool.")
        self.cpu = counter(
            "cpu_seconds", "CPU seconds (user + system) of the calls' commands, by tenant and tool."
        )
        self.wall = counter("wall_seconds", "Wall time of the calls' runs, by tenant and tool.")
        self.output = counter(
            "output_bytes", "Bytes of output (progress and result text), by tenant and tool."
        )

    def count(self, call: CallUsage, *, failed: bool) -> None:
        with self._lock:
            tenant, tool = self._tenants.label(call.tenant), self._tools.label(call.tool)
            children = self._children.get((tenant, tool))
            if children is None:
                children = _Children(
                    *(
                        c.labels(tenant, tool)
                        for c in (self.calls, self.cpu, self.wall, self.output)
                    )
                )
                self._children[(tenant, tool)] = children
        children.calls.inc()
        if failed:
            self.errors.labels(tenant, tool).inc()
        if call.cpu_seconds > 0:  # a call that ran no command: nothing to add (each inc locks)
            children.cpu.inc(call.cpu_seconds)
        children.wall.inc(max(call.wall_seconds, 0.0))
        if call.output_bytes > 0:
            children.output.inc(call.output_bytes)


class _Children(NamedTuple):
    """The counters every finished call of one (tenant, tool) adds to, labelled once: a
    counter's ``labels`` builds, hashes and locks its key on every use."""

    calls: Counter
    cpu: Counter
    wall: Counter
    output: Counter
