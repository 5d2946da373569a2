"""Reading the workers' ``/metrics`` the way Prometheus does: over HTTP, parsed by the official
text-format parser, summed across workers (either worker may run a call)."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures_stack import Stack, WorkerProcess

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(worker: WorkerProcess) -> Samples:
    text = httpx.get(worker.metrics_url, timeout=5).text
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape_all(stack: Stack) -> list[Samples]:
    return [scrape(worker) for worker in stack.workers]


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def total(scrapes: list[Samples], name: str, **labels: str) -> float:
    return sum(value(samples, name, **labels) for samples in scrapes)


def moved(before: list[Samples], after: list[Samples], name: str, **labels: str) -> float:
    return total(after, name, **labels) - total(before, name, **labels)
