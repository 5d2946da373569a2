"""Prometheus metrics of one gateway: calls by tool and outcome, call latency, calls in flight,
queue depth, HTTP request latency by route, the process's garbage-collection pauses, and (for
the calls an embedded gateway runs itself) what each tenant used (``tenancy/usage_metrics.py``).

Each app has its own registry (tests start several gateways in one process). Tool labels are
the session's configured client names only, never what a client typed, so a client cannot
blow up label cardinality with made-up names.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from toolhub.gc_pauses import GcPauseCollector
from toolhub.tenancy.usage_metrics import UsageCounters

logger = logging.getLogger("toolhub.gateway.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UNKNOWN_TOOL = "(unknown)"
CALL_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)

QueueDepths = Callable[[], dict[str, int]]


class _QueueCollector(Collector):
    """Reads queue depths at scrape time, so the number is never stale."""

    def __init__(self, depths: QueueDepths) -> None:
        self.depths = depths

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "toolhub_queue_depth",
            "Calls waiting in each toolhub queue (its messages and its backlog's ids).",
            labels=["queue"],
        )
        try:
            for queue, depth in sorted(self.depths().items()):
                family.add_metric([queue], depth)
        except Exception as exc:
            logger.warning("queue depth unavailable: %s", exc)
        yield family


class Metrics:
    def __init__(self, queue_depths: QueueDepths | None = None) -> None:
        self.registry = CollectorRegistry()
        self.calls = Counter(
            "toolhub_calls",
            "Finished tool calls by tool and outcome (ok or the error kind).",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "toolhub_call_duration_seconds",
            "Tool call latency from submission to result, by tool.",
            ["tool"],
            buckets=CALL_BUCKETS,
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "toolhub_calls_in_flight",
            "Tool calls started and not finished.",
            registry=self.registry,
        )
        self.requests = Histogram(
            "toolhub_http_request_duration_seconds",
            "HTTP request latency by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.usage = UsageCounters(self.registry)
        self.registry.register(GcPauseCollector())
        if queue_depths is not None:
            self.registry.register(_QueueCollector(queue_depths))

    def observe_call(self, tool: str, outcome: str, seconds: float) -> None:
        self.calls.labels(tool, outcome).inc()
        self.latency.labels(tool).observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
