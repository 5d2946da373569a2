"""The per-tenant usage counters keep their label sets bounded: past the caps, a new tenant or
tool is counted as ``(other)``, and the first ones keep their own series (counters never
change their labels)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from toolhub.distributed.usage import CallUsage
from toolhub.tenancy.usage_metrics import OTHER, UsageCounters


def _samples(registry: CollectorRegistry, name: str) -> dict[tuple[str, str], float]:
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            if sample.name == name:
                found[(sample.labels["tenant"], sample.labels["tool"])] = sample.value
    return found


def test_counts_per_tenant_and_tool_and_bounds_the_labels() -> None:
    registry = CollectorRegistry()
    counters = UsageCounters(registry, max_tenants=2, max_tools=2)
    for i in range(5):
        call = CallUsage(f"t{i}", f"tool{i % 3}", 1.5, 0.25, 100, 10)
        counters.count(call, failed=i == 0)
    counters.count(CallUsage("t0", "tool0", 1.0, 0.5, 0, 5), failed=False)

    calls = _samples(registry, "toolhub_usage_calls_total")
    # t0/t1 and tool0/tool1 came first; everything after is (other).
    assert calls == {
        ("t0", "tool0"): 2,
        ("t1", "tool1"): 1,
        (OTHER, OTHER): 1,  # t2, tool2
        (OTHER, "tool0"): 1,  # t3
        (OTHER, "tool1"): 1,  # t4
    }
    assert _samples(registry, "toolhub_usage_errors_total") == {("t0", "tool0"): 1}
    assert _samples(registry, "toolhub_usage_cpu_seconds_total")[("t0", "tool0")] == 2.5
    assert _samples(registry, "toolhub_usage_wall_seconds_total")[("t0", "tool0")] == 0.75
    assert _samples(registry, "toolhub_usage_output_bytes_total")[("t0", "tool0")] == 15
    tenants = {tenant for tenant, _ in calls}
    tools = {tool for _, tool in calls}
    assert len(tenants) <= 3 and len(tools) <= 3  # the caps, plus (other)
