"""Runtime state in a JSON file, for embedded sessions.

Writes are atomic (temp file + rename, so a reader never sees half a file), debounced (a burst
of calls costs one write), and flushed on close. A corrupt or foreign file is reported, moved
aside and replaced — never a crash — and unknown keys in it are ignored.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from toolhub.backends.workspace import atomic_write
from toolhub.core import Container

logger = logging.getLogger("toolhub.state")

FORMAT = "toolhub.state/1"


class StateFile:
    """Loads a container's persisted values from a file and writes them back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.problems: list[str] = []

    def load_into(self, container: Container) -> bool:
        """Restore state; False (and a reported problem) when the file was unusable."""
        try:
            raw = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return False
        except OSError as exc:
            return self._reject(f"cannot read {self.path}: {exc}")
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            return self._reject(f"state file {self.path} is corrupt ({exc})")
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            return self._reject(f"state file {self.path} is not a toolhub state file")
        skipped = container.load(data)
        for resource_id in skipped:
            self.problems.append(f"state {resource_id!r} in {self.path} no longer fits; reset")
        return True

    def _reject(self, problem: str) -> bool:
        logger.warning("%s; starting with fresh state", problem)
        self.problems.append(problem)
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        with contextlib.suppress(OSError):
            os.replace(self.path, aside)
        return False

    def write(self, container: Container) -> None:
        payload: dict[str, Any] = {"format": FORMAT, **container.serialize()}
        atomic_write(self.path, json.dumps(payload, indent=2, sort_keys=True).encode("utf-8"))


class DebouncedWriter:
    """Writes the container's state at most once per ``delay`` after a change.

    ``notify`` is called after every call and costs a version comparison; the actual write
    happens on a background thread, off the call's hot path.
    """

    def __init__(self, container: Container, state: StateFile, delay: float = 0.5) -> None:
        self.container = container
        self.state = state
        self.delay = delay
        self._written = container.version
        self._wake = threading.Event()
        self._closed = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="toolhub-state", daemon=True)
        self._thread.start()

    def notify(self) -> None:
        if self.container.version != self._written:
            self._wake.set()

    def _loop(self) -> None:
        while not self._closed:
            self._wake.wait()
            if self._closed:
                return
            time.sleep(self.delay)
            self._wake.clear()
            self.flush()

    def flush(self) -> None:
        with self._lock:
            version = self.container.version
            if version == self._written:
                return
            try:
                self.state.write(self.container)
                self._written = version
            except OSError as exc:
                logger.error("could not write state to %s: %s", self.state.path, exc)

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._thread.join(timeout=5)
        self.flush()
