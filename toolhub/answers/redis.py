"""``AnswerBox`` in Redis: ``ask_user`` waits on a worker, the answer arrives at any dispatcher.

The question is registered in the session's hash before anybody hears of it; the answer is a
push onto a per-call list the waiting call blocks on, guarded by a script so an answer is only
accepted for an open question, once. Withdrawal (a cancelled call) pushes a marker that wakes
the waiter at once.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from redis import Redis

from toolhub.distributed import replies
from toolhub.distributed.codec import pack, unpack
from toolhub.distributed.keys import Keys
from toolhub.distributed.lua import source
from toolhub.distributed.script_replies import AnswerReply

from .base import Answers

#: Block at most this long per BLPOP, below the client's socket timeout.
_BLOCK_SLICE_S = 5.0
_WITHDRAWN = b"\x00withdrawn"


class RedisAnswerBox:
    def __init__(self, client: Redis, keys: Keys, session_id: str, ttl_s: int = 3600) -> None:
        self.client = client
        self.keys = keys
        self.session_id = session_id
        self.ttl_s = ttl_s
        self._answer = client.register_script(source("answer"))

    def post(self, call_id: str, questions: Sequence[Mapping[str, Any]]) -> None:
        pipe = self.client.pipeline()
        pipe.delete(self.keys.answer(call_id))
        pipe.hset(self.keys.questions(self.session_id), call_id, pack([dict(q) for q in questions]))
        pipe.execute()

    def wait(self, call_id: str, timeout_s: float) -> Answers | None:
        deadline = time.monotonic() + max(timeout_s, 0)
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                popped = replies.blpop(
                    self.client, self.keys.answer(call_id), min(remaining, _BLOCK_SLICE_S)
                )
                if popped is None:
                    continue
                data = popped[1]
                return None if data == _WITHDRAWN else unpack(data)
        finally:
            pipe = self.client.pipeline()
            pipe.hdel(self.keys.questions(self.session_id), call_id)
            pipe.delete(self.keys.answer(call_id))
            pipe.execute()

    def answer(self, call_id: str, answers: Answers) -> bool:
        keys = [self.keys.questions(self.session_id), self.keys.answer(call_id)]
        reply = self._answer(keys=keys, args=[call_id, pack(answers), self.ttl_s])
        return AnswerReply(int(reply)) is AnswerReply.ANSWERED

    def withdraw(self, call_id: str) -> None:
        pipe = self.client.pipeline()
        pipe.hdel(self.keys.questions(self.session_id), call_id)
        pipe.rpush(self.keys.answer(call_id), _WITHDRAWN)
        pipe.expire(self.keys.answer(call_id), self.ttl_s)
        pipe.execute()

    def pending(self) -> dict[str, list[dict[str, Any]]]:
        raw = replies.hgetall(self.client, self.keys.questions(self.session_id))
        return {key.decode(): unpack(value) for key, value in raw.items()}
