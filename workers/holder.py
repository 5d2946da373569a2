"""The background holder: one small process per host that runs the durable background commands,
so they survive the worker process that started them.

A worker's ``toolhub.background`` task claims the call (attempt N) and hands the command to the
holder of its host over a unix socket (``HolderClient.hand_over``); the holder starts it, answers
``started`` and from then on owns the attempt: it streams the output as ``output_delta`` events
(``Emitter``, fenced by the attempt), renews the lease of every command it holds every third of
the lease, kills a command on a cancel (the control channel, and RENEW's cancel code as the
backstop) and writes the terminal. The worker's Celery task returns at once, so a worker that
dies (SIGKILL, OOM, a rolling restart) takes nothing with it: the command runs on with its
output intact, and the record keeps its one attempt.

The commands are started by the holder's main thread, so they die with the holder (the process
runner's parent-death signal), and a holder that dies stops renewing: the leases expire, the
task shows ``lost``, and the sweep re-runs it on another worker as the next attempt — the "host
gone" path. A holder exits after ``TOOLHUB_HOLDER_IDLE_SECONDS`` without commands.

One holder per (``TOOLHUB_HOME``, Redis URL, prefix): its socket (mode 0600, in a 0700
directory, peers checked by uid) and lock files live in ``$TOOLHUB_HOME/holders/``. A holder
holds its *life lock* while it runs; a worker that finds no holder spawns one under the *spawn
lock*, so two workers never start two. A holder going idle unlinks its socket before it stops
accepting, so a worker racing it finds no socket and spawns a new one (which waits for the old
one's life lock). Run one by hand with ``python -m workers.holder``.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import select
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError

from toolhub.backends.process import KILL_GRACE_S, ProcessRunner
from toolhub.backends.running import CommandResult, RunningCommand
from toolhub.core import CallResult, CancelToken, ErrorKind, OutputDeltas, ToolError, ToolOutput
from toolhub.core.tool import HANDOFF, INTERNAL_REASONS, LEASE_LOST
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import RedisStore
from toolhub.errors import ErrorCode
from toolhub.sandbox import SandboxPolicy
from toolhub.stop_signals import StopSignals

from .control import ControlListener
from .emitter import Emitter
from .runtime import Running

logger = logging.getLogger("toolhub.worker.holder")

#: ``0`` runs background commands inside the worker process instead (they then die with it).
ENABLED_ENV = "TOOLHUB_HOLDER"
#: How long a holder without commands waits for new ones before it exits.
IDLE_ENV = "TOOLHUB_HOLDER_IDLE_SECONDS"
DEFAULT_IDLE_SECONDS = 30.0
#: How long a worker waits for a holder it spawned to answer, and for a reply.
SPAWN_TIMEOUT_S = 15.0
REPLY_TIMEOUT_S = 10.0
_MAX_REQUEST = 4 << 20
_LOG_LIMIT = 8 << 20
_TICK_S = 0.5
_MAX_SOCKET_PATH = 100
_UCRED = struct.Struct("3i")


def enabled() -> bool:
    return os.environ.get(ENABLED_ENV, "1").strip().lower() not in {"0", "false", "no", "off"}


def idle_seconds() -> float:
    raw = os.environ.get(IDLE_ENV, "")
    return float(raw) if raw.strip() else DEFAULT_IDLE_SECONDS


def _home() -> Path:
    return Path(os.environ.get("TOOLHUB_HOME", "~/.toolhub")).expanduser()


@dataclass(frozen=True, slots=True)
class HolderPaths:
    """Where the holder of one (home, Redis URL, prefix) listens, locks and logs."""

    directory: Path
    socket: Path
    life_lock: Path
    spawn_lock: Path
    log: Path

    @classmethod
    def of(cls, settings: Settings, home: Path | None = None) -> HolderPaths:
        home = (home or _home()).expanduser()
        # A hash, not the URL: it may hold a password.
        key = hashlib.sha256(f"{settings.redis_url}\0{settings.prefix}".encode()).hexdigest()[:16]
        directory = home / "holders"
        sock = directory / f"{key}.sock"
        if len(os.fsencode(sock)) > _MAX_SOCKET_PATH:  # sun_path is ~108 bytes
            digest = hashlib.sha256(f"{home}\0{key}".encode()).hexdigest()[:16]
            sock = Path("/tmp") / f"toolhub-holder-{os.getuid()}-{digest}.sock"
        return cls(
            directory,
            sock,
            directory / f"{key}.lock",
            directory / f"{key}.spawn.lock",
            directory / f"{key}.log",
        )

    def prepare(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(OSError):
            os.chmod(self.directory, 0o700)


@contextlib.contextmanager
def _flocked(path: Path, timeout_s: float) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path`` (True), or give up after ``timeout_s`` (False)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.02)
        yield True
    finally:
        os.close(fd)  # releases the lock


# -- the command, shared by the holder and the worker's in-process fallback -----------------------


def start_command(
    runner: ProcessRunner, message: dict[str, Any], emitter: Emitter
) -> tuple[RunningCommand, Callable[[], None]]:
    """Start the message's command; its output goes to ``emitter`` as ``output_delta`` items
    from the command's reader thread. Returns the command and the flush to call once it ended."""
    deltas = OutputDeltas()

    def on_output(data: bytes) -> None:
        for item in deltas.feed(data):
            emitter.progress(item)

    def flush() -> None:
        for item in deltas.flush():
            emitter.progress(item)

    cwd = message.get("cwd")
    command = runner.start(
        message["command"],
        log_name=message["call_id"],
        cwd=Path(cwd) if cwd else None,
        timeout_s=float(message["timeout_s"]),
        on_output=on_output,
    )
    return command, flush


def command_result(task_id: str, outcome: CommandResult) -> CallResult:
    details = {"exit_code": outcome.exit_code, "duration_s": round(outcome.duration_s, 3)}
    if outcome.killed == "timeout":
        error = ToolError(ErrorKind.TIMEOUT, "The background command timed out.", details)
        return CallResult.failure("background", error, call_id=task_id)
    if outcome.killed is not None:
        error = ToolError(ErrorKind.CANCELLED, "The background command was killed.", details)
        return CallResult.failure("background", error, call_id=task_id)
    return CallResult(
        name="background",
        output=ToolOutput.dynamic(details),
        prompt_text=f"exit: {outcome.exit_code}",
        call_id=task_id,
    )


def start_failure(task_id: str, exc: BaseException) -> CallResult:
    error = ToolError.custom(
        ErrorCode.START_FAILED, f"The background command could not start: {exc}"
    )
    return CallResult.failure("background", error, call_id=task_id)


# -- the worker's side ---------------------------------------------------------------------------


class HolderClient:
    """Talks to this host's holder, spawning it when none answers."""

    def __init__(self, settings: Settings, home: Path | None = None) -> None:
        self.settings = settings
        self.home = (home or _home()).expanduser()
        self.paths = HolderPaths.of(settings, self.home)

    def request(self, payload: dict[str, Any], timeout_s: float = REPLY_TIMEOUT_S) -> Any:
        """The holder's reply, or None when no holder took the request (no socket, refused,
        or the connection closed before a reply: a holder that was just exiting)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout_s)
                sock.connect(os.fspath(self.paths.socket))
                sock.sendall(json.dumps(payload).encode() + b"\n")
                reply = _read_line(sock)
            return json.loads(reply) if reply else None
        except (OSError, ValueError, TypeError):
            return None

    def ping(self) -> dict[str, Any] | None:
        reply = self.request({"op": "ping"}, timeout_s=2.0)
        return reply if isinstance(reply, dict) and reply.get("ok") else None

    def hand_over(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        """Send a ``start`` request, spawning the holder if needed; None when no holder could
        be reached. Safe to repeat: the holder answers a repeated (call, attempt) from its
        table instead of starting the command twice."""
        reply = self.request(payload)
        if reply is None and self.ensure_running():
            reply = self.request(payload)
        return reply if isinstance(reply, dict) else None

    def ensure_running(self) -> bool:
        """Make sure a holder answers: spawn one, under the spawn lock, unless one does."""
        try:
            self.paths.prepare()
            with _flocked(self.paths.spawn_lock, SPAWN_TIMEOUT_S) as locked:
                if not locked:
                    return self.ping() is not None
                if self.ping() is not None:
                    return True
                proc = self._spawn()
                deadline = time.monotonic() + SPAWN_TIMEOUT_S
                while time.monotonic() < deadline:
                    if self.ping() is not None:
                        return True
                    if proc.poll() is not None:
                        # Lost the life lock to a holder that is starting: wait for it.
                        if self.ping() is None:
                            time.sleep(0.05)
                            proc = self._spawn()
                        continue
                    time.sleep(0.02)
                return False
        except OSError as exc:
            logger.warning("background holder could not be started: %s", exc)
            return False

    def _spawn(self) -> subprocess.Popen[bytes]:
        log = self.paths.log
        with contextlib.suppress(OSError):
            if log.stat().st_size > _LOG_LIMIT:
                log.replace(log.with_suffix(".log.1"))
        env = {
            **os.environ,
            "TOOLHUB_HOME": str(self.home),
            "TOOLHUB_REDIS_URL": self.settings.redis_url,
            "TOOLHUB_PREFIX": self.settings.prefix,
        }
        with open(log, "ab") as out:
            os.chmod(log, 0o600)
            proc = subprocess.Popen(
                [sys.executable, "-m", "workers.holder"],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
            )
        logger.info("started background holder %d", proc.pid)
        # Reap it when it exits (while this worker lives); it never depends on this process.
        threading.Thread(target=proc.wait, name="toolhub-holder-reaper", daemon=True).start()
        return proc


def _read_line(sock: socket.socket) -> bytes:
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > _MAX_REQUEST:
            raise ValueError("message too long")
    return bytes(data).strip()


# -- the holder ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Held:
    running: Running
    command: RunningCommand
    emitter: Emitter
    flush: Callable[[], None]


class Holder:
    """The holder process: serves hand-overs on the main thread, keeps leases and cancels on
    its own threads, and ends each command from the command's reader thread."""

    def __init__(self, settings: Settings, paths: HolderPaths, idle_s: float) -> None:
        self.settings = settings
        self.paths = paths
        self.idle_s = idle_s
        self.store = RedisStore.from_settings(settings)
        self.records = self.store.records
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()
        self._idle_since = time.monotonic()
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._inode: int | None = None

    # -- what the emitter and the control listener need -----------------------------------------

    def cancel_local(self, call_id: str, reason: str = "cancelled") -> bool:
        with self._lock:
            held = self._held.get(call_id)
        if held is None:
            return False
        held.running.token.cancel(reason)
        return True

    # -- serving --------------------------------------------------------------------------------

    def serve(self) -> int:
        self.paths.prepare()
        with _flocked(self.paths.life_lock, 5.0) as locked:
            if not locked:
                logger.info("another holder runs for %s; exiting", self.paths.socket)
                return 0
            self._bind()
            control = ControlListener(self)
            keeper = threading.Thread(target=self._keep_leases, name="holder-leases", daemon=True)
            control.start()
            keeper.start()
            logger.info("holder %s serving %s", self.name, self.paths.socket)
            try:
                with StopSignals() as stop:
                    self._loop(stop)
            finally:
                self._unbind()
                control.stop()
                self._stopping.set()
        logger.info("holder %s exiting", self.name)
        self.store.close()
        return 0

    def _loop(self, stop: StopSignals) -> None:
        while True:
            if stop.requested:  # SIGTERM or SIGINT: the handler only sets the flag
                logger.warning("holder: asked to stop; handing every command back")
                self._stopping.set()
            if self._stopping.is_set():
                self._hand_back_all()
                return
            listener = self._listener
            if listener is not None:
                # poll, not select: a holder's descriptors run past select's 1024.
                poller = select.poll()
                poller.register(listener, select.POLLIN)
                if poller.poll(_TICK_S * 1000):
                    self._accept(listener)
            else:
                time.sleep(_TICK_S)
            self._check_socket()
            with self._lock:
                idle = not self._held and time.monotonic() - self._idle_since >= self.idle_s
                orphaned = not self._held and self._listener is None
            if idle or orphaned:
                return

    def _bind(self) -> None:
        path = os.fspath(self.paths.socket)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a dead holder's (we hold the life lock)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(path)
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        sock.listen(64)
        self._listener, self._inode = sock, os.stat(path).st_ino

    def _unbind(self) -> None:
        """Unlink the socket (only if it is still ours), then stop accepting: a worker that
        connects from now on finds no socket, and one already in the backlog is reset; both
        spawn a new holder."""
        if self._listener is None:
            return
        with contextlib.suppress(OSError):
            if os.stat(self.paths.socket).st_ino == self._inode:
                os.unlink(self.paths.socket)
        self._listener.close()
        self._listener = None

    def _check_socket(self) -> None:
        """Rebind a socket someone removed; stop listening if its directory is gone."""
        if self._listener is None:
            return
        try:
            current: int | None = os.stat(self.paths.socket).st_ino
        except OSError:
            current = None
        if current == self._inode:
            return
        self._listener.close()
        self._listener = None
        if self.paths.directory.is_dir() and current is None:
            with contextlib.suppress(OSError):
                self._bind()
        if self._listener is None:
            logger.warning("holder socket %s is gone; serving no new commands", self.paths.socket)

    def _accept(self, listener: socket.socket) -> None:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(5.0)
            try:
                _pid, uid, _gid = _UCRED.unpack(
                    conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
                )
                if uid != os.getuid():
                    logger.warning("holder: refused a connection from uid %d", uid)
                    return
                raw = _read_line(conn)
                if not raw:
                    return
                reply = self._handle(json.loads(raw))
                conn.sendall(json.dumps(reply).encode() + b"\n")
            except (OSError, ValueError) as exc:
                logger.warning("holder: bad request: %s", exc)

    def _handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "ping":
            with self._lock:
                held = [
                    {
                        "call_id": h.running.call_id,
                        "attempt": h.running.attempt,
                        "pid": h.command.pid,
                    }
                    for h in self._held.values()
                ]
            return {"ok": True, "pid": os.getpid(), "name": self.name, "commands": held}
        if op == "start":
            try:
                return self._start(request)
            except RedisError as exc:
                return {"ok": False, "error": f"redis: {exc}"}
        return {"ok": False, "error": f"unknown op {op!r}"}

    def _start(self, request: dict[str, Any]) -> dict[str, Any]:
        """Start a handed-over command. Runs on the main thread, which lives as long as the
        holder: the parent-death signal of a command follows the thread that started it."""
        message: dict[str, Any] = request["message"]
        attempt = int(request["attempt"])
        cid = message["call_id"]
        with self._lock:
            known = self._held.get(cid)
        if known is not None and known.running.attempt == attempt:
            return {"ok": True, "state": "started", "pid": known.command.pid, "holder": self.name}
        if known is not None:  # an older attempt of the call: it lost the call to this one
            known.running.token.cancel(LEASE_LOST)
        (code,) = self.records.renew([(cid, attempt)])
        if code == 0:
            return {"ok": False, "error": "lease_lost"}
        running = Running(cid, CancelToken(), attempt)
        emitter = Emitter(self, running, message["session_id"])
        sandbox = request.get("sandbox")
        runner = ProcessRunner(
            Path(request["workspace"]),
            Path(request["log_dir"]),
            sandbox=None if sandbox is None else SandboxPolicy.from_wire(sandbox),
        )
        try:
            command, flush = start_command(runner, message, emitter)
        except Exception as exc:  # a missing workspace, no shell, ...
            logger.warning("call %s: could not start: %s", cid, exc)
            emitter.finish(start_failure(cid, exc))
            return {"ok": True, "state": "finished", "holder": self.name}
        held = _Held(running, command, emitter, flush)
        with self._lock:
            self._held[cid] = held

        def kill() -> None:
            command.kill("killed")

        running.token.on_cancel(kill)
        command.add_done_callback(lambda outcome: self._ended(held, outcome))
        if code == 2:
            running.token.cancel("cancelled")
        logger.info("call %s: attempt %d started (pid %d)", cid, attempt, command.pid)
        return {"ok": True, "state": "started", "pid": command.pid, "holder": self.name}

    def _ended(self, held: _Held, outcome: CommandResult) -> None:
        running = held.running
        try:
            held.flush()
            reason = running.token.reason if running.token.cancelled else None
            if reason == HANDOFF:
                self.records.handoff(running.call_id, running.attempt)
            elif reason not in INTERNAL_REASONS:
                held.emitter.finish(command_result(running.call_id, outcome))
        except RedisError as exc:
            logger.warning("call %s: could not write its end: %s", running.call_id, exc)
        finally:
            with self._lock:
                if self._held.get(running.call_id) is held:
                    del self._held[running.call_id]
                self._idle_since = time.monotonic()

    def _hand_back_all(self) -> None:
        """On SIGTERM (the host shutting down): stop every command and give it back, so the
        sweep re-runs it elsewhere at once instead of after its lease."""
        with self._lock:
            held = list(self._held.values())
        for item in held:
            item.running.token.cancel(HANDOFF)
        deadline = time.monotonic() + KILL_GRACE_S + 3
        while time.monotonic() < deadline:
            with self._lock:
                if not self._held:
                    return
            time.sleep(0.05)

    def _keep_leases(self) -> None:
        every = self.settings.lease_seconds / 3
        while not self._stopping.wait(every):
            with self._lock:
                held = [h.running for h in self._held.values()]
            if not held:
                continue
            try:
                codes = self.records.renew([(r.call_id, r.attempt) for r in held])
            except RedisError as exc:
                logger.warning("holder: leases not renewed: %s", exc)
                continue
            for running, code in zip(held, codes, strict=True):
                if code == 0:
                    logger.warning("call %s: lease lost; stopping this attempt", running.call_id)
                    running.token.cancel(LEASE_LOST)
                elif code == 2:
                    running.token.cancel("cancelled")


def main() -> int:
    logging.basicConfig(
        level=os.environ.get("TOOLHUB_HOLDER_LOGLEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s [holder %(process)d] %(name)s: %(message)s",
    )
    settings = Settings.from_env()
    try:
        return Holder(settings, HolderPaths.of(settings), idle_seconds()).serve()
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.ENOENT):
            logger.error("holder cannot listen on %s: %s", HolderPaths.of(settings).socket, exc)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
