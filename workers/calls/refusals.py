"""What a worker does with a queue item it will not run: it stays up, runs nothing of it, and
loses nothing silently.

Two places refuse items. The queue screen (``guards/poison.py``) sees every item kombu pops, before
kombu or Celery touch it: one that is undecodable or not a toolhub task message
(``toolhub.distributed.messages``) would otherwise stop the worker, and a malformed one was
redelivered to every fresh worker. The task body checks the fleet signature of every message
before anything is claimed or run (``admit``; ``toolhub.distributed.signing``), its issue
time with it (a message older than the fleet's message age is ``expired``): that check relies
on no kombu internals, so it holds however a message was delivered. A signed message whose run
already finished (its record reset by a writer of Redis, its message pushed again) is refused
by its claim (``replayed``, ``replay``).

Both end in ``refuse``: the item to the dead-letter list (``toolhub.distributed.deadletter``),
one log line (why, queue, size; never the item's content), the
``toolhub_worker_messages_deadlettered_total{reason}`` metric, and, when the item names a call
still queued under its run id, a ``message_refused`` answer to that call, so its caller does
not wait for a run that will never come.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

from redis.exceptions import RedisError

from toolhub.distributed.celery_app import BACKGROUND_TASK
from toolhub.distributed.codec import pack
from toolhub.distributed.deadletter import DeadLetters
from toolhub.distributed.signing import (
    EXPIRED,
    KEY_ENV,
    REQUIRE_ENV,
    FleetKeyError,
    FleetKeys,
    SignatureRefused,
    fleet_keys,
    signing_required,
)
from toolhub.distributed.store import RedisStore
from toolhub.tenancy.principal import tenant_of_session
from workers.lifecycle.metrics import metrics

logger = logging.getLogger("toolhub.worker.refusals")

#: Exit code of a worker that refuses to start: signatures required but no usable key.
EXIT_NO_FLEET_KEY = 2
#: What a task body returns for a message it refused (the Celery task's result, unused).
REFUSED = "refused"
#: The claim's answer (and the dead-letter reason) for a message of a run that finished.
REPLAYED = "replayed"


def worker_fleet_keys() -> FleetKeys | None:
    """The keys this worker verifies messages and session records with. Exits the process
    (``EXIT_NO_FLEET_KEY``, the reason on stderr) when ``TOOLHUB_FLEET_KEY`` is unusable, or
    missing while ``TOOLHUB_REQUIRE_SIGNED`` is on."""
    try:
        keys = fleet_keys()
    except FleetKeyError as exc:
        _exit(str(exc))
    if keys is None and signing_required():
        _exit(f"{REQUIRE_ENV} is set but {KEY_ENV} is not")
    return keys


def announce(keys: FleetKeys | None) -> None:
    """Say once, when the worker is ready (its log handlers are set up by then), what it
    trusts: without a key, Redis itself is the trust boundary."""
    if keys is None:
        logger.warning(
            "queued messages and session records are not signed (no %s): whoever can write "
            "to Redis can run commands on this worker",
            KEY_ENV,
        )
    else:
        logger.info("running only messages signed with fleet key %s", keys.current.kid)


def _exit(why: str) -> Any:
    sys.stderr.write(f"toolhub worker: refusing to start: {why}\n")
    sys.stderr.flush()
    raise SystemExit(EXIT_NO_FLEET_KEY)


class Refusals:
    def __init__(self, store: RedisStore, worker: str, keys: FleetKeys | None) -> None:
        self.deadletters = DeadLetters(store.client, store.keys)
        self.records = store.records
        self.settings = store.settings
        self.worker = worker
        self.keys = keys

    def admit(self, task: str, message: dict[str, Any], queue: str) -> bool:
        """Whether ``message`` may run: always without a fleet key, else only when it is
        signed with one of the fleet's keys for ``task`` and issued within the fleet's message
        age; a refused one is ``refuse``d."""
        try:
            self._verify(task, message)
        except SignatureRefused as refused:
            # Genuine but expired: no copy of it can ever run, so a call it left running
            # with a lapsed lease is answered too (``records.refuse``).
            self._refuse_message(
                message, queue, refused.reason, refused.why, lapsed=refused.reason == EXPIRED
            )
            return False
        return True

    def verifies(self, task: str, message: dict[str, Any]) -> bool:
        """Whether ``admit`` would let ``message`` run, with nothing refused or written."""
        try:
            self._verify(task, message)
        except SignatureRefused:
            return False
        return True

    def _verify(self, task: str, message: dict[str, Any]) -> None:
        if self.keys is None:
            return
        workload = "background" if task == BACKGROUND_TASK else "command"
        self.keys.verify_message(task, message, self.settings.message_max_age_seconds(workload))

    def replay(self, message: dict[str, Any], queue: str) -> None:
        """A message whose claim found its run finished (``replayed``): the record was reset
        after the call finished, and the message pushed again. Its call is answered."""
        self._refuse_message(
            message,
            queue,
            REPLAYED,
            f"run {str(message.get('run_id'))[:32]!r} of this call already finished; "
            "a message is never run twice",
            lapsed=False,
        )

    def _refuse_message(
        self, message: dict[str, Any], queue: str, reason: str, why: str, *, lapsed: bool
    ) -> None:
        try:
            raw = pack(message)
        except (TypeError, ValueError, OverflowError):
            raw = b""  # verify_message said it cannot be encoded; the entry says why
        call_id, run_id = message.get("call_id"), message.get("run_id")
        session_id = message.get("session_id")
        self.refuse(
            raw,
            queue,
            reason,
            why,
            call_id=call_id if isinstance(call_id, str) else None,
            run_id=run_id if isinstance(run_id, str) else None,
            lapsed=lapsed,
            tenant=tenant_of_session(session_id) if isinstance(session_id, str) else None,
        )

    def refuse(
        self,
        raw: bytes,
        queue: str,
        reason: str,
        why: str,
        *,
        call_id: str | None = None,
        run_id: str | None = None,
        lapsed: bool = False,
        tenant: str | None = None,
    ) -> None:
        """Dead-letter one item, count it, log it (with the ``tenant`` its session names, when
        known), and answer its call if it names one (``lapsed``: also when it is running with
        a lapsed lease, ``records.refuse``)."""
        metrics.deadlettered.labels(reason).inc()
        answered = False
        try:
            self.deadletters.put(
                raw, reason=reason, why=why, queue=queue, worker=self.worker, call_id=call_id
            )
            if call_id and run_id:
                answered = self.records.refuse(call_id, run_id, why, lapsed=lapsed)
        except RedisError as exc:
            logger.warning(
                "refused a queue item from %s (%s: %s) and could not dead-letter it: %s",
                queue,
                reason,
                why,
                exc,
            )
            return
        logger.warning(
            "refused a queue item from %s (%s: %s; %d bytes%s%s): moved to %s",
            queue,
            reason,
            why,
            len(raw),
            f"; tenant {tenant[:64]!r}" if tenant else "",
            f"; call {call_id[:64]!r} answered" if answered and call_id else "",
            self.deadletters.key,
        )
