"""Recovery of calls whose worker was lost: the record side of the sweep every worker runs.

Two ways a worker can lose a call, each found by its own index:

* **While it ran** (``leases``): the lease stopped being renewed. Depending on the call's
  policy on worker loss (``on_lost``, from the tool's config) the sweep re-enqueues it as the
  next attempt (``rerun``) or fails it with ``worker_lost``, saying the command may have partly
  run (``fail``). A lost attempt that recorded a remote MCP task (``redis_task_ledger.py``) is
  re-enqueued under either policy (``resume``): the next attempt polls that task instead of
  calling the tool again, so nothing runs twice.
* **Before it claimed the call** (``pending``): kombu took the message off the queue and the
  worker died before its claim (or kombu lost the message between its read and its unacked
  bookkeeping). Nothing ran, so the call is re-enqueued from the stored message, counted in
  ``requeued``; a call taken and lost ``max_attempts`` times fails. A call whose message is still
  in its queue, or held by a live worker that has not started it yet (``touch_reserved``), is
  left alone.

Each step is one script (``lua/requeue.lua``, ``sweep_unclaimed.lua``…), so concurrent sweeps
by many workers act once.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from toolhub.core import CallResult, ToolError
from toolhub.errors import ErrorCode

from . import replies
from .codec import encode_item, pack, unpack
from .records import CallRecords
from .script_replies import ReenqueueReply, RequeueOutcome, SweepReply

SWEEP_LIMIT = 100


logger = logging.getLogger("toolhub.recovery")


@dataclass(frozen=True, slots=True)
class Unclaimed:
    """A queued call past its claim deadline whose message left the queue unclaimed."""

    call_id: str
    message: dict[str, Any]
    requeued: int


class Recovery:
    def __init__(self, records: CallRecords) -> None:
        self.records = records
        self.client = records.client
        self.keys = records.keys
        self.settings = records.settings
        self.scripts = records.scripts

    # -- lost while running -------------------------------------------------------------------

    def expired(self, limit: int = SWEEP_LIMIT) -> list[str]:
        return self._due(self.keys.leases, limit)

    def requeue(self, cid: str) -> tuple[dict[str, Any], RequeueOutcome] | None:
        """(message, outcome) for a call whose lease expired, or None (not expired, finished).
        ``outcome``: ``rerun`` or ``resume`` (re-enqueue it; ``resume``: the lost attempt left a
        remote task to take up), or ``fail`` (its policy is to fail instead: ``fail_lost``).
        The lease index entry is pushed forward so one sweep acts on it once."""
        reply = self.scripts.requeue(
            keys=[self.keys.call(cid), self.keys.leases], args=[cid, self.settings.lease_seconds]
        )
        if not reply:
            return None
        raw, outcome = reply
        if raw is None:
            # A running record with no message (not one a dispatcher wrote whole): nothing to
            # run again; it leaves the lease index instead of failing every sweep.
            self.client.zrem(self.keys.leases, cid)
            logger.warning("call %s: lease expired but its record holds no message", cid)
            return None
        return unpack(raw), RequeueOutcome(outcome.decode())

    def fail_lost(self, cid: str, message: dict[str, Any]) -> bool:
        """Fail a running call whose worker is gone, without running it again."""
        result = partly_run_result(message["name"], cid, message.get("tool"))
        return bool(self._finalize(self.scripts.fail_lost, cid, message["session_id"], result))

    # -- lost before the claim ----------------------------------------------------------------

    def unclaimed(self, limit: int = SWEEP_LIMIT) -> list[str]:
        return self._due(self.keys.pending, limit)

    def sweep_unclaimed(self, cid: str) -> Unclaimed | None:
        """The call to re-enqueue when its message was taken and never claimed, else None."""
        reply = self.scripts.sweep_unclaimed(
            keys=[self.keys.call(cid), self.keys.pending],
            args=[cid, self.settings.claim_deadline_seconds],
        )
        if SweepReply(reply[0].decode()) is not SweepReply.TAKEN or not reply[1]:
            return None
        message, requeued = reply[1], int(reply[2])
        return Unclaimed(cid, unpack(message), requeued)

    def reenqueue(self, cid: str, run_id: str, queue_key: bytes, payload: bytes) -> bool:
        """Push a fresh copy of the call's message (same run id: one claim wins)."""
        k = self.keys
        reply = self.scripts.reenqueue(
            keys=[k.call(cid), queue_key, k.pending],
            args=[cid, run_id, payload, self.settings.claim_deadline_seconds],
        )
        return ReenqueueReply(int(reply)) is ReenqueueReply.QUEUED

    def count_requeue(self, cid: str) -> None:
        """Count a re-enqueue that went through kombu's own publish (no captured payload)."""
        self.client.hincrby(self.keys.call(cid), "requeued", 1)

    def fail_unclaimed(self, lost: Unclaimed) -> bool:
        message = lost.message
        result = never_claimed_result(
            message["name"], lost.call_id, message.get("tool"), lost.requeued
        )
        return bool(
            self._finalize(self.scripts.fail_queued, lost.call_id, message["session_id"], result)
        )

    def touch_reserved(self, calls: list[tuple[str, str]]) -> None:
        """Move on the claim deadline of calls (id, run id) a live worker holds unstarted."""
        if not calls:
            return
        pipe = self.client.pipeline(transaction=False)
        for cid, run_id in calls:
            self.scripts.touch_reserved(
                keys=[self.keys.call(cid), self.keys.pending],
                args=[cid, run_id, self.settings.claim_deadline_seconds],
                client=pipe,
            )
        pipe.execute()

    # -- helpers ------------------------------------------------------------------------------

    def _due(self, index: str, limit: int) -> list[str]:
        now = replies.time(self.client)
        return [i.decode() for i in replies.zrangebyscore(self.client, index, now, limit)]

    def _finalize(self, script: Any, cid: str, sid: str, result: CallResult) -> Any:
        return script(
            keys=self.records.call_keys(cid, sid),
            args=[
                cid,
                encode_item(result, 0),
                pack(result.to_dict()),
                self.settings.record_ttl_seconds,
            ],
        )


def partly_run_result(name: str, cid: str, tool: str | None) -> CallResult:
    return CallResult.failure(
        name,
        ToolError.custom(
            ErrorCode.WORKER_LOST,
            "The worker running this call was lost while the call ran, so it has no result. "
            "It was not run again (this tool's policy on worker loss is `fail`): the command "
            "may have partly run. Check its effects before calling it again.",
            may_have_run=True,
        ),
        tool_id=tool,
        call_id=cid,
    )


def never_claimed_result(name: str, cid: str, tool: str | None, times: int) -> CallResult:
    return CallResult.failure(
        name,
        ToolError.custom(
            ErrorCode.WORKER_LOST,
            f"The call was taken off its queue {times} time(s) by workers that were lost before "
            "they claimed it, so it never ran as an attempt (only a read-only tool starts "
            "before its claim, and nothing it does needs undoing). It may be crashing its "
            "workers: check it before calling again.",
            may_have_run=False,
            requeued=times,
        ),
        tool_id=tool,
        call_id=cid,
    )


def announce_rerun(result: CallResult, attempt: int, max_attempts: int) -> CallResult:
    """The result of a call that ran again after its worker was lost, saying so first thing
    in what the model reads: the lost attempt's side effects may have happened too."""
    note = (
        f"[toolhub] The worker running this call was lost; the call ran again from the start "
        f"(attempt {attempt} of {max_attempts}). Side effects of the lost attempt may have "
        "happened as well."
    )
    return CallResult(
        name=result.name,
        prompt_text=f"{note}\n{result.prompt_text}",
        output=result.output,
        error=result.error,
        tool_id=result.tool_id,
        call_id=result.call_id,
        effective_tool_name=result.effective_tool_name,
        content=result.content,
    )
