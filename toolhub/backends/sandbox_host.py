"""One bwrap sandbox per session policy, shared by that session's commands in this process.

Starting a sandbox is most of what a sandboxed command costs to start (about 7 ms of the
machine's CPU, against well under 1 ms for the fork and exec of its shell), and a worker hosting
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
import functools
import itertools
import json
import logging
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import IO, Any

import toolhub.sandbox

logger = logging.getLogger("toolhub.sandbox")

LAUNCHER = Path(toolhub.sandbox.__file__).resolve().parent / "launcher.py"
#: A sandbox with no command running is closed after this long...
IDLE_SECONDS = 30.0
#: ...or sooner, oldest first, once a process has more sandboxes than this (a worker serving
#: many sessions keeps the busy ones; each costs a bwrap and a small Python process).
MAX_SANDBOXES = 32
#: How long a command's start may take before it is given up (the launcher is stuck or gone).
START_TIMEOUT_S = 30.0
#: Requests larger than this (a command of hundreds of kilobytes) start a sandbox of their own.
MAX_REQUEST = 192 * 1024
FD_PLACEHOLDER = "{fd}"


class HostLost(RuntimeError):
    """The sandbox's launcher is gone (or never answered): the command did not start."""


class HostedProcess:
    """A command started by a sandbox's launcher: the part of ``subprocess.Popen`` that
    ``RunningCommand`` uses. The launcher, its parent, reports how it ended."""

    def __init__(self, host: SandboxHost, pid: int, stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdout: IO[bytes] | None = stdout
        self.returncode: int | None = None
        self._host = host
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

    def _ended_with(self, status: int) -> None:
        if self._ended.is_set():
            return
        self.returncode = status
        self._ended.set()
        with contextlib.suppress(OSError):
            os.write(self._signal_write, b"x")


class SandboxHost:
    """One running sandbox and its launcher. Every method is safe from any thread."""

    def __init__(
        self,
        argv: Sequence[str],
        env: dict[str, str],
        *,
        on_closed: Callable[[SandboxHost], None],
    ) -> None:
        """Start ``argv`` (bwrap and the launcher) with exactly ``env``: what a sandbox's
        first process was started with stays readable in its ``/proc/1/environ``."""
        self._on_closed = on_closed
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._pending: dict[int, Future[tuple[int, int]]] = {}
        self._running: dict[int, HostedProcess] = {}
        #: Statuses of commands that ended before ``start`` registered them (killed while
        #: held: another command of the session can signal them).
        self._early: dict[int, int] = {}
        self._idle_timer: threading.Timer | None = None
        self.closed = False
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        if argv[-1] != FD_PLACEHOLDER:
            raise ValueError("the launcher's argv must end with its socket's placeholder")
        try:
            self._proc = _spawn([*argv[:-1], str(theirs.fileno())], env, theirs.fileno())
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
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        answer: Future[tuple[int, int]] = Future()
        with self._lock:
            if self.closed:
                os.close(read_end)
                os.close(write_end)
                raise HostLost("the sandbox is closed")
            rid = next(self._ids)
            self._pending[rid] = answer
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
        request["id"] = rid
        try:
            self._send(request, [write_end])
        except HostLost:
            os.close(read_end)
            with self._lock:
                self._pending.pop(rid, None)
            raise
        finally:
            os.close(write_end)
        try:
            pid, pidfd = answer.result(START_TIMEOUT_S)
        except BaseException as exc:
            os.close(read_end)
            with self._lock:
                self._pending.pop(rid, None)
            with contextlib.suppress(HostLost):
                self._send({"op": "abort", "id": rid})  # a child it started after all
            self._idle_if_unused()
            if isinstance(exc, TimeoutError):
                raise HostLost(
                    f"the sandbox did not start the command in {START_TIMEOUT_S:.0f} s"
                ) from None
            raise
        try:
            host_pid = _host_pid(pidfd)
        finally:
            os.close(pidfd)
        process = HostedProcess(self, host_pid, os.fdopen(read_end, "rb", buffering=0))
        with self._lock:
            early = self._early.pop(rid, None)
            lost = self.closed
            if early is None and not lost:
                self._running[rid] = process
        if early is not None or lost:
            process._ended_with(early if early is not None else -signal.SIGKILL)
        try:
            if process.returncode is not None or host_pid <= 1:
                raise HostLost(f"the command (pid {pid} in the sandbox) ended before it ran")
            join(host_pid)
        except BaseException:
            with contextlib.suppress(HostLost):
                self._send({"op": "abort", "id": rid})
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(START_TIMEOUT_S)
            process._ended_with(-signal.SIGKILL)  # no-op when the launcher reported it
            process.close()
            assert process.stdout is not None
            process.stdout.close()
            raise
        self._send({"op": "go", "id": rid})
        return process

    def close(self) -> None:
        """End the sandboxed processes and the sandbox (the launcher sees the socket close)."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)

    def _send(self, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
        data = json.dumps(message).encode()
        try:
            if fds:
                socket.send_fds(self._sock, [data], list(fds))
            else:
                self._sock.send(data)
        except OSError as exc:
            self.close()
            raise HostLost(f"the sandbox's launcher is gone: {exc}") from None

    def _read(self) -> None:
        try:
            while True:
                try:
                    data, fds, _, _ = socket.recv_fds(self._sock, 65536, 4)
                except OSError:
                    break
                if not data:
                    break
                self._dispatch(json.loads(data), fds)
        finally:
            self._lost()

    def _dispatch(self, message: dict[str, Any], fds: list[int]) -> None:
        rid = int(message["id"])
        if "status" in message:
            with self._lock:
                process = self._running.pop(rid, None)
                if process is None:
                    self._early[rid] = int(message["status"])
            if process is not None:
                process._ended_with(int(message["status"]))
            self._idle_if_unused()
            return
        with self._lock:
            answer = self._pending.pop(rid, None)
        if answer is None or "pid" not in message or len(fds) != 1:
            for fd in fds:
                os.close(fd)
            if answer is not None:
                answer.set_exception(HostLost(str(message.get("error", "no pid"))))
            return
        answer.set_result((int(message["pid"]), fds[0]))

    def _lost(self) -> None:
        """The launcher is gone, and with it every process of the sandbox."""
        with self._lock:
            self.closed = True
            pending, self._pending = self._pending, {}
            running, self._running = self._running, {}
            if self._idle_timer is not None:
                self._idle_timer.cancel()
        for answer in pending.values():
            answer.set_exception(HostLost("the sandbox's launcher is gone"))
        for process in running.values():
            process._ended_with(-signal.SIGKILL)
        self._sock.close()
        with contextlib.suppress(OSError):
            self._proc.kill()
        self._proc.wait()
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


class SandboxHosts:
    """The sandboxes of this process, one per bwrap argv (that is, per policy)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._hosts: dict[tuple[str, ...], SandboxHost] = {}

    def get(self, argv: Sequence[str], env: dict[str, str]) -> SandboxHost:
        """The running sandbox of ``argv`` (and ``env``), started now if there is none."""
        key = (*argv, *(f"{k}={v}" for k, v in sorted(env.items())))
        with self._lock:
            host = self._hosts.get(key)
            if host is not None and not host.closed:
                self._hosts[key] = self._hosts.pop(key)  # most recently used last
                return host
            surplus = [h for h in self._hosts.values() if h.idle][
                : max(0, len(self._hosts) + 1 - MAX_SANDBOXES)
            ]
            host = SandboxHost(argv, env, on_closed=lambda h: self._forget(key, h))
            self._hosts[key] = host
        for old in surplus:
            old.close()
        return host

    def close_all(self) -> None:
        with self._lock:
            hosts = list(self._hosts.values())
        for host in hosts:
            host.close()

    def __len__(self) -> int:
        with self._lock:
            return sum(not h.closed for h in self._hosts.values())

    def _forget(self, key: tuple[str, ...], host: SandboxHost) -> None:
        with self._lock:
            if self._hosts.get(key) is host:
                del self._hosts[key]


def launcher_interpreter() -> str:
    """The base Python (not a virtualenv's): the launcher needs the standard library only,
    and the sandbox then needs only that installation readable (``install_roots``)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


@functools.cache
def launcher_argv() -> tuple[str, ...]:
    """The launcher's command line inside the sandbox, its source given with ``-c`` (nothing
    of toolhub's installation is bound in); ``SandboxHost`` puts its socket's number in place
    of the placeholder."""
    return (launcher_interpreter(), "-I", "-S", "-c", LAUNCHER.read_text(), FD_PLACEHOLDER)


def _host_pid(pidfd: int) -> int:
    """The pid, in this process's namespace, of the process a pidfd refers to (-1: it has
    ended; 0: it is not visible from here)."""
    try:
        with open(f"/proc/self/fdinfo/{pidfd}") as info:
            for line in info:
                if line.startswith("Pid:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return -1


# -- spawning -----------------------------------------------------------------------------------

#: A process's parent-death signal fires when the *thread* that forked it ends. Sandboxes
#: outlive the call that started them, so one long-lived thread forks them all.
_SpawnRequest = tuple[list[str], dict[str, str], int, Future[subprocess.Popen[bytes]]]
_spawn_requests: queue.SimpleQueue[_SpawnRequest] = queue.SimpleQueue()
_spawner_lock = threading.Lock()
_spawner: threading.Thread | None = None


def _spawn(argv: list[str], env: dict[str, str], fd: int) -> subprocess.Popen[bytes]:
    global _spawner
    with _spawner_lock:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(target=_spawn_forever, name="sandbox-spawner", daemon=True)
            _spawner.start()
    done: Future[subprocess.Popen[bytes]] = Future()
    _spawn_requests.put((argv, env, fd, done))
    return done.result()


def _spawn_forever() -> None:
    while True:
        argv, env, fd, done = _spawn_requests.get()
        try:
            done.set_result(
                subprocess.Popen(
                    argv,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    pass_fds=(fd,),
                    start_new_session=True,
                )
            )
        except BaseException as exc:
            done.set_exception(exc)
