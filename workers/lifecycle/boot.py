"""``boot``: everything a toolhub worker app installs into its process, in one place, once.

``workers/app.py`` calls it right after it makes the Celery app; nothing else in ``workers``
patches or hooks anything when imported. It installs, in order:

1. the kombu guard that lets a worker reconnect after a Redis restart
   (``toolhub/fences/kombu.py``);
2. the tasks (``calls/celery_tasks.py``), bound to this process's ``WorkerProcess``;
3. the queue screen, which dead-letters a bad queue item instead of dying on it
   (``guards/poison.py``): before any channel is made, so in every process that imports the
   app (Flower and ``celery inspect`` too, whose replies it lets through);
4. JSON logs and redacted remote inspection (``observe.py``);
5. the ``WorkerServices`` bootstep in the worker blueprint, and the worker signals Celery has
   no bootstep moment for: ``worker_ready`` (the consumer's first connection),
   ``worker_shutting_down`` (the signal handler) and ``worker_shutdown`` (after the pool has
   drained, which every blueprint step's ``stop`` precedes). What each moment does is
   ``process.py``.

Importing the app in a process that runs no worker (Flower, ``celery inspect``) builds no
blueprint, so no check runs and no thread starts there.
"""

from __future__ import annotations

from typing import Any, ClassVar

from celery import Celery, bootsteps
from celery.signals import worker_ready, worker_shutdown, worker_shutting_down

from toolhub.distributed.settings import Settings
from toolhub.fences.kombu import guard_detached_channels
from workers.calls.celery_tasks import register_tasks
from workers.guards.poison import install as install_queue_screen

from .observe import install as install_observability
from .process import WorkerProcess


class WorkerServices(bootsteps.StartStopStep):  # type: ignore[misc]
    """The worker blueprint's toolhub step: built right after ``worker_init`` (the process's
    checks: it refuses to start without its sandbox or fleet key), started before the consumer
    connects (the services of ``WorkerProcess.start``). It stops nothing itself: the services
    outlive the pool's drain and stop on ``worker_shutdown``."""

    label = "toolhub services"
    #: The process of this app (``boot`` sets it; one app per worker process).
    process: ClassVar[WorkerProcess | None] = None

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._process().check()

    def start(self, parent: Any) -> None:
        self._process().start()

    def _process(self) -> WorkerProcess:
        assert self.process is not None, "boot() was not called"
        return self.process


def boot(app: Celery, settings: Settings) -> WorkerProcess:
    """Install the worker's patches, tasks, bootstep and signal hookups into ``app``'s
    process; returns its ``WorkerProcess``."""
    guard_detached_channels()
    process = WorkerProcess(app, settings)
    register_tasks(app, process.runtime, process.refusals)
    install_queue_screen(process.refuse_poison)
    install_observability(settings)
    WorkerServices.process = process
    app.steps["worker"].add(WorkerServices)

    def on_ready(**_: Any) -> None:
        process.ready()

    def on_shutting_down(**_: Any) -> None:
        process.shutting_down()

    def on_shutdown(**_: Any) -> None:
        process.stopped()

    worker_ready.connect(on_ready, weak=False)
    worker_shutting_down.connect(on_shutting_down, weak=False)
    worker_shutdown.connect(on_shutdown, weak=False)
    return process
