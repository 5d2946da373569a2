"""The fleet's ``RemoteTaskLedger``: the remote MCP task an attempt of a call polls, kept in Redis
beside the call record (``call:{cid}:remote``), so that the attempt after a lost one polls that
task again instead of calling the tool a second time.

It is written once per remote task, by a script fenced as every worker write is: only while
the attempt that got the handle still owns the call and its lease is live, so a zombie attempt
cannot leave a task behind that the current one does not know of. It takes the call record's
TTL; the call's terminal moves it on with the record's, and a new call under the same id drops
it (``scripts.py``). The sweep and the claim read whether it exists: a lost attempt that left
one is resumed whatever the tool's policy on worker loss (``recovery.py``).
"""

from __future__ import annotations

import json
import logging

from redis import Redis
from redis.exceptions import RedisError

from toolhub.backends.remote_task_ledger import CallAttempt, RemoteTask
from toolhub.core import ToolError
from toolhub.errors import ErrorCode

from .keys import Keys
from .lua import source
from .script_replies import RememberReply

logger = logging.getLogger("toolhub.distributed.redis_task_ledger")


class RedisRemoteTaskLedger:
    """The remote tasks of one fleet's calls (any session: the key is the call's)."""

    def __init__(self, client: Redis, keys: Keys) -> None:
        self.client = client
        self.keys = keys
        self._remember = client.register_script(source("remember_remote_task"))

    def current(self, call_id: str) -> CallAttempt | None:
        """One round trip. Raises a ``redis_unavailable`` ``ToolError`` when Redis cannot say:
        guessing "no task" would call the tool a second time."""
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(self.keys.call(call_id), ["status", "attempt", "max_attempts", "lost"])
        pipe.get(self.keys.remote_task(call_id))
        try:
            (status, attempt, max_attempts, lost), raw = pipe.execute()
        except RedisError as exc:
            raise ToolError.custom(
                ErrorCode.REDIS_UNAVAILABLE,
                f"could not read whether an earlier attempt of this call started a remote task "
                f"({exc}); the tool was not called",
            ) from None
        if status != b"running" or not attempt:
            return None
        task = _decode(call_id, raw) if raw else None
        return CallAttempt(int(attempt), int(max_attempts or 1), task, int(lost or 0))

    def remember(self, call_id: str, attempt: int, task: RemoteTask) -> bool:
        record = json.dumps(task.to_dict())
        keys = [self.keys.call(call_id), self.keys.remote_task(call_id)]
        try:
            reply = self._remember(keys=keys, args=[attempt, record])
            return RememberReply(int(reply)) is RememberReply.RECORDED
        except RedisError as exc:
            logger.warning("call %s: remote task %s not recorded: %s", call_id, task.task_id, exc)
            return False


def _decode(call_id: str, raw: bytes) -> RemoteTask:
    """A record that cannot be read still says a remote task was started: the outcome is
    unknown, and calling the tool again could run it twice."""
    try:
        return RemoteTask.from_dict(json.loads(raw))
    except (ValueError, KeyError, TypeError):
        raise ToolError.custom(
            ErrorCode.REMOTE_OUTCOME_UNKNOWN,
            f"an earlier attempt of call {call_id} started a remote task whose record cannot be "
            "read: whether the remote tool finished, and what it did, is unknown. It was not "
            "called again; check its effects before calling it again.",
            may_have_run=True,
        ) from None
