"""The background holder: one small process per host that runs the durable background commands,
so they survive the worker process that started them.

A worker's ``toolhub.background`` task claims the call (attempt N) and hands the command to the
holder of its host over a unix socket (``hand_over.py``); the holder takes the attempt in Redis
(``start_fence.lua``: a request read after its deadline, or for an attempt the call moved on
from or its worker ran or gave up, is refused, so a holder waking from a freeze never starts
a command a second time), starts it, answers
``started`` and from then on owns the attempt: it streams the output as ``output_delta`` events
(``Emitter``, fenced by the attempt), renews the lease of every command it holds every sixth of
the lease (killing one whose renewals Redis stopped confirming: ``lease_keeping.py``), kills a
command on a cancel (the control channel, and RENEW's cancel code as the
backstop) and writes the terminal. The worker's Celery task returns at once, so a worker that
dies (SIGKILL, OOM, a rolling restart) takes nothing with it: the command runs on with its
output intact, and the record keeps its one attempt.

The commands are started by the holder's main thread, so they die with the holder (the process
runner's parent-death signal), and a holder that dies stops renewing: the leases expire, the
task shows ``lost``, and the sweep re-runs it on another worker as the next attempt — the "host
gone" path. A holder exits ``TOOLHUB_HOLDER_IDLE_SECONDS`` after its last command and the
last ``keep`` from a live worker (``warmer.py``), whichever is later.

One holder per (``TOOLHUB_HOME``, Redis URL, prefix): its socket (mode 0600, in a 0700
directory, peers checked by uid) and lock files live in ``$TOOLHUB_HOME/holders/``.

Threat: a command runs as the worker's uid, and under Landlock it can find the socket (in
``/proc/net/unix``) and connect, so neither the uid nor the socket's mode tells a worker from a
command. Every request carries the holder's capability, a random secret in a 0600 file beside the
socket (``local_secrets.py``: never on a command line, never in an environment, in a home every
sandbox hides); a request without it is refused and logged (``listener.py``). A ``start`` names the
call and its session only: the holder derives the workspace and the sandbox from the session's
record and config itself (``places.py``). A ``ping`` lists the commands of the session it names,
and none otherwise. A holder holds its *life lock* while it runs; a worker that finds no holder
spawns one under the *spawn lock*, so two workers never start two. A holder going idle unlinks its
socket before it stops accepting, so a worker racing it finds no socket and spawns a new one (which
waits for the old one's life lock). Run one by hand with ``python -m workers.holder.server``.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from redis.exceptions import RedisError

from toolhub.backends.oom import protect
from toolhub.backends.process import KILL_GRACE_S
from toolhub.backends.running import CommandResult, RunningCommand
from toolhub.core import CancelToken, ToolError
from toolhub.core.tool import HANDOFF, INTERNAL_REASONS, LEASE_LOST
from toolhub.core.usage import UsageMeter, metering
from toolhub.distributed.script_replies import RenewReply, StartFenceReply
from toolhub.distributed.settings import Settings
from toolhub.distributed.signing import fleet_keys
from toolhub.distributed.store import RedisStore
from toolhub.hooks import after_for_message
from toolhub.stop_signals import StopSignals
from workers.calls.emitter import Emitter
from workers.calls.running import Running
from workers.calls.toolsets import worker_builder
from workers.calls.usage import AttemptUsage
from workers.guards.sandboxing import install_worker_sandbox
from workers.lifecycle.control import ControlListener

from .background_command import command_result, start_command, start_failure
from .client import HolderPaths, flocked, idle_seconds
from .hand_over import STALE
from .lease_keeping import keep_leases
from .listener import HolderSocket
from .local_secrets import local_secret
from .places import SessionPlaces
from .session_records import forget_ended, session_dir

logger = logging.getLogger("toolhub.worker.holder")

_TICK_S = 0.5


@dataclass(slots=True)
class _Held:
    running: Running
    command: RunningCommand
    emitter: Emitter
    flush: Callable[[], None]
    session_id: str
    meter: UsageMeter


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
        self._socket = HolderSocket(paths)
        self.places = SessionPlaces(
            self.store, fleet_keys(), worker_builder(settings), paths.directory.parent
        )

    # -- what the emitter and the control listener need -----------------------------------------

    def cancel_local(self, call_id: str, reason: str = "cancelled") -> bool:
        with self._lock:
            held = self._held.get(call_id)
        if held is None:
            return False
        held.running.token.cancel(reason)
        return True

    def session_ended(self, session_id: str) -> None:
        """A session was deleted: its command logs and tmp on this host go (its running
        tasks keep writing to their open logs until they end)."""
        forget_ended(self.store, session_dir(self.places.home, session_id), session_id)

    # -- serving --------------------------------------------------------------------------------

    def serve(self) -> int:
        self.paths.prepare()
        self._socket.secret = local_secret(self.paths.secret)
        with flocked(self.paths.life_lock, 5.0) as locked:
            if not locked:
                logger.info("another holder runs for %s; exiting", self.paths.socket)
                return 0
            self._socket.bind()
            control = ControlListener(self)
            keeper = threading.Thread(target=self._keep_leases, name="holder-leases", daemon=True)
            control.start()
            keeper.start()
            logger.info("holder %s serving %s", self.name, self.paths.socket)
            try:
                with StopSignals() as stop:
                    self._loop(stop)
            finally:
                self._socket.unbind()
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
            listener = self._socket.listener
            if listener is not None:
                # poll, not select: a holder's descriptors run past select's 1024.
                poller = select.poll()
                poller.register(listener, select.POLLIN)
                if poller.poll(_TICK_S * 1000):
                    self._socket.accept(listener, self._handle)
            else:
                time.sleep(_TICK_S)
            self._socket.check()
            with self._lock:
                idle = not self._held and time.monotonic() - self._idle_since >= self.idle_s
                orphaned = not self._held and self._socket.listener is None
            if idle or orphaned:
                return

    def _handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "ping":
            with self._lock:
                if request.get("keep"):
                    self._idle_since = time.monotonic()
                sid = request.get("session_id")
                held = [
                    {
                        "call_id": h.running.call_id,
                        "attempt": h.running.attempt,
                        "pid": h.command.pid,
                    }
                    for h in self._held.values()
                    if sid is not None and h.session_id == sid
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
        deadline = request.get("deadline")
        if not isinstance(deadline, int | float) or time.monotonic() > deadline:
            # Read after its worker stopped waiting (this holder was frozen or busy): the
            # worker asks again, or has given the attempt up in Redis.
            logger.warning("call %s: attempt %d: refused a stale start request", cid, attempt)
            return {"ok": False, "error": STALE}
        with self._lock:
            known = self._held.get(cid)
        if known is not None and known.running.attempt == attempt:
            return {"ok": True, "state": "started", "pid": known.command.pid, "holder": self.name}
        owner = self.records.fence_start(cid, attempt, StartFenceReply.HOLDER)
        if owner is not StartFenceReply.HOLDER:
            # The call moved on, or its worker ran it itself or gave it up: not ours to start.
            logger.warning("call %s: attempt %d is not the holder's (%s)", cid, attempt, owner)
            return {"ok": False, "error": "lease_lost" if owner is StartFenceReply.LOST else owner}
        if known is not None:  # an older attempt of the call: it lost the call to this one
            known.running.token.cancel(LEASE_LOST)
        (code,) = self.records.renew([(cid, attempt)])
        if code is RenewReply.LOST:
            return {"ok": False, "error": "lease_lost"}
        running = Running(cid, CancelToken(), attempt)
        sid = message["session_id"]
        usage = AttemptUsage.of(message)
        emitter = Emitter(self, running, sid, usage, after_for_message(message))
        try:
            place = self.places.get(sid, str(message.get("config_hash") or ""))
        except ToolError as exc:  # its record or workspace cannot be trusted: nothing runs
            logger.warning("call %s: refused: %s", cid, exc)
            emitter.finish(start_failure(cid, exc))
            return {"ok": True, "state": "finished", "holder": self.name}
        # The command charges the call's meter when it ends (on its reader thread).
        meter = usage.metered.meter
        try:
            with metering(meter):
                command, flush = start_command(
                    place.runner(), message, emitter, request.get("trace") or {}
                )
        except Exception as exc:  # a missing workspace, no shell, ...
            logger.warning("call %s: could not start: %s", cid, exc)
            emitter.finish(start_failure(cid, exc))
            return {"ok": True, "state": "finished", "holder": self.name}
        held = _Held(running, command, emitter, flush, sid, meter)
        with self._lock:
            self._held[cid] = held

        def kill() -> None:
            command.kill("killed")

        running.token.on_cancel(kill)
        command.add_done_callback(lambda outcome: self._ended(held, outcome))
        if code is RenewReply.CANCEL_REQUESTED:
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
                with metering(held.meter):  # what the command used, for the call's record
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
        """Renew the held commands' leases and fence those Redis stops confirming
        (``lease_keeping.py``)."""

        def held_runs() -> list[Running]:
            with self._lock:
                return [h.running for h in self._held.values()]

        keep_leases(self.records, self.settings.lease_seconds, held_runs, self._stopping)


def main() -> int:
    logging.basicConfig(
        level=os.environ.get("TOOLHUB_HOLDER_LOGLEVEL", "INFO").upper(),
        format="%(asctime)s %(levelname)s [holder %(process)d] %(name)s: %(message)s",
    )
    settings = Settings.from_env()
    install_worker_sandbox(settings)  # the default sandbox of sessions whose config names none
    protect("the holder")
    try:
        return Holder(settings, HolderPaths.of(settings), idle_seconds()).serve()
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.ENOENT):
            logger.error("holder cannot listen on %s: %s", HolderPaths.of(settings).socket, exc)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
