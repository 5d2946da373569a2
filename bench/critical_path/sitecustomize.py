"""Phase marks inside a worker process, for ``bench/bench_critical_path.py`` only.

Python imports this module at start-up when its folder is on ``PYTHONPATH``; it does nothing
unless ``BENCH_PHASES`` names a folder and the process is a Celery or toolhub worker. It then
wraps, at ``worker_init`` (before the consumer connects and builds its tracers), the functions
a message passes through, and records the wall-clock time each one is entered. Both kinds of
worker get the same Celery and kombu marks; toolhub's also get its finish (or one-step claim
and finish), the raw Celery baseline its result store. Marks are kept in memory and written out
by a thread every 0.1 s, so recording one costs no system call on the measured path.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

_FOLDER = os.environ.get("BENCH_PHASES")
_MARKS: list[tuple[float, str]] = []


def _wrap(owner: Any, name: str, tag: str, returned: str | None = None) -> None:
    """Mark ``tag`` when ``owner.name`` is entered (and ``returned`` when it returns)."""
    original = getattr(owner, name)

    def marked(*args: Any, **kwargs: Any) -> Any:
        _MARKS.append((time.time(), tag))  # list.append is atomic under the GIL
        value = original(*args, **kwargs)
        if returned is not None:
            _MARKS.append((time.time(), returned))
        return value

    setattr(owner, name, marked)


def _writer(path: str) -> Callable[[], None]:
    def run() -> None:
        with open(path, "a", encoding="utf-8") as out:
            while True:
                time.sleep(0.1)
                taken = len(_MARKS)
                out.writelines(f"{t:.6f} {tag}\n" for t, tag in _MARKS[:taken])
                del _MARKS[:taken]
                out.flush()

    return run


def _on_init(sender: Any = None, **_: Any) -> None:
    import celery.concurrency.thread as thread_pool
    from kombu.transport import redis as kombu_redis

    app = sender.app
    _wrap(kombu_redis.Channel, "_brpop_read", "read")  # the reply to BRPOP is on the socket
    _wrap(thread_pool.TaskPool, "on_apply", "pool")  # the consumer hands it to the pool
    _wrap(thread_pool, "apply_target", "thread")  # a pool thread has it
    for name in ("toolhub.execute", "baseline.noop"):
        if name in app.tasks:
            _wrap(app.tasks[name], "run", "body")  # the task function is called
    if "toolhub.execute" in app.tasks:
        from toolhub.distributed.records import CallRecords

        _wrap(CallRecords, "finish", "finish")
    else:
        from celery.backends.redis import RedisBackend

        _wrap(RedisBackend, "set", "store")
    path = os.path.join(_FOLDER or ".", f"{os.getpid()}.marks")
    threading.Thread(target=_writer(path), name="bench-marks", daemon=True).start()


if _FOLDER and "worker" in sys.argv:
    from celery.signals import worker_init

    worker_init.connect(_on_init, weak=False)
