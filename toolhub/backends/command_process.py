"""The started process a ``RunningCommand`` (``running.py``) follows: a child of this process,
or a command a shared sandbox's launcher started (``sandbox_host.py``). Both say when they have
ended through a descriptor (a pidfd, or a pipe the launcher's reader writes to), so the command's
reader thread waits on it instead of polling, and both give what the command used where known.
"""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import threading
from typing import IO, Protocol


class CommandProcess(Protocol):
    """The started process a ``RunningCommand`` follows: a child of this process
    (``ChildProcess``) or a command a shared sandbox's launcher started
    (``sandbox_host.HostedProcess``). ``pid`` leads the command's process group."""

    pid: int
    stdout: IO[bytes] | None

    def poll(self) -> int | None: ...

    def wait(self) -> int: ...

    def exit_fd(self) -> int | None:
        """An fd that becomes readable once ``poll`` has the status (None: poll for it)."""
        ...

    def close(self) -> None:
        """Release what ``exit_fd`` holds, once the process has ended."""
        ...

    def rusage(self) -> resource.struct_rusage | None:
        """The ended process's resource use with its waited-for descendants' (None: unknown)."""
        ...


class ChildProcess:
    """A ``subprocess.Popen`` child as a ``CommandProcess``: its end is seen through a pidfd
    where the kernel has them, so nothing polls. It is reaped with ``wait4``, which also gives
    its resource use (only the command's reader thread polls and waits)."""

    def __init__(self, popen: subprocess.Popen[bytes]) -> None:
        self.popen = popen
        self.pid = popen.pid
        self.stdout: IO[bytes] | None = popen.stdout
        self._pidfd = _pidfd(popen.pid)
        self._rusage: resource.struct_rusage | None = None

    def poll(self) -> int | None:
        if self.popen.returncode is None:
            self._wait4(os.WNOHANG)
        return self.popen.returncode

    def wait(self) -> int:
        if self.popen.returncode is None:
            self._wait4(0)
        return self.popen.wait()

    def _wait4(self, options: int) -> None:
        try:
            pid, status, usage = os.wait4(self.pid, options)
        except ChildProcessError:
            return  # reaped elsewhere: Popen's own wait then has the status
        if pid == self.pid:
            self._rusage = usage
            self.popen.returncode = os.waitstatus_to_exitcode(status)

    def rusage(self) -> resource.struct_rusage | None:
        return self._rusage

    def exit_fd(self) -> int | None:
        return self._pidfd

    def close(self) -> None:
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None


class HostedProcess:
    """A command a shared sandbox's launcher started (``sandbox_host.py``): ``pid`` is its
    host pid; the launcher, its parent, reports how it ended (``set_status``, from the
    sandbox's reader thread)."""

    def __init__(self, pid: int, stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self._ended = threading.Event()
        self._signal_read, self._signal_write = os.pipe2(os.O_CLOEXEC)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._ended.wait(timeout):
            raise subprocess.TimeoutExpired(["<hosted command>"], timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def exit_fd(self) -> int | None:
        """Readable once ``poll`` has the status."""
        return self._signal_read

    def close(self) -> None:
        self.wait()
        for fd in (self._signal_read, self._signal_write):
            with contextlib.suppress(OSError):
                os.close(fd)

    def rusage(self) -> resource.struct_rusage | None:
        return None  # the launcher reaps it; its cgroup counts what it used

    def set_status(self, status: int) -> None:
        if self._ended.is_set():
            return
        self.returncode = status
        self._ended.set()
        with contextlib.suppress(OSError):
            os.write(self._signal_write, b"x")


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None
