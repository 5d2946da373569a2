"""Child processes of the local stack, each in its own process group, restarted with backoff
when they crash and stopped for good with nothing left behind.

Own process groups mean a Ctrl-C in the terminal reaches only ``toolhub up``, which then stops
the children in order (workers get their warm shutdown). Stopping kills the whole group and,
on Linux, any descendant that moved to a group of its own (a tool's command), TERM first, KILL
after a grace period.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger("toolhub.stack")

MIN_BACKOFF_S = 0.5
MAX_BACKOFF_S = 30.0
STABLE_AFTER_S = 30.0
POLL_S = 0.2

Report = Callable[[str], None]


@dataclass
class ChildSpec:
    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    cwd: Path | None = None
    stop_grace_s: float = 10.0


class Child:
    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.restarts = 0
        self.failures = 0
        self.restart_at: float | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        self.spec.log.parent.mkdir(parents=True, exist_ok=True)
        with self.spec.log.open("ab") as log:
            self.proc = subprocess.Popen(
                self.spec.argv,
                env={**os.environ, **self.spec.env},
                cwd=self.spec.cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.started_at = time.monotonic()
        self.restart_at = None

    def stop(self) -> None:
        """TERM the group (and stray descendants), KILL whatever is left after the grace."""
        if self.proc is None:
            return
        family = descendants(self.proc.pid)
        _signal(self.proc.pid, family, signal.SIGTERM)
        try:
            self.proc.wait(self.spec.stop_grace_s)
        except subprocess.TimeoutExpired:
            logger.warning(
                "%s did not stop within %ss; killing it", self.spec.name, self.spec.stop_grace_s
            )
        family |= descendants(self.proc.pid)
        _signal(self.proc.pid, family, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)

    def tail(self, lines: int = 20) -> str:
        try:
            text = self.spec.log.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


class Supervisor:
    """Starts children and keeps them running until ``stop_all``."""

    def __init__(self, report: Report | None = None) -> None:
        self.report = report or (lambda message: logger.info(message))
        self.children: list[Child] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._watcher: threading.Thread | None = None

    def add(self, spec: ChildSpec) -> Child:
        child = Child(spec)
        with self._lock:
            child.start()
            self.children.append(child)
        if self._watcher is None:
            self._watcher = threading.Thread(
                target=self._watch, name="toolhub-supervisor", daemon=True
            )
            self._watcher.start()
        return child

    def _watch(self) -> None:
        while not self._stopping.wait(POLL_S):
            with self._lock:
                for child in self.children:
                    self._check(child)

    def _check(self, child: Child) -> None:
        now = time.monotonic()
        if child.restart_at is not None:
            if now >= child.restart_at and not self._stopping.is_set():
                child.restarts += 1
                child.start()
                self.report(f"{child.spec.name} restarted (restart #{child.restarts})")
            return
        if child.alive or child.proc is None:
            return
        code = child.proc.returncode
        if now - child.started_at >= STABLE_AFTER_S:
            child.failures = 0
        delay = min(MAX_BACKOFF_S, MIN_BACKOFF_S * 2**child.failures)
        child.failures += 1
        child.restart_at = now + delay
        self.report(f"{child.spec.name} exited with code {code}; restarting in {delay:g}s")

    def stop_all(self) -> None:
        """Stop every child, last started first (the gateway before the workers before Redis)."""
        self._stopping.set()
        if self._watcher is not None:
            self._watcher.join(timeout=5)
        with self._lock:
            children = list(reversed(self.children))
        for child in children:
            child.stop()


def descendants(pid: int) -> set[int]:
    """Every descendant of ``pid`` (Linux ``/proc``; empty elsewhere)."""
    parents: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return set()
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[int] = set()
    stack = [pid]
    while stack:
        for child in parents.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


def _signal(leader: int, family: set[int], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, sig)
    for pid in family:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
