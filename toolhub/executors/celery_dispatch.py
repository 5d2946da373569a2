"""How a distributed call enters the fleet: its message (signed when the fleet has a key), its
record, its quota check and the push onto its workload's queue.

Usually one round trip: kombu builds the message here and one script writes the record, checks
the tenant's quotas and pushes the message (``toolhub/distributed/enqueue.py``), in a pipeline
with the other dispatches of the loop turn. When the message cannot be built ahead, the record
is written first and Celery sends the message after it. A call that cannot be dispatched gets a
terminal result instead (Redis or the broker unreachable, over quota, its call id taken).
``CeleryDispatch`` is a mixin of ``CeleryExecutor``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kombu.exceptions import KombuError, OperationalError
from redis.exceptions import RedisError

from toolhub.core import CallResult, ToolError
from toolhub.distributed.celery_app import EXECUTE_TASK
from toolhub.distributed.codec import pack
from toolhub.distributed.pubsub import Subscription
from toolhub.distributed.quota import OverQuota, over_quota_error, quota_args
from toolhub.distributed.records import new_run_id
from toolhub.distributed.script_replies import CreateAndEnqueueReply as Created
from toolhub.distributed.script_replies import CreateReply
from toolhub.distributed.settings import queue_for
from toolhub.distributed.signing import sign_message
from toolhub.errors import ErrorCode
from toolhub.toolset import Prepared
from toolhub.tracing.worker import headers_json, message_headers

if TYPE_CHECKING:
    from celery import Celery

    from toolhub.distributed.enqueue import Enqueuer
    from toolhub.distributed.quota import QuotaLimits
    from toolhub.distributed.settings import Settings
    from toolhub.distributed.store import RedisStore
    from toolhub.hooks import SessionHooks
    from toolhub.toolset import ToolSet

logger = logging.getLogger("toolhub.executor.celery")


class CeleryDispatch:
    """Write a prepared call's record and enqueue its message."""

    if TYPE_CHECKING:
        toolset: ToolSet
        store: RedisStore
        app: Celery
        settings: Settings
        session_id: str
        tenant: str
        config_hash: str
        workspace: str
        hooks: SessionHooks
        enqueuer: Enqueuer
        quotas: QuotaLimits | None

    async def _dispatch(self, prepared: Prepared, subscription: Subscription) -> CallResult | bool:
        """Write the record and enqueue. Returns whether the subscription was confirmed before
        the message went out (then no event can predate it), or a terminal result when the call
        could not be dispatched."""
        entry, cid = prepared.entry, prepared.ctx.call_id
        queue = queue_for(entry.workload)
        run_id = new_run_id()
        message = self._message(prepared, run_id)
        fields = self._record_fields(prepared, queue, message)
        quota, held = quota_args(
            self.store.keys,
            self.quotas,
            counted="calls",
            workload=entry.workload,
            hold_seconds=self.settings.call_deadline_seconds(entry.workload),
        )
        fields.update(held)
        options: dict[str, Any] = {
            "kwargs": message,
            "queue": queue,
            "ignore_result": True,
            "kwargsrepr": self._kwargsrepr(message),
        }
        headers = message_headers()  # the call's trace context; None when tracing is off
        if headers is not None:
            options["headers"] = headers
            fields["trace"] = headers_json(headers)  # for a message built later (backlog.py)
        try:
            captured = self.enqueuer.message(
                EXECUTE_TASK, queue, message, options["kwargsrepr"], headers
            )
        except (OperationalError, KombuError, RedisError, OSError):
            captured = None  # the two-step path below reports what is unreachable
        # The subscription went out first. When it is active before the message is queued, no
        # event can predate it and the follower skips its initial stream read: either Redis
        # confirmed it already, or the enqueue script saw the channel subscribed (code 4). The
        # dispatch never waits for the confirmation, which would cost every call a round trip.
        created: CreateReply | Created | OverQuota
        try:
            if captured is not None:
                # One round trip: the record, and the message kombu built, pushed by the
                # same script (toolhub/distributed/enqueue.py).
                fresh = subscription.confirmed
                created = await self._create_and_enqueue(
                    *self._script_args(cid, run_id, fields, captured, quota)
                )
            else:
                created = self.store.records.create(cid, run_id, fields, quota)
        except RedisError as exc:
            return dispatch_failure(
                prepared, ErrorCode.REDIS_UNAVAILABLE, f"cannot reach Redis: {exc}"
            )
        if isinstance(created, OverQuota):
            assert self.quotas is not None
            return CallResult.failure(
                prepared.name,
                over_quota_error(self.quotas.tenant, created),
                tool_id=entry.fq_id,
                call_id=cid,
            )
        # ``create`` answers a subset of ``create_and_enqueue``'s replies, same names and values.
        if created not in (Created.CREATED, Created.CREATED_SUBSCRIBED):
            detail = "belongs to a call still running" if created == Created.IN_USE else "is taken"
            return dispatch_failure(
                prepared, ErrorCode.CALL_ID_IN_USE, f"call id {cid!r} {detail}: choose another"
            )
        if captured is not None:
            return fresh or created == Created.CREATED_SUBSCRIBED
        fresh = subscription.confirmed
        try:
            self.app.send_task(EXECUTE_TASK, **options)
        except (OperationalError, KombuError, RedisError, OSError) as exc:
            result = dispatch_failure(
                prepared, ErrorCode.BROKER_UNAVAILABLE, f"cannot enqueue the call: {exc}"
            )
            try:
                self.store.records.mark_failed_dispatch(cid, self.session_id, result)
            except RedisError:
                logger.warning("call %s: could not mark the undispatched record failed", cid)
            return result
        return fresh

    async def _create_and_enqueue(self, keys: list[Any], args: list[Any]) -> Created | OverQuota:
        # In one pipeline with every other dispatch of this loop turn (dispatch_batch.py).
        created = await self.store.dispatches.create_and_enqueue(keys, args)
        if created == Created.SESSION_EXPIRED:
            self._store_session()
            created = await self.store.dispatches.create_and_enqueue(keys, args)
        return created

    def _script_args(
        self,
        cid: str,
        run_id: str,
        fields: dict[str, Any],
        captured: tuple[bytes, bytes],
        quota: list[Any],
    ) -> tuple[list[Any], list[Any]]:
        """The keys and arguments of the script that writes the record and pushes the
        message kombu built (``captured``) in one round trip."""
        return self.store.records.create_and_enqueue_args(
            cid,
            run_id,
            fields,
            *captured,
            config_hash=self.config_hash,
            tenant=self.tenant,
            quota=quota,
        )

    def _message(self, prepared: Prepared, run_id: str) -> dict[str, Any]:
        """The call's message, under canonical names, signed (with a fleet key the workers
        run only signed messages); the session's ``after`` hooks ride in it."""
        entry = prepared.entry
        message = {
            "call_id": prepared.ctx.call_id,
            "run_id": run_id,
            "session_id": self.session_id,
            "config_hash": self.config_hash,
            "name": entry.client_name,
            "tool": entry.fq_id,
            "arguments": prepared.arguments,
            "max_attempts": self.settings.max_attempts,
            **self.hooks.message_fields(prepared),
        }
        return sign_message(message)

    def _record_fields(
        self, prepared: Prepared, queue: str, message: dict[str, Any]
    ) -> dict[str, Any]:
        """The call record's first fields, the packed message among them."""
        entry = prepared.entry
        return {
            "session_id": self.session_id,
            "tool": entry.fq_id,
            "name": entry.client_name,
            "queue": queue,
            "max_attempts": self.settings.max_attempts,
            "on_lost": entry.on_worker_lost,
            "message": pack(message),
        }

    def _store_session(self) -> None:
        """Store the session again: it sat unused past its TTL and its stored config expired,
        and the workers build from it."""
        config = self.toolset.config
        self.store.put_session(
            self.session_id,
            config=config.model_dump_json(),
            config_hash=config.config_hash(),
            workspace=self.workspace,
        )

    def _kwargsrepr(self, message: dict[str, Any]) -> str:
        """What Flower shows: tool, call and session always; arguments only when allowed."""
        shown = {k: message[k] for k in ("tool", "name", "call_id", "session_id")}
        shown["arguments"] = message["arguments"] if self.settings.show_arguments else "<redacted>"
        return repr(shown)[:1024]


def dispatch_failure(prepared: Prepared, code: str, detail: str) -> CallResult:
    """The typed failure of a call the dispatcher could not queue (Redis unreachable, its id
    taken): shared by ``CeleryExecutor`` and ``CeleryApprovals``."""
    return CallResult.failure(
        prepared.name,
        ToolError.custom(code, detail),
        tool_id=prepared.entry.fq_id,
        call_id=prepared.ctx.call_id,
    )
