"""How long the garbage collector stops this process, by generation: ``/metrics`` shows it.

A full (generation 2) collection stops every thread of the process while it walks every
tracked object, and every progress line and SSE frame waiting in that process waits as long.
Freezing the startup heap (``process_heap.py``) took the largest ones away, but what a process
makes while it serves is still walked: a gateway holding 1,000 open SSE streams (mostly the
ASGI stack's suspended coroutines) stops for tens of milliseconds per full collection.
Prometheus's stock
``GCCollector`` counts collections but not how long they stop the process; this does.

The recorder is one ``gc.callbacks`` hook per process. A collection can start inside any code,
including code that holds a metrics lock on the same thread, so the hook takes no lock and
calls nothing that might: it only adds to plain per-generation counters (the GIL keeps each
update whole), and the collector turns them into a histogram when ``/metrics`` is scraped. Its
cost is a Python call at the start and the end of each collection, small against the
collection itself.
"""

from __future__ import annotations

import bisect
import gc
import threading
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector

__all__ = ["PAUSE_BUCKETS", "GcPauseCollector", "GcPauses", "gc_pauses"]

#: Upper bounds (seconds) of the pause histogram's buckets; the last bucket is +Inf.
PAUSE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)
GENERATIONS = 3


class GcPauses:
    """Pause counts per generation and bucket, and their total seconds, since ``install``."""

    def __init__(self) -> None:
        self.buckets = [[0] * (len(PAUSE_BUCKETS) + 1) for _ in range(GENERATIONS)]
        self.seconds = [0.0] * GENERATIONS
        self._started = 0.0
        self._installed = False

    def install(self) -> GcPauses:
        """Hook into the collector (idempotent)."""
        if not self._installed:
            self._installed = True
            gc.callbacks.append(self._hear)
        return self

    def uninstall(self) -> None:
        if self._installed:
            self._installed = False
            gc.callbacks.remove(self._hear)

    def _hear(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        paused = time.perf_counter() - self._started
        generation = info["generation"]
        self.buckets[generation][bisect.bisect_left(PAUSE_BUCKETS, paused)] += 1
        self.seconds[generation] += paused

    def count(self, generation: int) -> int:
        return sum(self.buckets[generation])


_lock = threading.Lock()
_process: GcPauses | None = None


def gc_pauses() -> GcPauses:
    """This process's recorder, installed on first use."""
    global _process
    with _lock:
        if _process is None:
            _process = GcPauses().install()
        return _process


class GcPauseCollector(Collector):
    """``toolhub_gc_pause_seconds{generation}``: the recorder's histogram at scrape time."""

    def __init__(self, pauses: GcPauses | None = None) -> None:
        self.pauses = pauses or gc_pauses()

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(
            "toolhub_gc_pause_seconds",
            "How long each garbage collection stopped this process, by generation "
            "(2: full collections, which walk every tracked object not frozen).",
            labels=["generation"],
        )
        bounds = [*(str(b) for b in PAUSE_BUCKETS), "+Inf"]
        for generation in range(GENERATIONS):
            counts = list(self.pauses.buckets[generation])
            running, cumulative = 0, []
            for bound, count in zip(bounds, counts, strict=True):
                running += count
                cumulative.append((bound, running))
            family.add_metric(
                [str(generation)], buckets=cumulative, sum_value=self.pauses.seconds[generation]
            )
        yield family
