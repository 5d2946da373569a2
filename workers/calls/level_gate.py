"""Within one worker, a call of the fair-share level starts ahead of the sunk calls it holds.

Fair dispatch (``toolhub/distributed/fair.py``) orders the queue: another tenant's call waits
for no sunk call there. Inside a worker it still shares the process with up to
``concurrency - 1`` sunk calls of a bursting tenant, and on a busy host each step of its
attempt (the claim's reply, the tool, the finish) waits for the GIL behind them: measured on
``bench/bench_fair.py``, those waits, not the queue, were the other tenant's slow calls.

So while a level-0 call (its message's kombu ``priority`` 0, or none) younger than ``hold_s``
runs on this worker, a call queued past its tenant's share (a higher priority) waits before it
starts (before its claim) until the level-0 call ends, or at most until it is ``hold_s`` old,
and never longer than ``hold_s`` in all. Calls already running go on; a level-0 call never waits
here. The hold is bounded per waiting call, so neither a long level-0 call nor a stream of
them delays another start by more than ``hold_s`` (far inside its claim deadline), and a
worker running only level-0 calls (every tenant within its share) or only the others (a burst
alone) never holds anything.
Nothing is claimed while held, so exactly-once is untouched: the message is the worker's,
reserved, as it was.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from workers.lifecycle.metrics import metrics


class LevelGate:
    """The worker's level-0 calls in progress, and the wait of its sunk calls behind them."""

    def __init__(self, hold_s: float) -> None:
        #: ``TOOLHUB_FAIR_HOLD_MS`` / 1000; 0 turns the gate off.
        self.hold_s = hold_s
        self._changed = threading.Condition()
        self._started: dict[int, float] = {}  # level-0 call in progress -> when it started
        self._tokens = itertools.count()

    @contextmanager
    def running(self, priority: object) -> Iterator[None]:
        """Around one call's attempt: a level-0 call is counted, a sunk one first waits."""
        if self.hold_s <= 0:
            yield
            return
        if isinstance(priority, int) and priority > 0:  # queued past its tenant's share
            self.wait_turn()
            yield
            return
        with self._changed:
            token = next(self._tokens)
            self._started[token] = time.monotonic()
        try:
            yield
        finally:
            with self._changed:
                del self._started[token]
                self._changed.notify_all()

    def wait_turn(self) -> None:
        """Wait while a level-0 call younger than ``hold_s`` runs on this worker, ``hold_s``
        at most in all: level-0 calls that keep arriving never hold one call longer (the wait
        is counted in ``toolhub_worker_sunk_held_seconds``)."""
        began, held = time.monotonic(), False
        with self._changed:
            while self._started:
                until = min(max(self._started.values()), began) + self.hold_s
                left = until - time.monotonic()
                if left <= 0:
                    break
                self._changed.wait(left)
                held = True
        if held:
            metrics.sunk_held.inc(time.monotonic() - began)
