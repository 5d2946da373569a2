"""What a task tells Celery, and so Flower, about the call it handled.

A task body ends with an ``Ended``: what became of its message (``said``, the Celery result
and the worker log's word: ``finished``, ``cancelled``, ``duplicate``, ``held`` …) and, when the
message ended its call as a failure, the error's kind and code. ``report`` turns it into the
Celery outcome Flower shows:

* a call that succeeded, or a message that did not end its call (a duplicate delivery, a
  hand-back, a background command the holder took), returns ``said``: ``SUCCESS``, as before;
* a call that failed sends the worker's ``task-failed`` event with the error kind (and code)
  as its exception, e.g. ``ToolError('permission_denied')``: ``FAILURE``;
* a cancelled call sends ``task-revoked``: ``REVOKED``.

Both then raise ``celery.exceptions.Ignore``, Celery's way for a task that reports its own
state: the worker acks the message at once and records nothing more (no ``task-succeeded``
after the event, no retry, no redelivery, no result). Nothing is raised before the call's
terminal is in its Redis record, which stays the truth: Flower only mirrors it. The event
goes through the worker's own request, so it uses the worker's event dispatcher (its batch,
after the task's ``task-started``) and is not sent when task events are off.

The error's detail is never sent: it may quote the call's arguments (a path, a command), which
Flower never sees (``TOOLHUB_SHOW_ARGUMENTS``). The record has it.
"""

from __future__ import annotations

from dataclasses import dataclass

from celery import Task
from celery.exceptions import Ignore

from toolhub.core import CallResult, ErrorKind, ToolError
from toolhub.errors import ErrorCode
from toolhub.fences.celery import held_request

CANCELLED = ErrorKind.CANCELLED.value


@dataclass(frozen=True, slots=True)
class Ended:
    """What a task body did with its message; ``kind``/``code`` when it ended its call as a
    failure (``cancelled`` for a cancelled call)."""

    said: str
    kind: str | None = None
    code: str | None = None

    @classmethod
    def failed(cls, said: str, error: ToolError | None) -> Ended:
        if error is None:
            return cls(said)
        code = error.code  # a StrEnum when toolhub set it: kept as its plain value
        return cls(said, error.kind.value, None if code is None else str(code))

    @classmethod
    def settled(cls, said: str, result: CallResult) -> Ended:
        """After ``claimed.settle``: ``finished`` published ``result``, ``cancelled`` means
        the cancel itself published the call's terminal; anything else left the call to
        another attempt (or to the queue)."""
        if said == "finished":
            return cls.failed(said, result.error)
        if said == "cancelled":
            return cls(said, CANCELLED)
        return cls(said)

    @classmethod
    def custom(cls, said: str, code: ErrorCode) -> Ended:
        return cls(said, ErrorKind.CUSTOM.value, code.value)

    @property
    def state(self) -> str:
        """The Celery state this reports: SUCCESS, FAILURE or REVOKED."""
        if self.kind is None:
            return "SUCCESS"
        return "REVOKED" if self.kind == CANCELLED else "FAILURE"

    @property
    def exception(self) -> str:
        """The ``exception`` of the ``task-failed`` event: the kind and code, no detail."""
        with_code = f", code={self.code!r}" if self.code else ""
        return f"ToolError({self.kind!r}{with_code})"


def report(task: Task, ended: Ended) -> str:
    """Return ``ended.said`` (SUCCESS), or send the event of a failed or cancelled call and
    raise ``Ignore`` (the message is acked, nothing else is recorded)."""
    if ended.kind is None:
        return ended.said
    request = held_request(task.request.id)
    if request is None:  # not run by a worker's consumer (a direct call): nothing to tell
        return ended.said
    if ended.kind == CANCELLED:
        request.send_event("task-revoked", terminated=False, signum=None, expired=False)
    else:
        request.send_event("task-failed", exception=ended.exception, traceback=None)
    raise Ignore(ended.said)
