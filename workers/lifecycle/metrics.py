"""Prometheus metrics of one worker process, served on ``TOOLHUB_METRICS_PORT`` (default 9100,
0 turns it off).

What the gateway's metrics cannot see: which worker ran a call and how long the run itself took,
and the recovery machinery at work (leases lost, calls recovered from dead workers, duplicate
deliveries dropped, attempts after the first). One process is one worker, so one module-level
``metrics`` object is what every hook reports to; its registry is private (not the global one)
so that a process that also hosts a gateway, such as a test, never mixes the two.

Tool labels are tool ids from messages a dispatcher validated against its tool set, so their
number is bounded by the registered tools; arguments never become labels. What each tenant
used (``toolhub_usage_*``, per tenant and tool) is counted as a call's terminal is written
(``workers/calls/usage.py``), with label sets bounded by ``tenancy/usage_metrics.py``.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    ProcessCollector,
    start_http_server,
)

from toolhub.core import CallResult, ErrorKind
from toolhub.core.tool import HANDOFF, LEASE_LOST, REDIS_LOST
from toolhub.gc_pauses import GcPauseCollector
from toolhub.tenancy.usage_metrics import UsageCounters
from workers.calls.running import Running

logger = logging.getLogger("toolhub.worker.metrics")

PORT_ENV = "TOOLHUB_METRICS_PORT"
HOST_ENV = "TOOLHUB_METRICS_HOST"
DEFAULT_PORT = 9100
RUN_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)
#: The outcome of an attempt that ended because of a crash in the worker's own code.
CRASHED = "crashed"


@dataclass(slots=True)
class Attempt:
    """One run of a call on this worker; the hook fills in ``outcome`` when it settles."""

    tool: str
    outcome: str = CRASHED


class WorkerMetrics:
    def __init__(self) -> None:
        #: (tool, outcome) -> its ``calls`` and ``run_time`` children, for ``count_run``.
        self._children: dict[tuple[str, str], tuple[Counter, Histogram]] = {}
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        GCCollector(registry=self.registry)
        self.registry.register(GcPauseCollector())
        self.heap_frozen = Gauge(
            "toolhub_worker_heap_frozen_objects",
            "Objects of the startup heap moved out of garbage collection once the worker was "
            "ready (toolhub/process_heap.py); 0 until then.",
            registry=self.registry,
        )
        self.calls = Counter(
            "toolhub_worker_calls",
            "Attempts run on this worker by tool and outcome: ok, the error kind, or why the "
            "attempt stopped without a result (handed_back, lease_lost, redis_lost, crashed).",
            ["tool", "outcome"],
            registry=self.registry,
        )
        self.run_time = Histogram(
            "toolhub_worker_run_seconds",
            "Run time of an attempt on this worker, from its claim to its end, by tool.",
            ["tool"],
            buckets=RUN_BUCKETS,
            registry=self.registry,
        )
        self.identity = Gauge(
            "toolhub_worker_identity",
            "1, labelled with the name this worker claims calls under (host:pid), as the call "
            "records name it: what joins a worker's metrics to its calls (toolhub top).",
            ["worker"],
            registry=self.registry,
        )
        self.in_flight = Gauge(
            "toolhub_worker_calls_in_flight",
            "Calls this worker runs now: claimed and not settled.",
            registry=self.registry,
        )
        self.leases_lost = Counter(
            "toolhub_worker_leases_lost",
            "Attempts this worker ran whose lease expired or was taken over by another attempt.",
            registry=self.registry,
        )
        self.leases_fenced = Counter(
            "toolhub_worker_leases_fenced",
            "Attempts this worker stopped itself because Redis confirmed no renewal of their "
            "lease for most of a lease (cut off from Redis: self-fencing, docs/distributed.md).",
            registry=self.registry,
        )
        self.claims_unreplicated = Counter(
            "toolhub_worker_claims_unreplicated",
            "Claims this worker ran before a replica confirmed them (Sentinel fleets: the "
            "replica was down or behind; a failover then could run the call twice).",
            registry=self.registry,
        )
        self.claims_at_receipt = Counter(
            "toolhub_worker_claims_at_receipt",
            "Claims this worker wrote as the message arrived, read by the pool thread that runs "
            "it (workers/calls/receipt_claims.py); the others were sent from the pool thread.",
            registry=self.registry,
        )
        self.sunk_held = Counter(
            "toolhub_worker_sunk_held_seconds",
            "Seconds calls past their tenant's fair share waited to start behind this worker's "
            "level-0 calls (TOOLHUB_FAIR_HOLD_MS, docs/distributed.md: Fair dispatch).",
            registry=self.registry,
        )
        self.redis_full = Gauge(
            "toolhub_worker_redis_full",
            "1 while Redis refuses this worker's lease keeper writes for want of memory "
            "(maxmemory reached under noeviction), else 0. Leases are still renewed.",
            registry=self.registry,
        )
        self.redis_full_refusals = Counter(
            "toolhub_worker_redis_full_refusals",
            "Lease-keeper passes (sweeps, claim-deadline moves) Redis refused for want of "
            "memory; each is retried on the next pass.",
            registry=self.registry,
        )
        self.recovered = Counter(
            "toolhub_worker_calls_recovered",
            "Calls of a dead worker (lease expired) that this worker's sweep re-enqueued.",
            registry=self.registry,
        )
        self.unacked_removed = Counter(
            "toolhub_worker_unacked_removed",
            "Stale kombu unacked entries (deliveries whose ack never reached Redis: a killed "
            "worker, a broker restart) that this worker's sweep removed.",
            registry=self.registry,
        )
        self.retries = Counter(
            "toolhub_worker_retries",
            "Calls this worker ran as attempt 2 or later (after a lost worker or a hand-back).",
            ["tool"],
            registry=self.registry,
        )
        self.dropped = Counter(
            "toolhub_worker_messages_dropped",
            "Delivered messages not run, by the claim's answer: duplicate (another attempt "
            "holds a live lease), finished, gone, stale, cancelled (before it ran), exhausted "
            "(attempt limit reached).",
            ["reason"],
            registry=self.registry,
        )
        #: What each tenant used, per tool, in the calls this worker finished.
        self.usage = UsageCounters(self.registry)
        self.deadlettered = Counter(
            "toolhub_worker_messages_deadlettered",
            "Queue items this worker refused to run and moved to the dead-letter list, by "
            "reason: undecodable, malformed, unsigned, bad_signature, expired (issued longer ago "
            "than the fleet's message age), replayed (its run had finished).",
            ["reason"],
            registry=self.registry,
        )

    @contextmanager
    def attempt(self, tool: str, number: int) -> Iterator[Attempt]:
        """Count one claimed attempt: in flight while inside, then its outcome and run time."""
        if number > 1:
            self.retries.labels(tool).inc()
        self.in_flight.inc()
        started = time.perf_counter()
        run = Attempt(tool)
        try:
            yield run
        finally:
            self.in_flight.dec()
            self.count_run(tool, run.outcome, time.perf_counter() - started)
            if run.outcome == LEASE_LOST:
                self.leases_lost.inc()

    def count_run(self, tool: str, outcome: str, seconds: float) -> None:
        """Count an attempt's outcome and run time, as ``attempt`` does when it leaves."""
        children = self._children.get((tool, outcome))
        if children is None:
            children = (self.calls.labels(tool, outcome), self.run_time.labels(tool))
            self._children[(tool, outcome)] = children
        children[0].inc()
        children[1].observe(seconds)


def tool_label(message: dict[str, Any]) -> str:
    return str(message.get("tool") or message.get("name") or "(unknown)")


def outcome(running: Running, settled: str, result: CallResult) -> str:
    """What an attempt came to. Checked after ``settle``: publishing the terminal may itself
    discover that another attempt owns the call (the token then says ``lease_lost``)."""
    token = running.token
    if token.cancelled and token.reason == HANDOFF:
        return "handed_back"
    if token.cancelled and token.reason in (LEASE_LOST, REDIS_LOST):
        return token.reason
    if settled == "finished":
        return "ok" if result.error is None else result.error.kind.value
    # The cancel itself published the terminal (an inline call's cancel answers at once).
    return ErrorKind.CANCELLED.value


class MetricsListener:
    """The ``/metrics`` listener (a service of ``services.py``), configured from the
    environment. A port already taken (several workers on one host with the same setting) is
    logged and the worker runs on without it: metrics are never a reason for a worker not to
    run calls."""

    name = "toolhub-metrics"

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.address: tuple[str, int] | None = None
        self._server: WSGIServer | None = None

    def start(self) -> None:
        raw = os.environ.get(PORT_ENV, "").strip()
        port = int(raw) if raw else DEFAULT_PORT
        if port == 0:
            return
        host = os.environ.get(HOST_ENV, "").strip() or "0.0.0.0"
        try:
            self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        except OSError as exc:
            logger.warning("metrics listener on %s:%d not started: %s", host, port, exc)
            return
        self.address = (host, self._server.server_port)
        logger.info("metrics on http://%s:%d/metrics", host, self._server.server_port)

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()


metrics = WorkerMetrics()
