"""One worker process from start to exit: its checks, its runtime, and its services, by the
moment of Celery's worker life each belongs to.

* ``check`` (as Celery builds the worker, right after ``worker_init``): the command sandbox
  (``guards/sandboxing.py``: the worker refuses to start, exit 2, when it cannot enforce it),
  the kernel limits (``guards/kernel_limits.py``: its protective ``oom_score_adj``, and the
  probe of its commands' cgroups, which refuses to start under ``TOOLHUB_KERNEL_LIMITS=require``),
  heartbeat ``starting``, and the runtime with the fleet key (``calls/refusals.py``: refuses
  to start when signatures are required without one).
* ``start`` (the ``WorkerServices`` bootstep starts, before the consumer connects): the
  OpenTelemetry exporters when ``OTEL_*`` asks for them (``toolhub/tracing``), the heartbeat
  writer, the ``/metrics`` listener, and the warmer of the host's background holder
  (``holder/warmer.py``) when this worker takes background commands.
* ``ready`` (the broker connection is up, Celery's ``worker_ready``): the lease keeper, the
  control listener, the backlog promoter of its queues (``promoter.py``); the startup heap is
  frozen out of garbage collection and full collections are spaced
  (``toolhub/process_heap.py``); heartbeat ``ready``.
* ``shutting_down`` (warm shutdown asked, ``worker_shutting_down``): heartbeat ``stopping``,
  and a timer that hands calls still running after ``TOOLHUB_SOFT_SHUTDOWN_SECONDS`` back to
  the queue.
* ``stopped`` (Celery's pool has drained, ``worker_shutdown``): every service stopped in
  reverse order (``services.py``), the runtime closed, the telemetry flushed, and a watchdog
  that ends the process if it is still there ``EXIT_DEADLINE_SECONDS`` later.

The services outlive the pool's drain on purpose: calls still running during a soft shutdown
keep their leases renewed and still hear their cancels.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from celery import Celery

from toolhub.distributed.messages import PoisonMessage
from toolhub.distributed.settings import ALL_QUEUES, QUEUES, Settings
from toolhub.process_heap import freeze_startup_heap, space_full_collections
from toolhub.tracing import setup_from_env, shutdown
from workers.calls.refusals import Refusals, announce, worker_fleet_keys
from workers.calls.runtime import WorkerRuntime
from workers.guards.kernel_limits import install_kernel_limits
from workers.guards.sandboxing import install_worker_sandbox
from workers.holder.client import enabled as holder_enabled
from workers.holder.warmer import HolderWarmer

from .control import ControlListener
from .heartbeat import HeartbeatWriter
from .leases import LeaseKeeper
from .metrics import MetricsListener, metrics
from .promoter import BacklogPromoter
from .services import Services, Timer

logger = logging.getLogger("toolhub.worker")

#: After Celery says it has shut down, the process must be gone within this long. kombu's
#: Redis transport can leave it hanging after a broker connection loss (a thread blocked in
#: teardown); a supervisor only restarts processes that exit, and leases recover any call.
EXIT_DEADLINE_SECONDS = 10.0
#: The soft-shutdown timer's service name.
HAND_BACK = "toolhub-hand-back"


class WorkerProcess:
    """The worker process's runtime and services (``boot.py`` makes one per app)."""

    def __init__(self, app: Celery, settings: Settings) -> None:
        self.app = app
        self.settings = settings
        self.services = Services()
        self.heartbeat = HeartbeatWriter()
        self._runtime: WorkerRuntime | None = None
        self._refusals: Refusals | None = None
        self._lock = threading.Lock()

    def runtime(self) -> WorkerRuntime:
        """The runtime, made on first use (by ``check`` in a worker)."""
        with self._lock:
            if self._runtime is None:
                keys = worker_fleet_keys()  # exits when signatures are required but impossible
                self._runtime = WorkerRuntime(self.settings, self.app, keys)
                self._refusals = Refusals(self._runtime.store, self._runtime.name, keys)
            return self._runtime

    def refusals(self) -> Refusals:
        self.runtime()
        assert self._refusals is not None
        return self._refusals

    def refuse_poison(self, raw: bytes, queue: str, poison: PoisonMessage) -> None:
        """The queue screen's sink (``guards/poison.py``)."""
        self.refusals().refuse(
            raw, queue, poison.reason, poison.why, call_id=poison.call_id, run_id=poison.run_id
        )

    # -- the moments of the worker's life, in order ---------------------------------------------

    def check(self) -> None:
        install_worker_sandbox(self.settings)  # refuses to start (exit 2) when not enforceable
        install_kernel_limits()  # TOOLHUB_KERNEL_LIMITS=require: refuses without cgroups
        self.heartbeat.set("starting")
        self.runtime()

    def start(self) -> None:
        setup_from_env("toolhub-worker")  # OTel traces and metrics when OTEL_* asks for them
        self.services.start(self.heartbeat, MetricsListener(metrics.registry))
        if holder_enabled() and self.serves_background():  # it spawns while the broker connects
            self.services.start(HolderWarmer(self.settings))

    def serves_background(self) -> bool:
        """Whether this worker takes background commands, and so wants its host's holder kept:
        a worker of the fast or command queue alone (the chart runs one deployment per queue)
        never hands a command over, and its pod would carry an idle holder for nothing. Celery
        has selected the worker's queues before its bootsteps start."""
        return QUEUES["background"] in self.consumed()

    def consumed(self) -> tuple[str, ...]:
        """The queues this worker takes calls from (every queue when Celery names none)."""
        return tuple(self.app.amqp.queues.consume_from or ALL_QUEUES)

    def ready(self) -> None:
        runtime = self.runtime()
        announce(self.refusals().keys)
        promoter = BacklogPromoter(runtime, self.consumed())
        self.services.start(LeaseKeeper(runtime), ControlListener(runtime), promoter)
        metrics.heap_frozen.set(freeze_startup_heap())
        space_full_collections()
        self.heartbeat.set("ready")

    def shutting_down(self) -> None:
        self.heartbeat.set("stopping")
        if HAND_BACK in self.services.names:  # a second signal: the first one's timer runs
            return
        seconds = self.settings.soft_shutdown_seconds
        self.services.start(Timer(HAND_BACK, seconds, self.runtime().hand_back_all))

    def stopped(self) -> None:
        threading.Thread(target=_exit_if_stuck, name="toolhub-exit-watchdog", daemon=True).start()
        self.services.stop()
        if self._runtime is not None:
            self._runtime.close()
        shutdown()  # what the span and metric batches still hold goes out before the exit


def _exit_if_stuck() -> None:
    """The last resort, never stopped: it ends a process that did not exit by itself."""
    time.sleep(EXIT_DEADLINE_SECONDS)
    logger.error("worker did not exit %.0fs after shutdown; forcing exit", EXIT_DEADLINE_SECONDS)
    os._exit(1)
