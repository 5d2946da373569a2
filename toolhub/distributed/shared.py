"""The process's connections to a fleet: one store and one Celery app per Redis URL and prefix.

Every session of a process (and the gateway and the CLI beside them) shares them, so a process
has one Redis connection pool, one pub/sub router and one Celery producer pool per fleet, not
one per session. ``close_shared_backends`` ends them all (tests and scripts that start and stop
Redis servers call it so that no reader thread outlives its server).
"""

from __future__ import annotations

import threading

from celery import Celery

from .celery_app import make_celery
from .enqueue import Enqueuer
from .settings import Settings
from .store import RedisStore

_shared: dict[tuple[str, str], tuple[RedisStore, Celery]] = {}
_enqueuers: dict[int, Enqueuer] = {}
_lock = threading.Lock()


def shared_backend(settings: Settings) -> tuple[RedisStore, Celery]:
    """The store and the Celery app of the fleet ``settings`` name, made on first use."""
    key = (settings.redis_url, settings.prefix)
    with _lock:
        if key not in _shared:
            _shared[key] = (RedisStore.from_settings(settings), make_celery(settings))
        return _shared[key]


def enqueuer_for(app: Celery) -> Enqueuer:
    """The message builder of ``app`` (its templates are made once per task and queue)."""
    with _lock:
        return _enqueuers.setdefault(id(app), Enqueuer(app))


def close_shared_backends() -> None:
    with _lock:
        backends = list(_shared.values())
        _shared.clear()
        _enqueuers.clear()
    for store, app in backends:
        store.close()
        app.close()
