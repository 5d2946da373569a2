"""The garbage-collector policy of toolhub's long-running processes (worker, gateway, MCP
server over HTTP): once started, move the startup heap into the permanent generation.

A full (generation 2) collection walks every tracked object. A worker's or a gateway's startup
heap is large (Celery, kombu, pydantic, the tool registry), so a full collection of it stops the
process for tens of milliseconds, and every progress line and SSE frame waiting in that process
waits as long: one such pause alone can exceed the progress-latency target. Those objects live
as long as the process, so scanning them finds nothing. ``gc.freeze()`` takes them out of every
later collection: full collections then walk only what the process made since (the calls in
flight) and are triggered by that growth alone. The price is bounded: an object alive at the
freeze that later becomes part of an unreachable cycle is never freed (startup objects rarely
do); everything made after the freeze is collected as before.

Freezing shrinks each full collection; ``space_full_collections`` makes them rare. CPython
starts a full collection once ten generation-1 collections have passed and the objects that
reached the old generation since the last one are a quarter of those that were there: in a
gateway holding 1,000 open streams, that comes every few seconds, and each one stops every
stream while it runs. The long-running processes allow 1,000 generation-1
collections between two full ones (about seven million net allocations); young collections
still free everything short-lived, cycles included. What waits longer is a cycle that lived
long enough to reach the old generation before it died (a closed stream's objects, say): it
is freed by the next full collection instead of the one after a few seconds, so memory, not
latency, carries the difference.

This is for processes toolhub owns. A library must not freeze its host's heap, so
``Session`` never calls this; docs/operations.md says when a caller may want to.
"""

from __future__ import annotations

import gc

#: Generation-1 collections at least between two full ones (CPython's default is 10).
FULL_COLLECTION_SPACING = 1000


def freeze_startup_heap() -> int:
    """Collect once (so that garbage from startup is not frozen with the rest), then freeze
    every object alive. Returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def space_full_collections() -> None:
    """Let ``FULL_COLLECTION_SPACING`` generation-1 collections pass between two full ones;
    the young generations keep their thresholds."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_COLLECTION_SPACING)
