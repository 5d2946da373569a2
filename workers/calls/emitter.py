"""Publishing one attempt's events: fenced by attempt, and patient through a Redis blip.

A failed write is retried with backoff for up to ``follow_outage_seconds`` (a Redis restart
should not fail a call that is otherwise fine), and for as long as Redis refuses it for memory
(a full Redis answers: it is not gone, and the write lands once there is room). If Redis stays
away, or the write is refused because another attempt owns the call now, the call's token
fires and this attempt stops: the lease then lets the call be recovered, so nothing is
published twice or by a stranger.

With the attempt's ``AttemptUsage``, the emitter is the one place on a worker that sees all a
call's output: it charges the bytes of each progress item and of the result to the attempt's
meter, and the terminal carries the call's figures into its record and its tenant's totals.
For the same reason it is where a call's ``after`` hooks run (``toolhub.hooks.after``): each
item passes through them before it is written, so nothing of a call reaches Redis (record,
stream, pub/sub) and what reads it (SSE, ``task_output``) unredacted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Protocol, TypeVar

from redis.exceptions import RedisError

from toolhub.core import CallResult, Progress
from toolhub.core.tool import LEASE_LOST, REDIS_LOST
from toolhub.distributed.codec import encode_item
from toolhub.distributed.records import CallRecords, StreamBounds
from toolhub.distributed.redis_full import is_full
from toolhub.distributed.settings import Settings
from toolhub.hooks import CallAfter
from toolhub.tenancy.session_quotas import quotas_of_session
from toolhub.tracing.worker import progress as traced_progress

from .running import Running
from .usage import AttemptUsage

logger = logging.getLogger("toolhub.worker")

T = TypeVar("T")


class EmitterHost(Protocol):
    """What an emitter writes through: a worker's runtime, or the background holder."""

    @property
    def records(self) -> CallRecords: ...

    @property
    def settings(self) -> Settings: ...


def stream_bounds(session_id: str) -> StreamBounds:
    """The progress bytes Redis keeps of a call and of a session of ``session_id``'s tenant:
    the worker that emits passes them, so the bound is the operator's policy where the
    command runs, whatever the dispatcher asked."""
    quotas = quotas_of_session(session_id)
    return StreamBounds(quotas.stream_bytes_per_call, quotas.stream_bytes_per_session)


class Emitter:
    def __init__(
        self,
        runtime: EmitterHost,
        running: Running,
        session_id: str,
        usage: AttemptUsage | None = None,
        after: CallAfter | None = None,
    ) -> None:
        self.runtime = runtime
        self.after = after
        self.running = running
        self.session_id = session_id
        self.bounds = stream_bounds(session_id)
        self.usage = usage
        self.stopped = False
        self.finished = False
        self._finish_lock = threading.Lock()

    def progress(self, item: Progress) -> None:
        if self.stopped:
            return
        for hooked in [item] if self.after is None else self.after.progress(item):
            self._publish(hooked)

    def _publish(self, item: Progress) -> None:
        if self.stopped:
            return
        traced_progress(self.running.call_id, item)  # after the hooks: spans see what Redis does
        if self.usage is not None:
            self.usage.charge_output(item)
        payload = encode_item(item, self.running.attempt)
        seq = self._patiently(
            lambda: self.runtime.records.emit(
                self.running.call_id,
                self.running.attempt,
                [payload],
                sid=self.session_id,
                bounds=self.bounds,
            )
        )
        if seq is not None and seq < 0:
            self._fenced()

    def finish(self, result: CallResult) -> bool:
        """Publish the terminal once: a cancel (from the control thread) and the tool's own
        result may race; whichever comes first is the terminal, the other is a no-op."""
        with self._finish_lock:
            if self.stopped or self.finished:
                return False
            if self.after is not None:
                for held in self.after.flush():
                    self._publish(held)
                result = self.after.result(result)
                if self.stopped:
                    return False
            usage = self.usage.finish(result) if self.usage is not None else None
            seq = self._patiently(
                lambda: self.runtime.records.finish(
                    self.running.call_id, self.session_id, self.running.attempt, result, usage
                )
            )
            if seq is not None and seq < 0:
                self._fenced()
                return False
            self.finished = seq is not None
            if self.finished and self.usage is not None and usage is not None:
                self.usage.counted(usage, result)
            return self.finished

    def _fenced(self) -> None:
        logger.warning(
            "call %s: attempt %d no longer owns the call",
            self.running.call_id,
            self.running.attempt,
        )
        self.stopped = True
        self.running.token.cancel(LEASE_LOST)

    def _patiently(self, write: Callable[[], T]) -> T | None:
        deadline = time.monotonic() + self.runtime.settings.follow_outage_seconds
        backoff = 0.05
        while True:
            try:
                return write()
            except RedisError as exc:
                if is_full(exc):  # Redis answered: full, not gone; wait for room
                    deadline = time.monotonic() + self.runtime.settings.follow_outage_seconds
                if time.monotonic() >= deadline:
                    logger.error(
                        "call %s: Redis unreachable, giving up this attempt: %s",
                        self.running.call_id,
                        exc,
                    )
                    self.stopped = True
                    self.running.token.cancel(REDIS_LOST)
                    return None
                time.sleep(backoff)
                backoff = min(backoff * 2, 1.0)
