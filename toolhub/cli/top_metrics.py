"""The workers' Prometheus metrics, as ``toolhub top`` reads them: each worker's ``/metrics``
scraped (``toolhub_worker_*``, ``process_*``), and the fleet's figures per tool summed over the
workers that answered.

Calls per second are the difference of the attempt counters between two scrapes; p50 and p99
are estimated from the run-time histograms summed over the workers (linear inside a bucket, as
Prometheus' ``histogram_quantile`` does), over each worker's life. A worker that does not
answer is shown as down and counts for nothing; a scrape never raises.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import httpx
from prometheus_client.parser import text_string_to_metric_families

from toolhub.core import ErrorKind

#: How long one scrape may take: a stuck worker must not freeze the dashboard.
SCRAPE_TIMEOUT_S = 2.0
#: Attempt outcomes counted as errors: a failed result's kind, or a crash of the worker's own
#: code; not a cancel, a hand-over to the holder (``held``) or a hand-back.
ERROR_OUTCOMES = frozenset(
    {kind.value for kind in ErrorKind if kind is not ErrorKind.CANCELLED} | {"crashed"}
)


@dataclass(slots=True)
class WorkerSample:
    """One worker's ``/metrics`` at one moment (``error``: why it could not be read)."""

    url: str
    at: float
    error: str | None = None
    #: The name the worker claims calls under (``toolhub_worker_identity``), as records say.
    name: str = ""
    in_flight: float = 0.0
    rss_bytes: float = 0.0
    cpu_seconds: float = 0.0
    #: (tool, outcome) → attempts.
    calls: dict[tuple[str, str], float] = field(default_factory=dict)
    #: tool → [(upper bound, cumulative count)], bounds ascending, ``inf`` last.
    buckets: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    @property
    def up(self) -> bool:
        return self.error is None

    def total_calls(self) -> float:
        return sum(self.calls.values())


@dataclass(slots=True)
class ToolFigures:
    tool: str
    calls: float = 0.0
    errors: float = 0.0
    per_second: float | None = None
    p50_s: float | None = None
    p99_s: float | None = None


def scrape(client: httpx.Client, url: str, at: float) -> WorkerSample:
    """``url``'s metrics now; a worker down or answering garbage is a sample with its error."""
    sample = WorkerSample(url, at)
    try:
        response = client.get(url, timeout=SCRAPE_TIMEOUT_S)
        response.raise_for_status()
        families = list(text_string_to_metric_families(response.text))
    except (httpx.HTTPError, ValueError) as exc:
        sample.error = type(exc).__name__
        return sample
    for family in families:
        for s in family.samples:
            if s.name == "toolhub_worker_calls_total":
                key = (s.labels.get("tool", ""), s.labels.get("outcome", ""))
                sample.calls[key] = sample.calls.get(key, 0.0) + s.value
            elif s.name == "toolhub_worker_run_seconds_bucket":
                bound = float(s.labels.get("le", "inf"))
                sample.buckets.setdefault(s.labels.get("tool", ""), []).append((bound, s.value))
            elif s.name == "toolhub_worker_identity" and s.value:
                sample.name = s.labels.get("worker", "")
            elif s.name == "toolhub_worker_calls_in_flight":
                sample.in_flight = s.value
            elif s.name == "process_resident_memory_bytes":
                sample.rss_bytes = s.value
            elif s.name == "process_cpu_seconds_total":
                sample.cpu_seconds = s.value
    for bounds in sample.buckets.values():
        bounds.sort()
    return sample


def tool_figures(
    now: list[WorkerSample], before: list[WorkerSample] | None = None
) -> list[ToolFigures]:
    """Per tool over the workers that answered: attempts, errors, calls/s since ``before`` (the
    previous scrape of the same URLs; None: no rate yet), p50 and p99 run time."""
    figures: dict[str, ToolFigures] = {}
    merged: dict[str, dict[float, float]] = {}
    for sample in now:
        for (tool, outcome), count in sample.calls.items():
            row = figures.setdefault(tool, ToolFigures(tool))
            row.calls += count
            if outcome in ERROR_OUTCOMES:
                row.errors += count
        for tool, bounds in sample.buckets.items():
            into = merged.setdefault(tool, {})
            for bound, count in bounds:
                into[bound] = into.get(bound, 0.0) + count
    if before is not None:
        earlier = {s.url: s for s in before if s.up}
        for sample in now:
            prior = earlier.get(sample.url)
            if not sample.up or prior is None or sample.at <= prior.at:
                continue
            elapsed = sample.at - prior.at
            for (tool, outcome), count in sample.calls.items():
                row = figures[tool]
                delta = max(0.0, count - prior.calls.get((tool, outcome), 0.0))
                row.per_second = (row.per_second or 0.0) + delta / elapsed
    for tool, counts in merged.items():
        row = figures.setdefault(tool, ToolFigures(tool))
        bounds = sorted(counts.items())
        row.p50_s = quantile(0.5, bounds)
        row.p99_s = quantile(0.99, bounds)
    return sorted(figures.values(), key=lambda r: (-r.calls, r.tool))


def quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """The ``q`` quantile of a cumulative histogram (bounds ascending, ``inf`` last), or None
    when it is empty. Past the last finite bound it is that bound (the histogram knows no
    more)."""
    if not buckets or buckets[-1][1] <= 0:
        return None
    rank = q * buckets[-1][1]
    lower, below = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return lower
            if count == below:
                return bound
            return lower + (bound - lower) * (rank - below) / (count - below)
        lower, below = bound, count
    return lower
