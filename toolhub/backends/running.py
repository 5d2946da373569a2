"""A started command: its reader thread, its output, and every way of stopping it.

One reader thread per command waits on the pipe and on the process (a pidfd where the kernel
has them, so nothing polls), streams every chunk to the caller's callback the moment it
arrives, keeps a bounded head and tail in memory and writes the full output to a log file.
``kill`` never waits on the command: SIGTERM to the whole group (and its cgroup) at once and
SIGKILL after a grace period, from any thread. ``ProcessRunner`` (process.py) starts them.

The reader thread never dies with the command still running: its log's write errors stay in the
capture (``capture.py``), a caller's output callback that raises is dropped (the output still
goes to memory and the log), and anything else it hits kills the command (nobody would drain
its pipe any more) and ends it with ``reader_error`` set. However it ends, the result is
published and the pipe, the pidfd and the log are closed: a thread stuck on a command that can
never end would hold its call (and a pool thread) forever, and deleted logs' space with it.

When a command ends, what it used is read (its cgroup's CPU time and peak memory, else the
shell's ``wait4`` resource usage), put on its ``CommandResult`` and charged to the usage meter
of the call that started it (captured at the start: the command ends on its reader thread).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from toolhub.core.usage import UsageMeter

from .capture import CapturedOutput, OutputCapture
from .cgroups import CommandCgroup, CommandCgroups
from .command_process import CommandProcess

logger = logging.getLogger("toolhub.backends")

KillReason = Literal["timeout", "cancelled", "killed"]

DRAIN_GRACE_S = 0.25
_READ_SIZE = 256 * 1024
_TICK_S = 0.05

OutputCallback = Callable[[bytes], None]


@dataclass(frozen=True, slots=True)
class CommandResult:
    """How a command ended. ``exit_code`` follows the shell: 128 + N when killed by signal N."""

    exit_code: int | None
    output: CapturedOutput
    duration_s: float
    killed: KillReason | None = None
    signal: str | None = None
    #: What it used: CPU seconds (user + system) and peak memory; None where not counted.
    cpu_seconds: float | None = None
    peak_memory_bytes: int | None = None
    #: The kernel's OOM killer took one of its processes: it reached its memory limit
    #: (``memory_limit_bytes``) or its session's.
    oom_killed: bool = False
    memory_limit_bytes: int | None = None
    #: Set when toolhub stopped reading the command's output (an error of its own): the
    #: command was killed then, and the output is what was read before.
    reader_error: str | None = None


@dataclass(slots=True)
class _KillState:
    reason: KillReason | None = None
    escalation: threading.Timer | None = None


class RunningCommand:
    """A started command. Every method is safe from any thread and returns promptly."""

    def __init__(
        self,
        proc: CommandProcess,
        capture: OutputCapture,
        *,
        cgroup: CommandCgroup | None,
        cgroups: CommandCgroups,
        deadline: float | None,
        on_output: OutputCallback | None,
        kill_grace_s: float,
        meter: UsageMeter | None = None,
    ) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.started_at = time.time()
        self._started_mono = time.monotonic()
        self._capture = capture
        self._cgroup = cgroup
        self._cgroups = cgroups
        self._deadline = deadline
        self._on_output = on_output
        self._kill_grace_s = kill_grace_s
        self._meter = meter
        self._kill = _KillState()
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._result: CommandResult | None = None
        self._callbacks: list[Callable[[CommandResult], None]] = []
        self._reader_error: str | None = None
        self._thread = threading.Thread(target=self._pump, name=f"cmd-{self.pid}", daemon=True)
        self._thread.start()

    @property
    def log_path(self) -> Path | None:
        return self._capture.log_path

    @property
    def done(self) -> bool:
        return self._done.is_set()

    @property
    def result(self) -> CommandResult | None:
        return self._result

    def output(self) -> CapturedOutput:
        """What the command has printed so far."""
        return self._capture.snapshot()

    def wait(self, timeout: float | None = None) -> CommandResult | None:
        """The result, or None if the command is still running after ``timeout`` seconds."""
        self._done.wait(timeout)
        return self._result

    def add_done_callback(self, callback: Callable[[CommandResult], None]) -> None:
        """Run ``callback(result)`` once the command has ended (now, if it already has)."""
        with self._lock:
            if self._result is None:
                self._callbacks.append(callback)
                return
            result = self._result
        callback(result)

    def kill(self, reason: KillReason = "killed") -> bool:
        """SIGTERM the command's group now and SIGKILL it after the grace period. The first
        reason given is the one reported. False when the command had already ended."""
        with self._lock:
            if self._result is not None:
                return False
            first = self._kill.reason is None
            if first:
                self._kill.reason = reason
        if first:
            self._signal(signal.SIGTERM)
            timer = threading.Timer(self._kill_grace_s, self._signal, (signal.SIGKILL,))
            timer.daemon = True
            self._kill.escalation = timer
            timer.start()
        return True

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)
        if self._cgroup is not None:
            self._cgroups.signal_all(self._cgroup, sig)

    # -- the reader thread ---------------------------------------------------------------------

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        pipe = self.proc.stdout.fileno()
        poller = select.poll()
        poller.register(pipe, select.POLLIN | select.POLLHUP | select.POLLERR)
        exit_fd = self.proc.exit_fd()
        if exit_fd is not None:
            poller.register(exit_fd, select.POLLIN)
        pipe_open, exited = True, False
        exited_at = 0.0
        swept: set[signal.Signals] = set()
        try:
            while pipe_open or not exited:
                now = time.monotonic()
                if self._deadline is not None and now >= self._deadline:
                    self.kill("timeout")
                if exited and pipe_open:
                    # Leftovers of a finished command hold the pipe: end them, then stop
                    # listening even if something that escaped the group still holds it.
                    waited = now - exited_at
                    for sig, after in ((signal.SIGTERM, 0.0), (signal.SIGKILL, self._kill_grace_s)):
                        if waited > DRAIN_GRACE_S + after and sig not in swept:
                            swept.add(sig)
                            self._signal(sig)
                    if waited > DRAIN_GRACE_S + self._kill_grace_s + 0.5:
                        break
                for fd, _ in poller.poll(self._poll_ms(now, exited, exit_fd is None)):
                    if fd == pipe:
                        data = _read(pipe)
                        if data:
                            self._capture.write(data)
                            self._stream(data)
                        else:
                            pipe_open = False
                            poller.unregister(pipe)
                    elif fd == exit_fd:
                        poller.unregister(exit_fd)
                if not exited and self.proc.poll() is not None:
                    exited, exited_at = True, time.monotonic()
        except Exception as exc:
            self._reader_error = f"{type(exc).__name__}: {exc}"
            logger.exception("command %d: reading its output failed; killing it", self.pid)
            self._stop_now()
        finally:
            self._finish()

    def _stream(self, data: bytes) -> None:
        """Hand ``data`` to the caller's callback; one that raises gets nothing more (the
        output still goes to memory and the log, and the command goes on)."""
        if self._on_output is None:
            return
        try:
            self._on_output(data)
        except Exception:
            logger.exception("command %d: its output callback failed; streaming stops", self.pid)
            self._on_output = None

    def _stop_now(self) -> None:
        """SIGKILL the command at once: nothing reads its pipe any more."""
        with self._lock:
            if self._kill.reason is None:
                self._kill.reason = "killed"
        self._signal(signal.SIGKILL)

    def _poll_ms(self, now: float, exited: bool, polling: bool) -> int:
        waits = [10_000.0]
        if self._deadline is not None:
            waits.append(self._deadline - now)
        if exited or polling:
            waits.append(_TICK_S)
        return max(1, int(min(waits) * 1000))

    def _finish(self) -> None:
        """Reap the command, release what it held and publish its result: the result is
        published whatever fails on the way."""
        code: int | None = None
        cpu, peak, oom = None, None, False
        try:
            code = self.proc.wait()
            cpu, peak, oom = self._used()
        except Exception as exc:
            self._reader_error = self._reader_error or f"{type(exc).__name__}: {exc}"
            logger.exception("command %d: ending it failed", self.pid)
        finally:
            self._release()
            self._publish(code, cpu, peak, oom)

    def _release(self) -> None:
        """Close the pidfd, the pipe and the log; kill leftovers; hand the cgroup back."""
        if self._kill.escalation is not None:
            self._kill.escalation.cancel()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            self.proc.close()
        if self._cgroup is not None:
            self._cgroups.remove_later(self._cgroup)
        if self.proc.stdout is not None:
            with contextlib.suppress(OSError):
                self.proc.stdout.close()
        self._capture.close()

    def _publish(self, code: int | None, cpu: float | None, peak: int | None, oom: bool) -> None:
        sig_name = None
        if code is not None and code < 0:
            sig_name = signal.Signals(-code).name
            code = 128 - code
        elif code is not None and code > 128:
            with contextlib.suppress(ValueError):
                sig_name = signal.Signals(code - 128).name
        result = CommandResult(
            exit_code=code,
            output=self._capture.snapshot(),
            duration_s=time.monotonic() - self._started_mono,
            killed=self._kill.reason,
            signal=sig_name,
            cpu_seconds=cpu,
            peak_memory_bytes=peak,
            oom_killed=oom,
            memory_limit_bytes=None if self._cgroup is None else self._cgroup.memory_bytes,
            reader_error=self._reader_error,
        )
        if self._meter is not None:
            self._meter.charge(cpu_seconds=cpu or 0.0, peak_memory_bytes=peak or 0)
        with self._lock:
            self._result = result
            callbacks, self._callbacks = self._callbacks, []
        self._done.set()
        for callback in callbacks:
            try:
                callback(result)
            except Exception:
                logger.exception("command %d: a done callback failed", self.pid)

    def _used(self) -> tuple[float | None, int | None, bool]:
        """CPU seconds, peak memory and whether the OOM killer struck: from the cgroup where
        the command has one (every process of it), and the shell's ``wait4`` for what the
        cgroup does not count."""
        usage = self.proc.rusage()
        cpu = None if usage is None else usage.ru_utime + usage.ru_stime
        peak = None if usage is None else usage.ru_maxrss * 1024
        if self._cgroup is None:
            return cpu, peak, False
        counted = self._cgroups.usage(self._cgroup)
        return (
            counted.cpu_seconds if counted.cpu_seconds is not None else cpu,
            counted.peak_memory_bytes if counted.peak_memory_bytes is not None else peak,
            counted.oom_kills > 0,
        )


def _read(fd: int) -> bytes:
    """Read what the pipe holds (poll said it is readable, so this never blocks)."""
    try:
        return os.read(fd, _READ_SIZE)
    except OSError:
        return b""
