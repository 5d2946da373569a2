"""State transitions of a call record (queued → running → finished), one Lua script each.

Dispatchers create and cancel; workers claim, emit, renew, finish and hand back; the sweeper
re-enqueues calls whose lease expired. ``scripts.py`` says why each step is a script.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from redis import Redis
from redis.connection import Connection

from toolhub.core import CallResult, ToolError
from toolhub.errors import ErrorCode

from . import replies
from .claims import Claim, decode_claim
from .codec import encode_item, pack, unpack
from .evalsha import run_script, send_scripts
from .fair import over_queue, sunk_queue
from .keys import Keys
from .quota import NO_QUOTA, OverQuota, script_reply
from .script_replies import (
    CancelReply,
    ClaimAction,
    CreateAndEnqueueReply,
    CreateReply,
    RenewReply,
    StartFenceReply,
)
from .scripts import Scripts
from .settings import Settings
from .usage import CallUsage, hour_of, usage_key

TERMINAL_STATUSES = frozenset({"succeeded", "failed", "cancelled"})


def new_run_id() -> str:
    return os.urandom(8).hex()


def status_of(result: CallResult) -> str:
    if result.error is None:
        return "succeeded"
    return "cancelled" if result.error.kind == "cancelled" else "failed"


@dataclass(frozen=True, slots=True)
class StreamBounds:
    """The progress bytes Redis keeps of one call's stream and of one session's streams
    (``Quotas.stream_bytes_per_call`` / ``stream_bytes_per_session`` of the session's tenant,
    passed by the worker that emits). Threat: a command printing without end fills Redis'
    memory for every tenant. The full output stays in the command's log file."""

    per_call: int = 1 << 20
    per_session: int = 16 << 20


#: Leases renewed per script call: Redis runs each call whole, so a batch stays short.
RENEW_BATCH = 500


class CallRecords:
    def __init__(self, client: Redis, settings: Settings) -> None:
        self.client = client
        self.settings = settings
        self.keys = Keys(settings.prefix)
        self.scripts = Scripts(client, settings)

    def call_keys(self, cid: str, sid: str = "") -> list[str]:
        k = self.keys
        return [k.call(cid), k.events(cid), k.channel(cid), k.leases, k.state(sid)]

    # -- dispatcher side ---------------------------------------------------------------------------

    def create(
        self, cid: str, run_id: str, fields: dict[str, Any], quota: list[Any] = NO_QUOTA
    ) -> CreateReply | OverQuota:
        """Write a fresh ``queued`` record: ``CREATED``; ``IN_USE`` when the id is a live
        call's, ``OTHER_SESSION`` when it is another session's call; a finished record of the
        same session under the same id is replaced (clients reuse ids like ``c1``). ``quota``:
        the tenant's quota arguments (``quota.quota_args``); over one, ``OverQuota`` and
        nothing written."""
        k = self.keys
        created = script_reply(
            self.scripts.create(
                keys=[k.call(cid), k.events(cid), k.pending],
                args=[
                    run_id,
                    self.settings.active_ttl_seconds,
                    self.settings.claim_deadline_seconds,
                    cid,
                    *quota,
                    *_flat(fields),
                ],
            )
        )
        return created if isinstance(created, OverQuota) else CreateReply(created)

    def create_and_enqueue(
        self,
        cid: str,
        run_id: str,
        fields: dict[str, Any],
        queue_key: bytes,
        message: bytes,
        *,
        config_hash: str,
        tenant: str,
        quota: list[Any] = NO_QUOTA,
    ) -> CreateAndEnqueueReply | OverQuota:
        """``create`` and, if it succeeded, push the prepared broker message onto its queue,
        in one script (one round trip), refreshing the session's TTLs (``CreateAndEnqueueReply``:
        ``SESSION_EXPIRED`` asks to store the session's config again). ``tenant``: whose
        share of the queues the call takes (``fair.py``)."""
        keys, args = self.create_and_enqueue_args(
            cid,
            run_id,
            fields,
            queue_key,
            message,
            config_hash=config_hash,
            tenant=tenant,
            quota=quota,
        )
        created = script_reply(self.scripts.create_and_enqueue(keys=keys, args=args))
        return created if isinstance(created, OverQuota) else CreateAndEnqueueReply(created)

    def create_and_enqueue_args(
        self,
        cid: str,
        run_id: str,
        fields: dict[str, Any],
        queue_key: bytes,
        message: bytes,
        *,
        config_hash: str,
        tenant: str,
        quota: list[Any] = NO_QUOTA,
    ) -> tuple[list[Any], list[Any]]:
        """The keys and arguments of the ``create_and_enqueue`` script (``dispatch_batch.py``
        sends many in one pipeline); ``quota``: the tenant's quota arguments."""
        k, sid = self.keys, str(fields["session_id"])
        keys: list[Any] = [
            k.call(cid),
            k.events(cid),
            queue_key,
            k.pending,
            k.session(sid),
            k.config(config_hash),
            k.state(sid),
            k.session_tasks(sid),
            k.channel(cid),
            k.fair_queued(tenant),
            sunk_queue(queue_key),
            over_queue(queue_key),
        ]
        args: list[Any] = [
            run_id,
            self.settings.active_ttl_seconds,
            message,
            self.settings.claim_deadline_seconds,
            cid,
            self.settings.session_ttl_seconds,
            *quota,
            *_flat(fields),
        ]
        return keys, args

    def mark_failed_dispatch(self, cid: str, sid: str, result: CallResult) -> None:
        """A call whose message never reached the broker: failed, with its terminal event, so
        nobody following it waits forever."""
        self.scripts.fail_queued(
            keys=self.call_keys(cid, sid),
            args=[
                cid,
                encode_item(result, 0),
                pack(result.to_dict()),
                self.settings.record_ttl_seconds,
            ],
        )

    def refuse(self, cid: str, run_id: str, why: str, *, lapsed: bool = False) -> bool:
        """Answer a queued call whose message a worker refused (``message_refused``), if the
        record is still queued under ``run_id`` (or running under it after that run finished:
        a replay; ``lapsed``, for a genuine message too old to run: running with a lapsed
        lease); whether it was answered."""
        name, tool, sid = replies.hmget(
            self.client, self.keys.call(cid), "name", "tool", "session_id"
        )
        if name is None:
            return False
        error = ToolError.custom(
            ErrorCode.MESSAGE_REFUSED,
            f"a worker refused this call's message ({why}); it did not run",
        )
        result = CallResult.failure(
            name.decode(), error, tool_id=tool.decode() if tool else None, call_id=cid
        )
        answered = self.scripts.refused(
            keys=self.call_keys(cid, (sid or b"").decode()),
            args=[
                cid,
                encode_item(result, 0),
                pack(result.to_dict()),
                self.settings.record_ttl_seconds,
                run_id,
                "1" if lapsed else "",
            ],
        )
        return bool(answered)

    def cancel(self, cid: str, reason: str = "cancelled") -> CancelReply:
        """``cancelled`` (it was queued, or its worker is gone: terminal written now),
        ``signalled`` (running: the worker got a control message), ``finished`` or ``unknown``."""
        name, tool, sid = replies.hmget(
            self.client, self.keys.call(cid), "name", "tool", "session_id"
        )
        if name is None:
            return CancelReply.UNKNOWN
        result = cancelled_result(name.decode(), cid, tool.decode() if tool else None, reason)
        message = pack({"op": "cancel", "call_id": cid, "reason": reason})
        outcome = self.scripts.cancel(
            keys=[*self.call_keys(cid, (sid or b"").decode()), self.keys.control],
            args=[
                cid,
                encode_item(result, 0),
                pack(result.to_dict()),
                self.settings.record_ttl_seconds,
                message,
            ],
        )
        return CancelReply(outcome.decode() if isinstance(outcome, bytes) else str(outcome))

    # -- worker side -------------------------------------------------------------------------------

    def send_claim(self, message: dict[str, Any], worker: str, conn: Connection) -> None:
        """Write the claim of ``claim`` on ``conn`` without reading its reply, which its
        reader hands to ``claim(..., replied=)`` (``workers/calls/receipt_claims.py``)."""
        keys, head = self._claim_call(message, worker)
        send_scripts(conn, self.scripts.claim, [(keys, [*head, b"", b"", b"", b""])])

    def claim(self, message: dict[str, Any], worker: str, *, replied: Any = None) -> Claim:
        """Claim the call for this attempt. The terminals the script writes when the call's
        worker was lost too often, or a cancel was requested, go only with a second claim
        that the first one asked for (``terminal``), so a claim does not build and send two
        terminals for a branch almost no claim takes. ``replied``: the reply to a
        ``send_claim`` of this message, read by its caller, instead of claiming again; one
        that failed (Redis did not know the script, the connection broke: an exception) is
        sent again, and a claim that did run before its connection broke then answers
        ``duplicate`` (the message is dropped and the lease left to lapse, as when any
        claim's reply is lost)."""
        cid = message["call_id"]
        keys, head = self._claim_call(message, worker)
        reply = replied
        if reply is None or isinstance(reply, Exception):
            reply = run_script(self.client, self.scripts.claim, keys, [*head, b"", b"", b"", b""])
        if reply[0] == ClaimAction.TERMINAL.encode():
            name, tool = message["name"], message.get("tool")
            lost = lost_result(name, cid, tool, int(message.get("max_attempts", 0)))
            cancelled = cancelled_result(name, cid, tool, "cancelled")
            terminals = [
                encode_item(lost, 0),
                pack(lost.to_dict()),
                encode_item(cancelled, 0),
                pack(cancelled.to_dict()),
            ]
            reply = run_script(self.client, self.scripts.claim, keys, [*head, *terminals])
        return decode_claim(reply)

    def _claim_call(self, message: dict[str, Any], worker: str) -> tuple[list[Any], list[Any]]:
        """The claim script's keys and its first arguments, for ``message``'s call."""
        cid = message["call_id"]
        head = [
            cid,
            message["run_id"],
            worker,
            self.settings.lease_seconds,
            self.settings.record_ttl_seconds,
        ]
        return self.call_keys(cid, message["session_id"]), head

    def emit(
        self,
        cid: str,
        attempt: int,
        payloads: list[bytes],
        *,
        sid: str = "",
        bounds: StreamBounds | None = None,
    ) -> int:
        """Append and publish; -1 when this attempt no longer owns the call (fenced off).
        The call's stream keeps at most ``bounds.per_call`` bytes of progress and session
        ``sid``'s streams together ``bounds.per_session`` (older progress is trimmed: the
        readers' marker, ``StreamBounds``)."""
        k = self.keys
        bounds = bounds or StreamBounds()
        keys = [
            k.call(cid),
            k.events(cid),
            k.channel(cid),
            k.session_streams(sid),
            k.session_stream_bytes(sid),
        ]
        args = [attempt, bounds.per_call, bounds.per_session, self.settings.record_ttl_seconds]
        return int(run_script(self.client, self.scripts.emit, keys, [*args, *payloads]))

    def finish(
        self, cid: str, sid: str, attempt: int, result: CallResult, usage: CallUsage | None = None
    ) -> int:
        """Publish the terminal of this attempt; with ``usage``, the call's figures go on its
        record and into its tenant's hour (``usage.py``) in the same step."""
        status, payload, packed, ttl = self._terminal(result, attempt)
        keys = self.call_keys(cid, sid)
        args: list[Any] = [cid, attempt, status, payload, packed, ttl, status]
        if usage is not None:
            keys.append(usage_key(self.keys, usage.tenant, hour_of(time.time())))
            args += usage.script_args()
        return int(run_script(self.client, self.scripts.finish, keys, args))

    def _terminal(self, result: CallResult, attempt: int) -> tuple[str, bytes, bytes, int]:
        """What a finishing script writes: the status, the terminal event's payload, the
        record's result and the TTL of what stays."""
        ttl = self.settings.record_ttl_seconds
        return status_of(result), encode_item(result, attempt), pack(result.to_dict()), ttl

    def renew(self, leases: list[tuple[str, int]]) -> list[RenewReply]:
        """Renew several leases, one script call per ``RENEW_BATCH``: per call ``LOST`` (this
        attempt lost the call), ``RENEWED``, ``CANCEL_REQUESTED`` (renewed, but a cancel was
        requested) or ``ENDED`` (this attempt's own terminal is written: nothing to stop). The
        renewal lands on a full Redis too (``lua/renew_many.lua``). One command
        for hundreds of calls costs the worker (with the GIL held) a fraction of a pipeline of
        one script call each."""
        codes: list[int] = []
        for at in range(0, len(leases), RENEW_BATCH):
            batch = leases[at : at + RENEW_BATCH]
            args: list[Any] = [self.settings.lease_seconds]
            for cid, attempt in batch:
                args += [cid, attempt]
            codes += self.scripts.renew_many(
                keys=[self.keys.leases, *(self.keys.call(cid) for cid, _ in batch)], args=args
            )
        return [RenewReply(int(code)) for code in codes]

    def fence_start(self, cid: str, attempt: int, runner: StartFenceReply) -> StartFenceReply:
        """Take attempt ``attempt`` of a background command for ``runner`` (the holder, the
        worker, or nobody: ``WITHDRAWN``) unless someone has it; returns who has it, or
        ``LOST`` when the call is no longer running as that attempt (``start_fence.lua``)."""
        reply = self.scripts.start_fence(keys=[self.keys.call(cid)], args=[attempt, runner.value])
        return StartFenceReply(reply.decode() if isinstance(reply, bytes) else reply)

    def handoff(self, cid: str, attempt: int) -> dict[str, Any] | None:
        """Give a running call back (graceful shutdown); returns its message to re-enqueue."""
        raw = self.scripts.handoff(
            keys=[self.keys.call(cid), self.keys.leases], args=[cid, attempt]
        )
        return unpack(raw) if raw else None


def cancelled_result(name: str, cid: str, tool: str | None, reason: str) -> CallResult:
    return CallResult.failure(
        name, ToolError.cancelled(f"The call was cancelled ({reason})."), tool_id=tool, call_id=cid
    )


def _flat(fields: dict[str, Any]) -> list[Any]:
    flat: list[Any] = []
    for name, value in fields.items():
        flat += [name, value]
    return flat


def lost_result(name: str, cid: str, tool: str | None, attempts: int) -> CallResult:
    return CallResult.failure(
        name,
        ToolError.custom(
            ErrorCode.WORKER_LOST,
            f"The worker running this call was lost {attempts} time(s); it was not retried "
            "again. Each lost attempt may have partly run: check its effects, and whether the "
            "command crashes its worker, before calling it again.",
            may_have_run=True,
            attempts=attempts,
        ),
        tool_id=tool,
        call_id=cid,
    )
