"""Worker heartbeat file: the liveness/readiness signal read by ``workers.lifecycle.healthcheck``.

Why a file and not ``celery inspect ping``: ``inspect ping`` imports the whole app (seconds of
CPU per probe), is itself a task that never runs while every pool slot is busy with a long
call, and restarts workers during a broker outage, which cannot fix anything. A file that
the worker rewrites every few seconds costs nothing to check and says exactly "this process
is still alive and (if ``ready``) connected to the broker".

The worker process runs one ``HeartbeatWriter`` (a service of ``services.py``): it rewrites the
file every ``HEARTBEAT_SECONDS`` with the worker's current state, and at once when the state
changes.

This module is stdlib-only on purpose: the probe runs in the worker container every few
seconds and must not import Celery or toolhub.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading

#: Environment variable that overrides where the heartbeat file lives.
ENV_VAR = "TOOLHUB_HEARTBEAT_FILE"
#: Default path; ``/tmp`` is a writable emptyDir even with a read-only root filesystem.
DEFAULT_PATH = "/tmp/toolhub-worker.heartbeat"
#: ``starting``: process is up, broker not connected yet (alive, not ready).
#: ``ready``: connected to the broker and consuming (alive and ready).
#: ``stopping``: soft shutdown in progress (alive, no longer ready for new work).
STATES = frozenset({"starting", "ready", "stopping"})
#: How often the writer rewrites the file; the probes' ``--max-age`` is well above it.
HEARTBEAT_SECONDS = 10.0

logger = logging.getLogger("toolhub.worker")


def default_path() -> str:
    """Return the heartbeat path: ``$TOOLHUB_HEARTBEAT_FILE`` or :data:`DEFAULT_PATH`."""
    return os.environ.get(ENV_VAR) or DEFAULT_PATH


def beat(path: str | None = None, state: str = "ready") -> None:
    """Write ``state`` to the heartbeat file atomically and refresh its mtime.

    The write goes to a temporary file in the same directory and is then moved over the old
    file with :func:`os.replace`, so a probe running at the same moment reads either the old
    or the new content, never a half-written one. The file's mtime is what the probe measures
    the age by, so it is set explicitly to "now" as well.

    Raises ``ValueError`` for an unknown state: a typo here would otherwise silently turn a
    healthy worker unready.
    """
    if state not in STATES:
        raise ValueError(f"unknown heartbeat state {state!r}; expected one of {sorted(STATES)}")
    target = path or default_path()
    directory = os.path.dirname(os.path.abspath(target))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".heartbeat-", dir=directory)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(state)
        os.replace(tmp, target)
    except BaseException:
        # Never leave temp files behind in /tmp (an emptyDir with a size limit).
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    os.utime(target, None)


class HeartbeatWriter(threading.Thread):
    """Rewrites the heartbeat file with ``state`` every ``every_s`` seconds until stopped. A
    write that fails (a full or read-only ``/tmp``) is logged and tried again at the next beat:
    the probe then reports the worker stale, which is the truth."""

    def __init__(
        self, path: str | None = None, every_s: float = HEARTBEAT_SECONDS, state: str = "starting"
    ) -> None:
        super().__init__(name="toolhub-heartbeat", daemon=True)
        self.path = path
        self.every_s = every_s
        self.state = state
        self._stop_event = threading.Event()

    def set(self, state: str) -> None:
        """Change the state, and write it now (an unknown state raises ``ValueError``; a
        failed write is logged, and tried again at the next beat)."""
        if state not in STATES:
            raise ValueError(f"unknown heartbeat state {state!r}; expected one of {sorted(STATES)}")
        self.state = state
        self._write()

    def _write(self) -> None:
        try:
            beat(self.path, self.state)
        except OSError as exc:
            logger.warning("heartbeat file not written: %s", exc)

    def run(self) -> None:
        while True:
            self._write()
            if self._stop_event.wait(self.every_s):
                return

    def stop(self) -> None:
        self._stop_event.set()
