"""The garbage-collection pause recorder: each collection lands in its generation's histogram,
with the time it stopped the process."""

from __future__ import annotations

import gc
import time

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from toolhub.gc_pauses import PAUSE_BUCKETS, GcPauseCollector, GcPauses, gc_pauses


def test_a_full_collection_is_counted_with_how_long_it_took() -> None:
    pauses = GcPauses().install()
    # Enough tracked objects that a full collection takes milliseconds, not microseconds.
    heap = [[i] for i in range(400_000)]
    try:
        before, spent = pauses.count(2), pauses.seconds[2]
        counts = list(pauses.buckets[2])
        started = time.perf_counter()
        gc.collect(2)
        took = time.perf_counter() - started
    finally:
        pauses.uninstall()
        del heap
    assert pauses.count(2) == before + 1
    paused = pauses.seconds[2] - spent
    assert 0 < paused <= took
    assert paused > took / 2, "the pause is the collection, not a fraction of it"
    # Past the last bound (a full collection of a large, busy process): the +Inf bucket.
    bucket = next((i for i, bound in enumerate(PAUSE_BUCKETS) if paused <= bound), -1)
    assert pauses.buckets[2][bucket] == counts[bucket] + 1


def test_an_uninstalled_recorder_hears_nothing() -> None:
    pauses = GcPauses().install()
    pauses.uninstall()
    gc.collect(2)
    assert pauses.count(2) == 0 and pauses.seconds[2] == 0.0


def test_the_process_recorder_is_one_and_installed() -> None:
    assert gc_pauses() is gc_pauses()
    before = gc_pauses().count(0)
    gc.collect(0)
    assert gc_pauses().count(0) == before + 1


def test_the_collector_renders_a_cumulative_histogram_per_generation() -> None:
    pauses = GcPauses()
    pauses.buckets[2][0] = 2  # two pauses within the first bound
    pauses.buckets[2][-1] = 1  # one beyond the last
    pauses.seconds[2] = 3.5
    registry = CollectorRegistry()
    registry.register(GcPauseCollector(pauses))
    text = generate_latest(registry).decode()
    samples = {
        (s.name, s.labels.get("generation"), s.labels.get("le")): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    first = str(PAUSE_BUCKETS[0])
    assert samples[("toolhub_gc_pause_seconds_bucket", "2", first)] == 2
    assert samples[("toolhub_gc_pause_seconds_bucket", "2", "1.0")] == 2
    assert samples[("toolhub_gc_pause_seconds_bucket", "2", "+Inf")] == 3
    assert samples[("toolhub_gc_pause_seconds_count", "2", None)] == 3
    assert samples[("toolhub_gc_pause_seconds_sum", "2", None)] == 3.5
    assert samples[("toolhub_gc_pause_seconds_count", "0", None)] == 0
