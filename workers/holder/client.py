"""The worker's side of the background holder (``server.py``): where the holder of this host
listens, and the client that hands a command over to it, spawning the holder when none answers.

One holder per (``TOOLHUB_HOME``, Redis URL, prefix): its socket (mode 0600, in a 0700
directory, peers checked by uid), its capability (``<key>.secret``, mode 0600: every request
carries it; a command, which cannot read that home, cannot make a request) and lock files live
in ``$TOOLHUB_HOME/holders/``. A worker that finds no holder spawns one under the *spawn lock*,
so two workers never start two. How a worker hands a command over, and waits out a holder that
lives but does not answer, is ``hand_over.py``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolhub.distributed.settings import Settings

from .local_secrets import local_secret

logger = logging.getLogger("toolhub.worker.holder")

#: ``0`` runs background commands inside the worker process instead (they then die with it).
ENABLED_ENV = "TOOLHUB_HOLDER"
#: How long a holder without commands waits for new ones before it exits.
IDLE_ENV = "TOOLHUB_HOLDER_IDLE_SECONDS"
DEFAULT_IDLE_SECONDS = 30.0
#: How long a worker waits for a holder it spawned to answer, and for a reply.
SPAWN_TIMEOUT_S = 15.0
REPLY_TIMEOUT_S = 10.0
MAX_REQUEST = 4 << 20
_LOG_LIMIT = 8 << 20
_MAX_SOCKET_PATH = 100


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
    secret: Path

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
            directory / f"{key}.secret",
        )

    def prepare(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        with contextlib.suppress(OSError):
            os.chmod(self.directory, 0o700)


@contextlib.contextmanager
def flocked(path: Path, timeout_s: float) -> Iterator[bool]:
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
            return self.exchange(payload, timeout_s)
        except (Undelivered, OSError, ValueError, TypeError):
            return None

    def exchange(self, payload: dict[str, Any], timeout_s: float) -> Any:
        """The holder's reply (None: it closed the connection without one). Raises
        ``Undelivered`` when no holder listens (no socket, or it refuses connections: nothing
        was sent), ``OSError`` when the request may have reached a holder but no reply came
        within ``timeout_s``. Every request carries the holder's capability."""
        payload = {**payload, "secret": local_secret(self.paths.secret)}
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            try:
                sock.connect(os.fspath(self.paths.socket))
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                raise Undelivered(str(exc)) from exc
            sock.sendall(json.dumps(payload).encode() + b"\n")
            reply = read_line(sock)
        return json.loads(reply) if reply else None

    def alive(self) -> bool:
        """Whether a holder process lives, answering or not: it holds its life lock from its
        start to its exit, frozen (SIGSTOP) or busy alike; the lock goes with the process."""
        try:
            fd = os.open(self.paths.life_lock, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(fd)  # releases the shared lock taken when no holder held it
        return False

    def ping(self, *, keep: bool = False, session_id: str | None = None) -> dict[str, Any] | None:
        """The holder's answer (with the commands it holds for ``session_id``), or None.
        ``keep``: it also restarts the holder's idle window (a live worker wants it kept)."""
        payload: dict[str, Any] = {"op": "ping", "keep": True} if keep else {"op": "ping"}
        if session_id is not None:
            payload["session_id"] = session_id
        reply = self.request(payload, timeout_s=2.0)
        return reply if isinstance(reply, dict) and reply.get("ok") else None

    def keep(self) -> bool:
        """Restart the holder's idle window, spawning a holder if none answers."""
        return self._answered(lambda: self.ping(keep=True)) is not None

    def _answered(self, send: Callable[[], Any]) -> Any:
        """``send()``'s reply; when none came, a holder is spawned and it is sent once more."""
        reply = send()
        if reply is None and self.ensure_running():
            reply = send()
        return reply

    def ensure_running(self) -> bool:
        """Make sure a holder answers: spawn one, under the spawn lock, unless one does or one
        lives (then wait for it)."""
        try:
            self.paths.prepare()
            with flocked(self.paths.spawn_lock, SPAWN_TIMEOUT_S) as locked:
                if not locked:
                    return self.ping() is not None
                if self.ping() is not None:
                    return True
                if self.alive():
                    live = self._wait_for_live_holder()
                    if live is not None:
                        return live
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

    def _wait_for_live_holder(self) -> bool | None:
        """A holder lives but does not answer (frozen, busy, exiting): a second one could not
        take its life lock, so wait for it. True once it answers, None once it exited (a new
        one may start), False when it did neither within ``SPAWN_TIMEOUT_S``."""
        deadline = time.monotonic() + SPAWN_TIMEOUT_S
        while time.monotonic() < deadline:
            if not self.alive():
                return None
            if self.ping() is not None:
                return True
            time.sleep(0.1)
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
                [sys.executable, "-m", "workers.holder.server"],
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


class Undelivered(OSError):
    """No holder listens where this host's holder should: the request was never sent."""


def read_line(sock: socket.socket) -> bytes:
    data = bytearray()
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST:
            raise ValueError("message too long")
    return bytes(data).strip()
