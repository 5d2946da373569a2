"""Keeps this host's background holder started while a worker of the background queue lives.

Without it the first background commands after a quiet spell each wait in a worker pool thread
while the holder spawns (about 0.4 s: a Python process importing part of toolhub), and a
foreground call arriving meanwhile finds no free thread. The warmer starts the holder as the
worker starts (``worker_init``) and pings it with ``keep`` every third of the holder's idle
window, which restarts that window: the holder stays while some worker on the host lives, and
still exits ``TOOLHUB_HOLDER_IDLE_SECONDS`` after the last one is gone (or after its last
command, whichever is later). A holder killed meanwhile is spawned again at the next tick rather
than by the next command.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from toolhub.distributed.settings import Settings

from .client import HolderClient, idle_seconds

logger = logging.getLogger("toolhub.worker.holder")

#: The shortest pause between two keeps, however short the idle window.
MIN_EVERY_S = 0.2
#: The longest pause after failed keeps: a host where no holder can start (an unwritable
#: ``TOOLHUB_HOME``) must not spawn a doomed Python process every few seconds.
MAX_BACKOFF_S = 300.0


class HolderWarmer(threading.Thread):
    def __init__(self, settings: Settings, home: Path | None = None) -> None:
        super().__init__(name="toolhub-holder-warmer", daemon=True)
        self.client = HolderClient(settings, home)
        self.every_s = max(idle_seconds() / 3, MIN_EVERY_S)
        self.stop_event = threading.Event()
        self.failures = 0

    def run(self) -> None:
        while not self.stop_event.wait(self.tick()):
            pass

    def tick(self) -> float:
        """One keep; returns how long to wait before the next (doubling after each failure)."""
        try:
            kept = self.client.keep()
        except Exception:
            logger.exception("holder warmer failed")
            kept = False
        if kept:
            if self.failures:
                logger.info("background holder answers again at %s", self.client.paths.socket)
            self.failures = 0
            return self.every_s
        self.failures += 1
        if self.failures == 1:
            logger.warning(
                "no background holder answers at %s; background commands will wait for a "
                "live one, or start one, else run in the worker; trying again with backoff",
                self.client.paths.socket,
            )
        return float(min(self.every_s * 2**self.failures, MAX_BACKOFF_S))

    def stop(self) -> None:
        self.stop_event.set()
