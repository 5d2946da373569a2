"""Every reach into Celery's worker internals, and the plain path beside each where one exists.

Written against Celery 5.7.0 (``celery/worker/state.py``, ``celery/apps/worker.py``); pyproject
pins ``celery>=5.7,<5.8``. Celery's documented extension points toolhub also uses (a custom
``worker_consumer`` and events class, ``inspect_command``, bootsteps, signals) are not reaches
and stay with their callers. With ``TOOLHUB_PLAIN_LIBRARIES`` naming ``celery`` (or ``all``):

* ``held_request`` (the worker's ``Request`` of a task it is running, from
  ``celery.worker.state.requests``): a failed or cancelled call sends its ``task-failed`` /
  ``task-revoked`` event through it (``workers/calls/outcomes.py``). Plain: None, so Celery
  records the task as succeeded and Flower shows ``SUCCESS`` with the result text naming the
  error; the call's own record and result are unchanged.
* ``reserved_requests`` (the messages the worker has taken and not started): the lease keeper
  keeps their claim deadlines moving (``workers/lifecycle/sweeper.py``). Plain: none are seen,
  so a message prefetched for longer than its claim deadline is pushed again by the sweep and
  its second delivery is dropped by the claim (one more queue item, no second run).
* ``active_requests`` / the same reserved set, for the redacted inspect commands
  (``workers/lifecycle/observe.py``): no plain path. Celery's own inspect commands read the
  same registry, and answering with Celery's unredacted commands instead would leak the
  arguments the task events redact.
* ``route_signal_notices`` replaces ``celery.apps.worker.safe_say``, which Celery's signal
  handlers write notices with, past logging. Plain: not replaced; in JSON log mode those few
  lines (warm shutdown, Ctrl-C) stay Celery's plain text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TextIO

from . import plain

__all__ = [
    "TARGET_CELERY",
    "active_requests",
    "held_request",
    "reserved_requests",
    "route_signal_notices",
]

#: The Celery release these reaches were written and tested against.
TARGET_CELERY = "5.7.0"


def held_request(task_id: str) -> Any | None:
    """The worker's request object of a task it is running, or None (plain path, or a task
    not run by a worker's consumer)."""
    if plain("celery"):
        return None
    from celery.worker import state

    return state.requests.get(task_id)


def reserved_requests(*, for_inspection: bool = False) -> set[Any]:
    """The requests the worker has taken, started or not. The plain path sees none, except
    for the inspect commands, which have no plain path."""
    if plain("celery") and not for_inspection:
        return set()
    from celery.worker import state

    return set(state.reserved_requests)


def active_requests() -> set[Any]:
    """The requests the worker is running (for the inspect commands; no plain path)."""
    from celery.worker import state

    return set(state.active_requests)


def route_signal_notices(say: Callable[[str, TextIO | None], None]) -> bool:
    """Send the notices Celery's signal handlers write past logging to ``say``; False when
    the plain path leaves them as Celery writes them."""
    if plain("celery"):
        return False
    from celery.apps import worker

    worker.safe_say = say
    return True
