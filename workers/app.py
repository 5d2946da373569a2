"""The Celery app of toolhub workers: ``celery -A workers.app:app worker`` or ``toolhub worker``.

Configuration comes from ``toolhub.distributed.celery_app`` (msgpack only, late acks, reject on
worker lost, prefetch 1, visibility timeout above the longest run, soft shutdown, task events)
with every tunable read from ``TOOLHUB_*`` variables. Worker signals wire up the process: at
init the command sandbox (``sandboxing.py``: the worker refuses to start if it cannot enforce
it), the fleet key (``refusals.py``: refuses to start when signatures are required without
one), heartbeat ``starting`` and the warmer of the host's background holder
(``holder_warmer.py``), the lease keeper and control listener once the broker connection is up
(heartbeat ``ready``; the startup heap is then frozen out of garbage collection and full
collections are spaced, ``toolhub/process_heap.py``), and on warm shutdown a timer that hands
calls still running after ``TOOLHUB_SOFT_SHUTDOWN_SECONDS`` back to the queue.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from celery.signals import worker_init, worker_ready, worker_shutdown, worker_shutting_down

from toolhub.distributed.celery_app import make_celery
from toolhub.distributed.messages import PoisonMessage
from toolhub.distributed.settings import QUEUES, Settings
from toolhub.fences.kombu import guard_detached_channels
from toolhub.process_heap import freeze_startup_heap, space_full_collections
from workers.heartbeat import beat

from .celery_tasks import register_tasks
from .control import ControlListener
from .holder_client import enabled as holder_enabled
from .holder_warmer import HolderWarmer
from .late_claims import LateClaimer
from .leases import LeaseKeeper
from .metrics import metrics
from .observe import install as install_observability
from .poison import install as install_queue_screen
from .refusals import Refusals, announce, worker_fleet_keys
from .runtime import WorkerRuntime
from .sandboxing import install_worker_sandbox

logger = logging.getLogger("toolhub.worker")

guard_detached_channels()  # survive a Redis restart (toolhub/fences/kombu.py)
settings = Settings.from_env()
#: Task events are published in batches (workers/consumer.py).
app = make_celery(settings, main="workers", events="workers.consumer:WorkerEvents")
app.conf.worker_consumer = "workers.consumer:Consumer"

HEARTBEAT_SECONDS = 10.0
#: After Celery says it has shut down, the process must be gone within this long. kombu's
#: Redis transport can leave it hanging after a broker connection loss (a thread blocked in
#: teardown); a supervisor only restarts processes that exit, and leases recover any call.
EXIT_DEADLINE_SECONDS = 10.0


class _Process:
    """The worker process's runtime and background threads, created on ``worker_init``."""

    def __init__(self) -> None:
        self.runtime: WorkerRuntime | None = None
        self._refusals: Refusals | None = None
        self.state = "starting"
        self.stop = threading.Event()
        self.threads: list[LeaseKeeper | ControlListener | HolderWarmer | LateClaimer] = []
        self._lock = threading.Lock()

    def get(self) -> WorkerRuntime:
        with self._lock:
            if self.runtime is None:
                keys = worker_fleet_keys()  # exits when signatures are required but impossible
                self.runtime = WorkerRuntime(settings, app, keys)
                self._refusals = Refusals(self.runtime.store, self.runtime.name, keys)
            return self.runtime

    def refusals(self) -> Refusals:
        self.get()
        assert self._refusals is not None
        return self._refusals

    def refuse_poison(self, raw: bytes, queue: str, poison: PoisonMessage) -> None:
        """The queue screen's sink (``poison.py``)."""
        self.refusals().refuse(
            raw, queue, poison.reason, poison.why, call_id=poison.call_id, run_id=poison.run_id
        )

    def heartbeat(self) -> None:
        while True:
            try:
                beat(state=self.state)
            except OSError as exc:
                logger.warning("heartbeat file not written: %s", exc)
            if self.stop.wait(HEARTBEAT_SECONDS):
                return


process = _Process()
register_tasks(app, process.get, process.refusals)
install_queue_screen(process.refuse_poison)  # a bad queue item is dead-lettered (poison.py)
# JSON logs, the /metrics listener and redacted inspection (workers/observe.py).
install_observability(settings)


def _on_init(**_: Any) -> None:
    install_worker_sandbox(settings)  # refuses to start (exit 2) when it cannot be enforced
    beat(state="starting")
    threading.Thread(target=process.heartbeat, name="toolhub-heartbeat", daemon=True).start()
    process.get()
    if holder_enabled() and _serves_background():  # it spawns while the broker connects
        warmer = HolderWarmer(settings)
        warmer.start()
        process.threads.append(warmer)


def _serves_background() -> bool:
    """Whether this worker takes background commands, and so wants its host's holder kept: a
    worker of the fast or command queue alone (the chart runs one deployment per queue) never
    hands a command over, and its pod would carry an idle holder for nothing. Celery has
    selected the worker's queues by ``worker_init``."""
    consumed = app.amqp.queues.consume_from
    return not consumed or QUEUES["background"] in consumed


def _on_ready(**_: Any) -> None:
    runtime = process.get()
    announce(process.refusals().keys)
    threads: list[LeaseKeeper | ControlListener | LateClaimer] = [
        LeaseKeeper(runtime),
        ControlListener(runtime),
        LateClaimer(runtime),
    ]
    process.threads.extend(threads)
    for thread in threads:
        thread.start()
    metrics.heap_frozen.set(freeze_startup_heap())
    space_full_collections()
    process.state = "ready"
    beat(state="ready")


def _on_shutting_down(**_: Any) -> None:
    process.state = "stopping"
    beat(state="stopping")
    timer = threading.Timer(settings.soft_shutdown_seconds, process.get().hand_back_all)
    timer.daemon = True
    timer.start()


def _exit_if_stuck() -> None:
    time.sleep(EXIT_DEADLINE_SECONDS)
    logger.error("worker did not exit %.0fs after shutdown; forcing exit", EXIT_DEADLINE_SECONDS)
    os._exit(1)


def _on_shutdown(**_: Any) -> None:
    threading.Thread(target=_exit_if_stuck, name="toolhub-exit-watchdog", daemon=True).start()
    process.stop.set()
    for thread in process.threads:
        thread.stop()
    if process.runtime is not None:
        process.runtime.close()


worker_init.connect(_on_init)
worker_ready.connect(_on_ready)
worker_shutting_down.connect(_on_shutting_down)
worker_shutdown.connect(_on_shutdown)
