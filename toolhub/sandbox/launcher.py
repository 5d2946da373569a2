"""Inside a session's shared bwrap sandbox: ``python -I -S launcher.py <fd>``.

Starting a sandbox costs the machine far more CPU than a command's own start (namespaces,
``/dev``, ``/proc`` and the bind mounts); a shell command inside one costs a fork and an exec.
So a worker keeps one sandbox per session policy (``toolhub.backends.sandbox_host``) and this
launcher, its first process, starts each command in it on request, over the unix socket
inherited as ``<fd>``:

* ``{"op": "start", "id", "argv", "env", "cwd", "rlimits"}`` with the command's output pipe
  attached: fork a child in a session of its own that waits; answer ``{"id", "pid"}`` with a
  pidfd of the child attached (the worker reads the child's host pid from it and moves the
  child into the command's pids cgroup), or ``{"id", "error"}``;
* ``{"op": "go", "id"}``: the child sets its limits, takes the pipe as stdout and stderr and
  ``/dev/null`` as stdin, resets every signal and execs; ``{"op": "abort", "id"}``: it exits
  127 without running anything;
* when a child ends: ``{"id", "status"}``, the status as ``subprocess.Popen`` reports it (minus
  the signal number when a signal ended it).

The launcher exits when the worker closes the socket, or dies with it: the sandbox's pid
namespace then ends and the kernel kills every process left in it. It imports nothing of
toolhub and is single-threaded, so forking here is safe.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import select
import signal
import socket
import sys

_MAX_MESSAGE = 1 << 20
#: Where a held child keeps its go pipe (0-2 are its stdio by then).
_GO_FD = 3
#: Signals the launcher ignores: those a command may send to every process it can see.
_IGNORED = (
    signal.SIGHUP,
    signal.SIGINT,
    signal.SIGQUIT,
    signal.SIGTERM,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGALRM,
    signal.SIGPIPE,
)


def _child(
    argv: list[str], env: dict[str, str], cwd: str, rlimits: list[list[int]], go: int, out: int
) -> None:
    """In the forked child: keep only its own descriptors, wait for go, then become the
    command. Never returns. The descriptors go first: a sibling forked later must not hold
    this child's go pipe open (an abort is its end of file), nor another command's output."""
    try:
        signal.set_wakeup_fd(-1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.dup2(go, _GO_FD)
        os.closerange(_GO_FD + 1, 1 << 16)
        if os.read(_GO_FD, 1) != b"g":
            os._exit(127)
        os.close(_GO_FD)
        for res, soft, hard in rlimits:
            with contextlib.suppress(ValueError, OSError):
                resource.setrlimit(res, (soft, hard))
        for sig in range(1, signal.NSIG):
            with contextlib.suppress(OSError, ValueError, RuntimeError):
                signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        os.chdir(cwd)
        os.execve(argv[0], argv, env)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.write(2, f"toolhub: cannot start the command: {exc}\n".encode())
    os._exit(127)


class Launcher:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.children: dict[int, int] = {}  # pid -> request id
        self.held: dict[int, int] = {}  # request id -> write end of the child's go pipe

    def send(self, message: dict[str, object], fds: list[int] | None = None) -> bool:
        data = json.dumps(message).encode()
        try:
            if fds:
                socket.send_fds(self.sock, [data], fds)
            else:
                self.sock.send(data)
        except OSError:
            return False
        return True

    def start(self, request: dict[str, object], fds: list[int]) -> None:
        rid = int(request["id"])  # type: ignore[call-overload]
        if len(fds) != 1:
            for fd in fds:
                os.close(fd)
            self.send({"id": rid, "error": "no output pipe attached"})
            return
        out = fds[0]
        go_read, go_write = os.pipe()
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in (go_read, go_write, out):
                os.close(fd)
            self.send({"id": rid, "error": f"fork: {exc}"})
            return
        if pid == 0:
            os.close(go_write)
            os.setsid()
            _child(
                list(request["argv"]),  # type: ignore[call-overload]
                dict(request["env"]),  # type: ignore[call-overload]
                str(request["cwd"]),
                list(request.get("rlimits") or []),  # type: ignore[call-overload]
                go_read,
                out,
            )
        os.close(go_read)
        os.close(out)
        self.children[pid] = rid
        self.held[rid] = go_write
        try:
            pidfd = os.pidfd_open(pid)
        except OSError as exc:
            self.release(rid, go=False)  # the child exits without running anything
            self.send({"id": rid, "error": f"pidfd_open: {exc}"})
            return
        try:
            sent = self.send({"id": rid, "pid": pid}, [pidfd])
        finally:
            os.close(pidfd)
        if not sent:  # e.g. too many descriptors in flight: say so without one
            self.release(rid, go=False)
            self.send({"id": rid, "error": "could not hand over the command's pidfd"})

    def release(self, rid: int, go: bool) -> None:
        fd = self.held.pop(rid, None)
        if fd is not None:
            with contextlib.suppress(OSError):
                if go:
                    os.write(fd, b"g")
            os.close(fd)

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            rid = self.children.pop(pid, None)
            if rid is not None:
                self.release(rid, go=False)
                self.send({"id": rid, "status": os.waitstatus_to_exitcode(status)})

    def serve(self) -> None:
        wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        # The session's commands share this pid namespace: a routine `pkill python` or
        # `kill -- -1` must not end the sandbox under them (a child resets all of these).
        for sig in _IGNORED:
            signal.signal(sig, signal.SIG_IGN)
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN)
        poller.register(wake_read, select.POLLIN)
        while True:
            for fd, _ in poller.poll():
                if fd == wake_read:
                    with contextlib.suppress(BlockingIOError):
                        while os.read(wake_read, 512):
                            pass
                    self.reap()
                    continue
                data, fds, _, _ = socket.recv_fds(self.sock, _MAX_MESSAGE, 4)
                if not data:
                    return
                request = json.loads(data)
                op = request.get("op")
                if op == "start":
                    self.start(request, fds)
                    continue
                for extra in fds:
                    os.close(extra)
                if op in ("go", "abort"):
                    self.release(int(request["id"]), go=op == "go")


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    os.set_inheritable(sock.fileno(), False)
    Launcher(sock).serve()


if __name__ == "__main__":
    main()
