"""Everything a worker process shares between its calls: the store, the tool-set cache, the
table of running calls (call id → cancel token and attempt), and the loop each pool thread
runs its calls on. The background services that act on this table (the lease keeper, the
control listener) live in ``workers/lifecycle/``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any

from celery import Celery

from toolhub.backends.process import shared_cgroups
from toolhub.core import CancelToken
from toolhub.core.tool import HANDOFF, LEASE_LOST
from toolhub.distributed.backlog import Backlogs
from toolhub.distributed.celery_app import EXECUTE_TASK
from toolhub.distributed.enqueue import Enqueuer
from toolhub.distributed.recovery import Recovery
from toolhub.distributed.replication import ClaimReplication
from toolhub.distributed.settings import Settings, queue_for
from toolhub.distributed.signing import FleetKeys
from toolhub.distributed.store import RedisStore
from toolhub.tenancy import OperatorPolicy
from workers.holder.session_records import forget_ended
from workers.lifecycle.metrics import metrics

from .level_gate import LevelGate
from .receipt_claims import ReceiptClaims
from .running import Running
from .toolsets import ToolSets, worker_builder

logger = logging.getLogger("toolhub.worker")

#: How many leases a run may take to come back once asked to stop (or past its limit) before
#: it counts as stuck and its lease is no longer renewed.
STUCK_GRACE_LEASES = 4


class WorkerRuntime:
    def __init__(self, settings: Settings, app: Celery, keys: FleetKeys | None) -> None:
        self.settings = settings
        self.app = app
        self.store = RedisStore.from_settings(settings)
        self.records = self.store.records
        self.recovery = Recovery(self.records)
        self.backlogs = Backlogs(self.records)
        self.replication = ClaimReplication(
            self.store.client,
            self.store.keys.replication_marker,
            settings.claim_replicas,
            settings.claim_replica_wait_ms,
        )
        self.enqueuer = Enqueuer(app)
        #: Sunk calls start behind this worker's level-0 calls (``level_gate.py``).
        self.level_gate = LevelGate(settings.fair_hold_ms / 1000)
        #: Claims written as their message arrived, for their pool thread (``receipt_claims.py``).
        self.receipts = ReceiptClaims(settings.lease_seconds)
        #: Where this host's command cgroups live: the sweep reaps those of dead processes.
        self.cgroups = shared_cgroups()
        self.name = f"{socket.gethostname()}:{os.getpid()}"
        metrics.identity.labels(self.name).set(1)
        #: The operator policy every session's config is admitted against again; a policy
        #: file that cannot be read stops the worker (``ConfigError``) rather than run without.
        policy = OperatorPolicy.load()
        policy.restrict_expansion()
        root = Path(settings.workspace_root) if settings.workspace_root else None
        self.toolsets = ToolSets(
            self.store,
            app,
            worker_builder(settings),
            keys,
            policy=policy,
            workspace_root=root,
            capacity=settings.cached_sessions,
        )
        #: call id → its runs in this process: usually one, but a duplicate delivery of a call
        #: this process already runs registers too (and is dropped by its claim); it must not
        #: hide the real run from lease renewal and cancellation.
        self._running: dict[str, list[Running]] = {}
        self._lock = threading.Lock()
        self._local = threading.local()
        self._loops: list[asyncio.AbstractEventLoop] = []

    # -- running calls -----------------------------------------------------------------------

    def register(self, call_id: str, *, background: bool = False) -> Running:
        """Register before claiming, so a cancel that arrives right after the claim finds the
        call's token. ``background``: a background command's start, which may run as long as
        one (the foreground limit bounds any other run)."""
        settings = self.settings
        limit = settings.max_background_seconds if background else settings.max_foreground_seconds
        running = Running(call_id, CancelToken(), limit_s=limit)
        with self._lock:
            self._running.setdefault(call_id, []).append(running)
        return running

    def unregister(self, running: Running) -> None:
        with self._lock:
            runs = self._running.get(running.call_id, [])
            if running in runs:
                runs.remove(running)
            if not runs:
                self._running.pop(running.call_id, None)

    def running(self) -> list[Running]:
        with self._lock:
            return [run for runs in self._running.values() for run in runs]

    def stuck(self, running: Running) -> bool:
        """Whether ``running``'s pool thread is stuck (``Running.stuck``). The lease keeper
        then stops renewing its lease, so the fleet re-runs or fails the call as its policy
        says (however many of this worker's pool threads are held so), and its token is
        cancelled as a lost lease: its command is killed, and whatever the thread still
        returns is not published."""
        if not running.stuck(STUCK_GRACE_LEASES * self.settings.lease_seconds):
            return False
        if not running.reported_stuck:
            running.reported_stuck = True
            why = "since it was asked to stop" if running.stopping_since else "within its limit"
            logger.error(
                "call %s: its pool thread has not come back %s; its lease is no longer renewed",
                running.call_id,
                why,
            )
            running.token.cancel(LEASE_LOST)
        return True

    def cancel_local(self, call_id: str, reason: str = "cancelled") -> bool:
        with self._lock:
            runs = list(self._running.get(call_id, ()))
        for running in runs:
            running.token.cancel(reason)
        return bool(runs)

    def session_ended(self, session_id: str) -> None:
        """A session was deleted: its command logs and tmp on this host go."""
        if forget_ended(self.store, self.toolsets.session_dir(session_id), session_id):
            logger.info("session %s ended: its logs and tmp here removed", session_id)

    def hand_back_all(self) -> None:
        """Soft-shutdown window over: give every call still running back to the queue."""
        for running in self.running():
            running.token.cancel(HANDOFF)

    # -- helpers for the tasks ---------------------------------------------------------------

    def loop(self) -> asyncio.AbstractEventLoop:
        """This pool thread's event loop, reused across calls (a new loop per call costs more
        than the call). The runtime keeps a reference to every loop and closes them itself:
        a loop left to the garbage collector when its pool thread ends is closed from
        ``__del__`` in whatever thread collects it, which can deadlock on logging locks
        during Celery's shutdown."""
        loop: asyncio.AbstractEventLoop | None = getattr(self._local, "loop", None)
        if loop is None or loop.is_closed():
            loop = asyncio.new_event_loop()
            self._local.loop = loop
            with self._lock:
                self._loops.append(loop)
        return loop

    def enqueue(self, message: dict[str, Any]) -> None:
        """(Re-)send a call's message: a new attempt after a lost worker, or a hand-back."""
        task, queue, kwargsrepr = _routing(message)
        self.app.send_task(
            task, kwargs=message, queue=queue, ignore_result=True, kwargsrepr=kwargsrepr
        )

    def capture(
        self,
        message: dict[str, Any],
        queue: str | None = None,
        headers: dict[str, Any] | None = None,
    ) -> tuple[bytes, bytes] | None:
        """The (queue key, payload) kombu would push for ``message`` (onto ``queue`` when
        given, with ``headers`` beside Celery's: a trace context), without pushing it."""
        task, routed, kwargsrepr = _routing(message)
        return self.enqueuer.message(task, queue or routed, message, kwargsrepr, headers)

    def close(self) -> None:
        with self._lock:
            loops, self._loops = self._loops, []
        for loop in loops:
            if loop.is_running() or loop.is_closed():
                continue
            try:
                for task in asyncio.all_tasks(loop):
                    task.cancel()
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
        self.toolsets.close()
        self.store.close()


def _routing(message: dict[str, Any]) -> tuple[str, str, str]:
    task = message.get("task", EXECUTE_TASK)
    queue = message.get("queue") or queue_for("fast")
    return task, queue, repr({"call_id": message["call_id"], "name": message.get("name")})
