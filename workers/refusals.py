"""What a worker does with a queue item it will not run: it stays up, runs nothing of it, and
loses nothing silently.

Two places refuse items. The queue screen (``poison.py``) sees every item kombu pops, before
kombu or Celery touch it: one that is undecodable or not a toolhub task message
(``toolhub.distributed.messages``) would otherwise stop the worker, and a malformed one was
redelivered to every fresh worker. The task body checks the fleet signature of every message
before anything is claimed or run (``admit``; ``toolhub.distributed.signing``): that check
relies on no kombu internals, so it holds however a message was delivered.

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

from toolhub.distributed.codec import pack
from toolhub.distributed.deadletter import DeadLetters
from toolhub.distributed.signing import (
    KEY_ENV,
    REQUIRE_ENV,
    FleetKeyError,
    FleetKeys,
    SignatureRefused,
    fleet_keys,
    signing_required,
)
from toolhub.distributed.store import RedisStore

from .metrics import metrics

logger = logging.getLogger("toolhub.worker.refusals")

#: Exit code of a worker that refuses to start: signatures required but no usable key.
EXIT_NO_FLEET_KEY = 2
#: What a task body returns for a message it refused (the Celery task's result, unused).
REFUSED = "refused"


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
        self.worker = worker
        self.keys = keys

    def admit(self, task: str, message: dict[str, Any], queue: str) -> bool:
        """Whether ``message`` may run: always without a fleet key, else only when it is
        signed with one of the fleet's keys for ``task``; a refused one is ``refuse``d."""
        if self.keys is None:
            return True
        try:
            self.keys.verify_message(task, message)
        except SignatureRefused as refused:
            try:
                raw = pack(message)
            except (TypeError, ValueError, OverflowError):
                raw = b""  # verify_message said it cannot be encoded; the entry says why
            call_id, run_id = message.get("call_id"), message.get("run_id")
            self.refuse(
                raw,
                queue,
                refused.reason,
                refused.why,
                call_id=call_id if isinstance(call_id, str) else None,
                run_id=run_id if isinstance(run_id, str) else None,
            )
            return False
        return True

    def refuse(
        self,
        raw: bytes,
        queue: str,
        reason: str,
        why: str,
        *,
        call_id: str | None = None,
        run_id: str | None = None,
    ) -> None:
        """Dead-letter one item, count it, log it, and answer its call if it names one."""
        metrics.deadlettered.labels(reason).inc()
        answered = False
        try:
            self.deadletters.put(
                raw, reason=reason, why=why, queue=queue, worker=self.worker, call_id=call_id
            )
            if call_id and run_id:
                answered = self.records.refuse(call_id, run_id, why)
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
            "refused a queue item from %s (%s: %s; %d bytes%s): moved to %s",
            queue,
            reason,
            why,
            len(raw),
            f"; call {call_id[:64]!r} answered" if answered and call_id else "",
            self.deadletters.key,
        )
