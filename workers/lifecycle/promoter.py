"""The backlog promoter: one thread per worker that keeps its queues' sunk lists fed from their
backlogs (``toolhub/distributed/backlog.py``).

A call past its tenant's fair share beyond the sunk list's window waits as its id in the
queue's backlog, with no message a worker could pop. Each worker of the queue looks every
``BUSY_SECONDS`` while a backlog waits (every sixth of a lease otherwise) and, once the sunk
list is down to half the window, tops it up from the backlog's oldest ids, building each
call's message from its record as the sweep's re-enqueue does. Every worker of the queue
promotes, so a backlog drains while any of them lives; the script moves an id and its message
in one step, so none is lost with a worker, and concurrent promoters act on each id once.
"""

from __future__ import annotations

import logging
import random
import threading
from typing import Any

from redis.exceptions import RedisError

from toolhub.distributed.settings import DEFAULT_BACKLOG_WINDOW
from workers.calls.runtime import WorkerRuntime

logger = logging.getLogger("toolhub.worker.backlog")

#: How often a worker looks while a backlog waits: half a window must outlast it.
BUSY_SECONDS = 0.2


class BacklogPromoter(threading.Thread):
    def __init__(self, runtime: WorkerRuntime, queues: tuple[str, ...]) -> None:
        super().__init__(name="toolhub-backlog", daemon=True)
        self.runtime = runtime
        self.queues = queues
        self.stop_event = threading.Event()
        #: A worker set to no window still promotes what a dispatcher backlogged.
        self.window = runtime.settings.backlog_window or DEFAULT_BACKLOG_WINDOW

    def run(self) -> None:
        idle = self.runtime.settings.lease_seconds / 6
        while True:
            waiting = 0
            for queue in self.queues:
                try:
                    waiting += self.promote(queue)
                except RedisError as exc:
                    logger.warning("backlog of %s: Redis unreachable: %s", queue, exc)
                except Exception:
                    logger.exception("backlog of %s: promotion failed; continuing", queue)
            pause = BUSY_SECONDS if waiting else idle
            if self.stop_event.wait(pause * random.uniform(0.75, 1.25)):
                return

    def promote(self, queue: str) -> int:
        """One round for ``queue``; returns how many ids its backlog held before it."""
        promotion = self.runtime.backlogs.promote(
            queue, lambda message, trace: self.build(message, trace, queue), self.window
        )
        return promotion.waiting

    def build(
        self, message: dict[str, Any], trace: dict[str, Any] | None, queue: str
    ) -> bytes | None:
        """The call's level-0 message on ``queue``, with its trace context, as kombu builds it."""
        captured = self.runtime.capture(message, queue, trace)
        if captured is None or captured[0] != queue.encode():
            return None
        return captured[1]

    def stop(self) -> None:
        self.stop_event.set()
