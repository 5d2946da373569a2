"""Approvals of a fleet's calls, in Redis: the call's own record says ``awaiting_approval``
and holds what will run, the rule that asked, the
expiry (``approval_expires``) and the decisions (``approval``: the rule, the canonical
arguments asked for, each decision); the session's zset
``session:{sid}:approvals`` lists the waiting ones. Nothing is queued until an approval.

Each transition is one Lua script (``lua/await_approval.lua``, ``lua/approve.lua`` run in
front of ``lua/create_and_enqueue.lua``, ``lua/decide_approval.lua``), so any dispatcher may
answer, a dispatcher, gateway or worker that dies while a call waits loses nothing (the record
is the state), and of two approvers answering at once exactly one queues the call. Threat: a
client answering for a call of another session: every script checks the record's session.
"""

from __future__ import annotations

import json
from typing import Any

from redis import Redis

from toolhub.core import CallResult

from . import replies
from .codec import encode_item, pack
from .keys import Keys
from .record_decode import decode_record
from .script_replies import ApproveReply, AwaitApprovalReply, DecideApprovalReply
from .scripts import Scripts
from .settings import Settings


class RedisApprovals:
    def __init__(self, client: Redis, scripts: Scripts, keys: Keys, settings: Settings) -> None:
        self.client = client
        self.scripts = scripts
        self.keys = keys
        self.settings = settings

    def ask(
        self, cid: str, sid: str, fields: dict[str, Any], approval: dict[str, Any]
    ) -> AwaitApprovalReply:
        """Record the call as awaiting approval (``fields``: session, tool, name, queue...)."""
        expires = float(approval["expires_at"])
        ttl = int(expires - float(approval["asked_at"])) + self.settings.record_ttl_seconds
        flat: list[Any] = [cid, ttl, expires]
        for name, value in {
            **fields,
            "approval": json.dumps(approval),
            "approval_expires": f"{expires:.6f}",
        }.items():
            flat += [name, value]
        keys = [
            self.keys.call(cid),
            self.keys.events(cid),
            self.keys.approvals(sid),
            self.keys.approvals_due,
        ]
        return AwaitApprovalReply(int(self.scripts.await_approval(keys=keys, args=flat)))

    def approve(self, sid: str, keys: list[Any], args: list[Any]) -> ApproveReply:
        """Approve and queue, in one script: ``keys`` and ``args`` those of
        ``create_and_enqueue`` (``CallRecords.create_and_enqueue_args``)."""
        reply = self.scripts.approve(
            keys=[*keys, self.keys.approvals(sid), self.keys.approvals_due], args=args
        )
        return ApproveReply(int(reply))

    def end(
        self,
        cid: str,
        sid: str,
        result: CallResult,
        approval: dict[str, Any],
        *,
        due: bool = False,
    ) -> DecideApprovalReply | int:
        """End a waiting call with ``result`` (denied, expired, cancelled): the terminal's
        seq, or why not (``DecideApprovalReply``). ``due``: only past its expiry."""
        k = self.keys
        status = "cancelled" if result.error and result.error.kind == "cancelled" else "failed"
        reply = int(
            self.scripts.decide_approval(
                keys=[
                    k.call(cid),
                    k.events(cid),
                    k.channel(cid),
                    k.leases,
                    k.state(sid),
                    k.approvals(sid),
                    k.approvals_due,
                ],
                args=[
                    cid,
                    status,
                    encode_item(result, 0),
                    pack(result.to_dict()),
                    self.settings.record_ttl_seconds,
                    json.dumps(approval),
                    "1" if due else "0",
                ],
            )
        )
        return reply if reply > 0 else DecideApprovalReply(reply)

    def record(self, cid: str) -> dict[str, Any] | None:
        raw = replies.hgetall(self.client, self.keys.call(cid))
        if not raw:
            return None
        found = decode_record(raw)
        found["call_id"] = cid
        return found

    def waiting(self, sid: str) -> list[str]:
        """The session's calls awaiting approval (expired ones too, until someone ends them)."""
        return [c.decode() for c, _ in replies.zscored(self.client, self.keys.approvals(sid))]

    def due(self, limit: int = 100) -> list[str]:
        """Calls of any session whose approval expired by now (the workers' sweep ends them)."""
        return [
            c.decode()
            for c in replies.zrangebyscore(
                self.client, self.keys.approvals_due, replies.time(self.client), limit
            )
        ]

    def waiting_count(self, sid: str) -> int:
        return int(self.client.zcard(self.keys.approvals(sid)))


class WaitingApprovals:
    """How many of one session's calls await approval (``PendingApprovals``), for the
    reminder a worker adds after each call: one ``ZCARD``, only for sessions that have
    waited for one (the zset exists), else a miss Redis answers at once."""

    def __init__(self, client: Redis, keys: Keys, session_id: str) -> None:
        self.client = client
        self.key = keys.approvals(session_id)

    def waiting_count(self) -> int:
        return int(self.client.zcard(self.key))
