"""Log lines that name the call they belong to, and one JSON object per line when asked.

Why a context variable: a worker runs many calls at once on pool threads (and their event
loops), and a gateway runs many on one loop; the code that logs (tools, backends, the store)
has no call id at hand. ``call_context`` sets the call for the code running inside it: threads
keep their own value and asyncio tasks copy it when they are created, so every line logged
while a call is handled, however deep, carries its id.

``TOOLHUB_LOG_FORMAT=json`` (the compose file and the Helm chart set it) makes worker and
gateway logs one JSON object per line with ``ts``, ``level``, ``logger``, ``message`` and,
inside a call, ``call_id``, ``session_id`` and ``tool``: what a log pipeline indexes without a
parser. Anything else keeps the human-readable format each process already had.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime

from toolhub.redaction import redact

FORMAT_ENV = "TOOLHUB_LOG_FORMAT"
CALL_FIELDS = ("call_id", "session_id", "tool")


@dataclass(frozen=True, slots=True)
class CallContext:
    call_id: str
    session_id: str | None = None
    tool: str | None = None


_current: ContextVar[CallContext | None] = ContextVar("toolhub_call", default=None)


@contextmanager
def call_context(
    call_id: str, session_id: str | None = None, tool: str | None = None
) -> Iterator[CallContext]:
    """Mark everything logged inside (in this thread or task, and in tasks it creates) as
    belonging to this call."""
    context = CallContext(call_id, session_id, tool)
    token = _current.set(context)
    try:
        yield context
    finally:
        _current.reset(token)


def json_logs() -> bool:
    return os.environ.get(FORMAT_ENV, "").strip().lower() == "json"


class CallContextFilter(logging.Filter):
    """Copies the current call onto each record (``%(call_id)s`` works in any format).

    It sits on handlers, not loggers: a logger's filters see only records logged to that very
    logger, a handler's see every record that propagates to it. The copy is taken in the
    thread that logs, so a formatter running elsewhere still sees the right call."""

    def filter(self, record: logging.LogRecord) -> bool:
        context = _current.get()
        for field in CALL_FIELDS:
            if not hasattr(record, field):
                setattr(record, field, getattr(context, field) if context else None)
        return True


class RedactionFilter(logging.Filter):
    """Secrets out of every record a handler writes (``toolhub.redaction``): third-party
    loggers log URLs too (httpx logs each request at INFO, the MCP SDK at DEBUG), so the
    handler, not each call site, is where a ``${VAR}`` value or a ``?token=`` is masked. The
    message is rendered once here and stored redacted; so is an exception's text."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(_PLAIN.formatException(record.exc_info))
        return True


_PLAIN = logging.Formatter()


def guard_handler(handler: logging.Handler) -> logging.Handler:
    """``handler`` with toolhub's filters (once each): the call fields, then redaction."""
    for kind in (CallContextFilter, RedactionFilter):
        if not any(isinstance(f, kind) for f in handler.filters):
            handler.addFilter(kind())
    return handler


class JsonFormatter(logging.Formatter):
    """One JSON object per record; call fields only when the record belongs to a call."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for field in CALL_FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                line[field] = value
        if record.exc_info:
            line["exc_info"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack_info"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


def adopt_handlers(logger: logging.Logger) -> None:
    """Give ``logger``'s handlers the call filter, and the JSON formatter in JSON mode.

    For processes whose framework already set up handlers (Celery's worker): their
    destinations and levels stay, only the line format changes."""
    json_mode = json_logs()
    for handler in logger.handlers:
        guard_handler(handler)
        if json_mode:
            handler.setFormatter(JsonFormatter())
    if json_mode:
        logging.captureWarnings(True)


def configure_json(level: int | str = logging.INFO) -> None:
    """JSON mode for a process that sets up logging itself (the gateway): one stderr handler
    on the root logger that every logger, uvicorn's included, propagates to."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = guard_handler(logging.StreamHandler())
    handler.setFormatter(JsonFormatter())
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)
