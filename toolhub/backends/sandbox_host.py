"""One bwrap sandbox per session policy, shared by that session's commands in this process.

Starting a sandbox is most of what a sandboxed command costs to start (namespaces and mounts,
against a fork and an exec for its shell), and a worker hosting
hundreds of long commands spends its cores on starting sandboxes while the output of the
commands already running waits for them. So the sandbox is started once per policy (the bwrap
argv names the policy whole: the session's workspace, its private tmp, what is hidden, the
network) and its first process, ``toolhub/sandbox/launcher.py``, starts each command inside it
on request (the protocol is described there).

What does not change for a command: it is confined by the same mounts and namespaces; it runs
in a session of its own, so ``killpg`` of its leader's host pid reaches its whole group; it is
moved into its pids cgroup before it execs (the launcher holds it until the cgroup join is
done), with its ulimits set; it dies with the process that started it (the sandbox's first
process gets the parent-death signal, and the end of a pid namespace's first process kills
every process in it). What does: the commands of one session on one worker share a pid
namespace and a loopback network, so they can see each other's processes. They are one
agent's commands, with one workspace and one tmp already.

A sandbox with no command running closes after ``IDLE_SECONDS``. If its launcher dies (a
command can kill it), the commands it ran are reported killed by ``SIGKILL``, which is what
the kernel did to them, and the next command starts a new sandbox.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import json
import logging
import os
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from .command_process import HostedProcess
from .sandbox_spawn import FD_PLACEHOLDER, WORKSPACE_FD_PLACEHOLDER, host_pid, spawn
from .start_gate import START_GATE

logger = logging.getLogger("toolhub.sandbox")

#: A sandbox with no command running is closed after this long (or sooner:
#: ``shared_start.MAX_SANDBOXES``).
IDLE_SECONDS = 30.0
#: How long a command's start may take before the sandbox is given up as stuck.
START_TIMEOUT_S = 30.0
#: How long after a command's process is gone its status may take to come: past that the
#: launcher is stuck (a command of the session can stop it) and the sandbox is ended, its
#: commands reported killed, rather than leave their calls waiting for ever.
STATUS_GRACE_S = 10.0
#: Requests larger than this (a command of hundreds of kilobytes) start a sandbox of their own.
MAX_REQUEST = 192 * 1024


class HostLost(RuntimeError):
    """The sandbox's launcher is gone (or never answered): the command did not start."""


class StartRefused(HostLost):
    """This command cannot start in the shared sandbox (too large a request, descriptors the
    kernel would not pass, a pidfd the launcher could not open), which is still fine: the
    command starts in a sandbox of its own instead, and the shared one stays."""


class SandboxHost:
    """One running sandbox and its launcher. Every method is safe from any thread.

    One thread per sandbox reads the launcher's answers and watches each running command's
    pidfd: a command whose process is gone but whose status has not come within
    ``STATUS_GRACE_S`` means the launcher is stuck, and the sandbox is ended."""

    def __init__(
        self,
        argv: Sequence[str],
        env: dict[str, str],
        *,
        on_closed: Callable[[SandboxHost], None],
        workspace_fd: int | None = None,
    ) -> None:
        """Start ``argv`` (bwrap and the launcher) with exactly ``env``: what a sandbox's
        first process was started with stays readable in its ``/proc/1/environ``.
        ``workspace_fd`` (the pinned workspace) takes the place of its placeholder."""
        if argv[-1] != FD_PLACEHOLDER:
            raise ValueError("the launcher's argv must end with its socket's placeholder")
        self._on_closed = on_closed
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, Future[tuple[int, int]]] = {}
        self._running: dict[int, HostedProcess] = {}
        #: Statuses of commands that ended before ``start`` registered them (killed while
        #: held: another command of the session can signal them).
        self._early: dict[int, int] = {}
        self._awaiting: set[int] = set()  # answered with a pid, not registered yet
        self._pidfds: dict[int, int] = {}  # request id -> pidfd of its running command
        self._gone: dict[int, float] = {}  # request id -> when its process was seen gone
        self._idle_timer: threading.Timer | None = None
        self.closed = False
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self._epoll = select.epoll()
        self._epoll.register(ours.fileno(), select.EPOLLIN)
        fds = (theirs.fileno(),) if workspace_fd is None else (theirs.fileno(), workspace_fd)
        named = [str(workspace_fd) if a == WORKSPACE_FD_PLACEHOLDER else a for a in argv[:-1]]
        try:
            self._proc = spawn([*named, str(theirs.fileno())], env, *fds)
        except OSError as exc:
            self._epoll.close()
            ours.close()
            raise HostLost(f"the sandbox could not be started: {exc}") from None
        finally:
            theirs.close()
        self._reader = threading.Thread(target=self._read, name="sandbox-host", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self._proc.pid

    @property
    def idle(self) -> bool:
        with self._lock:
            return not self._running and not self._pending

    def start(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        cwd: str,
        rlimits: Sequence[tuple[int, int, int]],
        join: Callable[[int], None],
    ) -> HostedProcess:
        """Start ``argv`` in the sandbox: ``join(host_pid)`` runs while the command waits
        to exec (the cgroup join). Raises ``HostLost`` when the launcher is gone."""
        request: dict[str, Any] = {
            "op": "start",
            "argv": list(argv),
            "env": env,
            "cwd": cwd,
            "rlimits": [list(r) for r in rlimits],
        }
        with self._lock:
            if self.closed:
                raise HostLost("the sandbox is closed")
            rid = next(self._ids)
        request["id"] = rid
        data = json.dumps(request).encode()
        if len(data) > MAX_REQUEST:
            raise StartRefused(f"a start request of {len(data)} bytes")
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        answer: Future[tuple[int, int]] = Future()
        with self._lock:
            self._pending[rid] = answer
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
        try:
            self._send_bytes(data, [write_end])
        except HostLost:
            os.close(read_end)
            with self._lock:
                self._pending.pop(rid, None)
            self._idle_if_unused()  # a refused send leaves the sandbox as it was
            raise
        finally:
            os.close(write_end)
        try:
            with START_GATE.released():
                pid, pidfd = answer.result(START_TIMEOUT_S)
        except BaseException as exc:
            os.close(read_end)
            with self._lock:
                self._pending.pop(rid, None)
            if isinstance(exc, TimeoutError):
                logger.warning("sandbox %d: the launcher did not answer; ending it", self.pid)
                self.close()
                raise HostLost(
                    f"the sandbox did not start the command in {START_TIMEOUT_S:.0f} s"
                ) from None
            with contextlib.suppress(HostLost):
                self._send({"op": "abort", "id": rid})  # a child it started after all
            self._idle_if_unused()
            raise
        process = HostedProcess(host_pid(pidfd), os.fdopen(read_end, "rb", buffering=0))
        with self._lock:
            self._awaiting.discard(rid)
            early = self._early.pop(rid, None)
            lost = self.closed
            if early is None and not lost:
                self._running[rid] = process
                self._pidfds[rid] = pidfd
                self._epoll.register(pidfd, select.EPOLLIN)
        if early is not None or lost:
            os.close(pidfd)
            process.set_status(early if early is not None else -signal.SIGKILL)
        try:
            if process.returncode is not None or process.pid <= 1:
                raise HostLost(f"the command (pid {pid} in the sandbox) ended before it ran")
            join(process.pid)
            self._send({"op": "go", "id": rid})
        except BaseException:
            with contextlib.suppress(HostLost):
                self._send({"op": "abort", "id": rid})
            with contextlib.suppress(subprocess.TimeoutExpired), START_GATE.released():
                process.wait(START_TIMEOUT_S)
            process.set_status(-signal.SIGKILL)  # no-op when the launcher reported it
            process.close()
            assert process.stdout is not None
            process.stdout.close()
            raise
        return process

    def close(self) -> None:
        """End the sandbox and every process in it: the reader sees the socket close, kills
        bwrap (the pid namespace ends with it) and reports the running commands killed."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def _send(self, message: dict[str, Any]) -> None:
        self._send_bytes(json.dumps(message).encode())

    def _send_bytes(self, data: bytes, fds: Sequence[int] = ()) -> None:
        try:
            if fds:
                socket.send_fds(self._sock, [data], list(fds))
            else:
                self._sock.send(data)
        except OSError as exc:
            if exc.errno in (errno.EPIPE, errno.ECONNRESET, errno.EBADF, errno.ENOTCONN):
                self.close()
                raise HostLost(f"the sandbox's launcher is gone: {exc}") from None
            # Too many descriptors in flight, a message too large: this start only.
            raise StartRefused(f"the start request was not sent: {exc}") from None

    # -- the reader thread -------------------------------------------------------------------

    def _read(self) -> None:
        sock = self._sock.fileno()
        try:
            while True:
                for fd, _ in self._epoll.poll(self._next_check()):
                    if fd != sock:
                        self._process_gone(fd)
                        continue
                    try:  # readable, so this does not block
                        data, fds, _, _ = socket.recv_fds(self._sock, 65536, 4)
                    except OSError:
                        return
                    if not data:
                        return
                    self._dispatch(json.loads(data), fds)
                self._end_if_stuck()
        except Exception:
            # Ending the sandbox is what keeps every call answered: its commands are killed
            # and reported so, instead of left running with no one to say how they ended.
            logger.exception("sandbox %d: its reader failed; ending the sandbox", self.pid)
        finally:
            self._lost()

    def _dispatch(self, message: dict[str, Any], fds: list[int]) -> None:
        rid = int(message["id"])
        if "status" in message:
            with self._lock:
                process = self._running.pop(rid, None)
                if process is None and rid in self._awaiting:
                    self._early[rid] = int(message["status"])
                self._gone.pop(rid, None)
                pidfd = self._pidfds.pop(rid, None)
            if pidfd is not None:
                self._unwatch(pidfd)
            if process is not None:
                process.set_status(int(message["status"]))
            self._idle_if_unused()
            return
        with self._lock:
            answer = self._pending.pop(rid, None)
            answered = answer is not None and "pid" in message and len(fds) == 1
            if answered:
                self._awaiting.add(rid)
        if answer is None or not answered:
            for fd in fds:
                os.close(fd)
            if answer is not None:
                answer.set_exception(StartRefused(str(message.get("error", "no pid"))))
            return
        answer.set_result((int(message["pid"]), fds[0]))

    def _process_gone(self, pidfd: int) -> None:
        """A running command's process ended: its status should follow at once. (An event
        of a poll batch whose status came first names an fd closed since, or reused by a
        command just started, which is watched only if its own process has ended.)"""
        with self._lock:
            rid = next((r for r, fd in self._pidfds.items() if fd == pidfd), None)
            if rid is None or not _readable(pidfd):
                return
            del self._pidfds[rid]
            self._gone[rid] = time.monotonic()
        self._unwatch(pidfd)

    def _next_check(self) -> float:
        with self._lock:
            if not self._gone:
                return -1
            return max(0.0, min(self._gone.values()) + STATUS_GRACE_S - time.monotonic())

    def _end_if_stuck(self) -> None:
        with self._lock:
            late = [r for r, t in self._gone.items() if time.monotonic() - t > STATUS_GRACE_S]
        if late:
            logger.warning(
                "sandbox %d: no status for %d ended command(s) in %.0f s; ending the sandbox",
                self.pid,
                len(late),
                STATUS_GRACE_S,
            )
            self.close()

    def _unwatch(self, pidfd: int) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._epoll.unregister(pidfd)
        os.close(pidfd)

    def _lost(self) -> None:
        """The launcher is gone or stuck: end the sandbox, and with it every process in it."""
        with self._lock:
            self.closed = True
            pending, self._pending = self._pending, {}
            running, self._running = self._running, {}
            pidfds, self._pidfds = self._pidfds, {}
            if self._idle_timer is not None:
                self._idle_timer.cancel()
        with contextlib.suppress(OSError):
            self._proc.kill()  # bwrap: --die-with-parent and the pid namespace do the rest
        self._proc.wait()
        for answer in pending.values():
            answer.set_exception(HostLost("the sandbox's launcher is gone"))
        for process in running.values():
            process.set_status(-signal.SIGKILL)
        for pidfd in pidfds.values():
            os.close(pidfd)
        self._epoll.close()
        self._sock.close()
        self._on_closed(self)

    def _idle_if_unused(self) -> None:
        with self._lock:
            if self.closed or self._running or self._pending or self._idle_timer is not None:
                return
            timer = threading.Timer(IDLE_SECONDS, self._close_if_idle)
            timer.daemon = True
            self._idle_timer = timer
        timer.start()

    def _close_if_idle(self) -> None:
        with self._lock:
            idle = not self._running and not self._pending
            self._idle_timer = None
        if idle:
            self.close()


def _readable(fd: int) -> bool:
    """Whether ``fd`` is readable now (``poll``: a worker's descriptors run past
    ``select``'s 1024)."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(0))
