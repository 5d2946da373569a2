"""The one interface of every background thread a worker process runs: a named ``Service``
with ``start`` and ``stop``, kept in a ``Services`` stack that starts them in order and stops
them in reverse, as Celery's bootsteps do with its own parts.

A worker's services (``process.py``) are the heartbeat writer, the ``/metrics`` listener, the
holder warmer, the lease keeper, the control listener, the late claimer and the soft-shutdown
hand-back timer. Each is started once, by name, when the worker reaches the moment it belongs
to, and all of them are stopped together once the worker's pool has drained. A service that
fails to stop is logged and the others are still stopped: a worker that is shutting down must
not hang on its own housekeeping.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

logger = logging.getLogger("toolhub.worker.services")


class Service(Protocol):
    """A named part of the worker process that runs beside its calls (usually a thread)."""

    @property
    def name(self) -> str: ...

    def start(self) -> None: ...

    def stop(self) -> None: ...


class Services:
    """The started services of one process: ``start`` in order, ``stop`` in reverse. Thread-safe
    (Celery starts some from its consumer thread and stops them from its main thread)."""

    def __init__(self) -> None:
        self._started: list[Service] = []
        self._lock = threading.Lock()

    def start(self, *services: Service) -> None:
        """Start each of ``services`` in order; a name already started is refused (a service
        is started once)."""
        for service in services:
            with self._lock:
                if service.name in self._names():
                    raise ValueError(f"service {service.name!r} is already started")
            logger.debug("starting %s", service.name)
            service.start()
            with self._lock:
                self._started.append(service)

    def stop(self) -> None:
        """Stop every started service, the last started first."""
        with self._lock:
            started, self._started = self._started, []
        for service in reversed(started):
            logger.debug("stopping %s", service.name)
            try:
                service.stop()
            except Exception:
                logger.exception("service %s failed to stop", service.name)

    @property
    def names(self) -> list[str]:
        """The started services' names, in the order they started."""
        with self._lock:
            return self._names()

    def _names(self) -> list[str]:
        return [service.name for service in self._started]


class Timer(threading.Thread):
    """Runs ``action`` once, ``seconds`` after ``start``, unless stopped first."""

    def __init__(self, name: str, seconds: float, action: Callable[[], None]) -> None:
        super().__init__(name=name, daemon=True)
        self.seconds = seconds
        self.action = action
        self._stopped = threading.Event()

    def run(self) -> None:
        if not self._stopped.wait(self.seconds):
            self.action()

    def stop(self) -> None:
        self._stopped.set()
