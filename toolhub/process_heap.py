"""The garbage-collector policy of toolhub's long-running processes (worker, gateway, MCP
server over HTTP): once started, move the startup heap into the permanent generation.

A full (generation 2) collection walks every tracked object. In a worker the startup heap is
~130,000 objects (Celery, kombu, pydantic, the tool registry), and a full collection took it
70-100 ms, measured with ``gc.callbacks``; the gateway's took 35-130 ms. Every progress line
and SSE frame waiting in that process waits that long: with 500 commands in flight, one
such pause alone was above the 50 ms progress target. Those objects live as long as the
process, so scanning them finds nothing. ``gc.freeze()`` takes them out of every later
collection: full collections then walk only what the process made since (the calls in flight)
and are triggered by that growth alone. The price is bounded: an object alive at the freeze
that later becomes part of an unreachable cycle is never freed (startup objects rarely do);
everything made after the freeze is collected as before.

This is for processes toolhub owns. A library must not freeze its host's heap, so
``Session`` never calls this; docs/operations.md says when a caller may want to.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> int:
    """Collect once (so that garbage from startup is not frozen with the rest), then freeze
    every object alive. Returns how many objects are frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
