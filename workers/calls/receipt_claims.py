"""A call's claim written as its message is received, so Redis runs it while Celery hands the
message to a pool thread.

Between the consumer thread's receipt of a message and the task function on a pool thread,
Celery spends some 300 us on a two-core machine (the strategy, the hand-off to the pool, the
tracer): about one round trip to Redis, which the claim then added. The claim was the one round
trip toolhub adds to Celery's path (docs/benchmarks.md, ``bench_critical_path.py``). Here the
consumer thread, in Celery's ``task_received`` signal, registers the call and writes its claim
on a connection of its own without reading the reply; the pool thread reads the reply when its
turn comes (``take``, ``reply``), usually there already. The claim is the same script with the same
arguments, so what it answers, and what the worker does with each answer, are unchanged
(``claimed.py``).

Only for a message that will start at once and that no check of the pool thread would stop
before its claim: a ``toolhub.execute`` message at fair-dispatch level 0 (the level gate holds
no such message, ``level_gate.py``), signed and in date when the fleet has keys (the pool
thread's ``Refusals.admit`` still runs), while a pool thread is free (the calls registered,
those claimed here among them, fewer than the pool's threads). Every other message is claimed
from its pool thread, as before.

Registered at receipt, before its claim is written, the call's cancel finds its token, as when
the pool thread registers it. Nothing renews a claim's lease until its pool thread takes the
attempt up (the lease keeper renews claimed attempts only), so a message with an ETA (which
Celery runs later) is not claimed at receipt, a claim read more than a third of a lease after
it was written has its lease renewed before it is run on (fenced by its attempt: if another
attempt took the call meanwhile, the pool thread claims again, which says so), and one no pool
thread took up within a lease (Celery did not run its message: a pool shut down in between) is
read and dropped, its registration ended, the next time a message arrives (``received``). A
claim whose message the pool thread refuses is read and dropped the same way (``discard``).
In these two cases the lease lapses and the fleet's sweep re-runs or fails the call by its
policy. Threat: none
new; the claim runs only for a message the pool thread's own checks would let run.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from redis.connection import Connection
from redis.exceptions import RedisError

from toolhub.distributed.celery_app import EXECUTE_TASK
from toolhub.distributed.claims import decode_claim
from toolhub.distributed.evalsha import reply_of
from toolhub.distributed.replies import untyped
from toolhub.distributed.script_replies import ClaimAction, RenewReply
from workers.lifecycle.metrics import metrics

from .running import Running

if TYPE_CHECKING:
    from toolhub.distributed.records import CallRecords

    from .refusals import Refusals
    from .runtime import WorkerRuntime

logger = logging.getLogger("toolhub.worker")

#: The fair-dispatch levels that start without the level gate's hold: kombu's priority 0, or none.
LEVEL_ZERO = (None, 0)


@dataclass(slots=True)
class Sent:
    """A claim written at receipt: the call's registered run, the connection its reply is on,
    when it was written (``time.monotonic``)."""

    running: Running
    conn: Connection
    at: float = field(default_factory=time.monotonic)


class ReceiptClaims:
    """The claims written at receipt whose pool thread has not read them yet, by call id."""

    def __init__(self, lease_s: float) -> None:
        #: A claim's lease: one read later than a third of it is not run on, one not taken up
        #: within it is dropped.
        self.lease_s = lease_s
        self._sent: dict[str, list[Sent]] = {}
        #: Connections whose every reply was read, for the next claims (``recycle``).
        self._spare: list[Connection] = []
        self._lock = threading.Lock()

    def received(
        self, runtime: WorkerRuntime, refusals: Refusals, request: Any, threads: int
    ) -> None:
        """Celery's consumer received ``request`` for a pool of ``threads``: claim it now if it
        will start at once. Never raises: a message it leaves is claimed by its pool thread."""
        if getattr(request, "name", None) != EXECUTE_TASK:
            return
        if self._sent:
            self._drop_older_than(runtime, self.lease_s)
        if (getattr(request, "delivery_info", None) or {}).get("priority") not in LEVEL_ZERO:
            return
        if getattr(request, "eta", None) is not None:
            return  # Celery runs it at its ETA (toolhub sends none; a re-pushed copy may)
        if len(runtime.running()) >= threads:
            return
        try:
            message = request.kwargs
            call_id = message["call_id"]
            if not refusals.verifies(EXECUTE_TASK, message):
                return
            conn = self._connection(runtime)
            running = runtime.register(call_id)  # before the claim: a cancel finds its token
            try:
                runtime.records.send_claim(message, runtime.name, conn)
            except (RedisError, OSError):
                untyped(conn.disconnect)()
                self.recycle(conn)
                runtime.unregister(running)
                return
        except Exception:  # a message of the wrong shape: the pool thread's checks answer it
            logger.debug("a message was not claimed at its receipt", exc_info=True)
            return
        with self._lock:
            self._sent.setdefault(call_id, []).append(Sent(running, conn))
        metrics.claims_at_receipt.inc()

    def take(self, call_id: str) -> Sent | None:
        """The claim written at receipt for a message of ``call_id``, if any: its pool thread
        reads the reply (``reply``), hands it to ``CallRecords.claim(..., replied=)`` and owns
        the registration."""
        with self._lock:
            found = self._sent.get(call_id)
            if not found:
                return None
            sent = found.pop(0)
            if not found:
                del self._sent[call_id]
            return sent

    def reply(self, sent: Sent, records: CallRecords) -> Any:
        """The reply to ``sent``'s claim (an error reply or a broken connection as the
        exception). A claim to run read more than a third of a lease after it was written (a
        busy machine) first has its lease renewed, fenced by its attempt as the lease keeper's
        renewals are, since nothing renewed it before: the pool thread runs on it if that
        attempt still holds the call, and otherwise (None) claims again, which answers what
        is true now."""
        reply = self._read(sent)
        if time.monotonic() - sent.at <= self.lease_s / 3 or isinstance(reply, Exception):
            return reply
        claim = decode_claim(reply)
        if claim.action is not ClaimAction.RUN:
            return reply
        renewed = records.renew([(sent.running.call_id, claim.attempt)])[0]
        return reply if renewed in (RenewReply.RENEWED, RenewReply.CANCEL_REQUESTED) else None

    def recycle(self, conn: Connection) -> None:
        """``conn`` again, its claim's reply read (or the connection dropped, which the next
        write reconnects): a claim at receipt takes a connection of its own, the pool thread
        that reads the reply gives it back. Kept apart from the client's pool, whose checkout
        polls the socket for replies nobody read, a system call on the consumer's path."""
        with self._lock:
            self._spare.append(conn)

    def discard(self, runtime: WorkerRuntime, call_id: str) -> None:
        """The pool thread refused the message of a claim written at receipt: its reply is
        read and dropped, its registration ended, so its lease lapses and the fleet's sweep
        answers the call."""
        sent = self.take(call_id)
        if sent is None:
            return
        self._read(sent)
        runtime.unregister(sent.running)

    def _drop_older_than(self, runtime: WorkerRuntime, age_s: float) -> None:
        """Read and drop the claims no pool thread took up within ``age_s``."""
        now = time.monotonic()
        with self._lock:
            old = [sent for found in self._sent.values() for sent in found if now - sent.at > age_s]
            for sent in old:
                found = self._sent[sent.running.call_id]
                found.remove(sent)
                if not found:
                    del self._sent[sent.running.call_id]
        for sent in old:
            self._read(sent)
            runtime.unregister(sent.running)
            logger.warning("call %s: claimed at receipt, never started here", sent.running.call_id)

    def _read(self, sent: Sent) -> Any:
        """``sent``'s reply, its connection kept for the next claim."""
        try:
            return reply_of(sent.conn)
        finally:
            self.recycle(sent.conn)

    def _connection(self, runtime: WorkerRuntime) -> Connection:
        with self._lock:
            if self._spare:
                return self._spare.pop()
        return cast(Connection, runtime.records.client.connection_pool.make_connection())

    def __len__(self) -> int:
        with self._lock:
            return sum(len(found) for found in self._sent.values())
