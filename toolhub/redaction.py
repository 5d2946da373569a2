"""Secrets out of every message: values that came from ``${VAR}`` references, and credentials
in URL query strings, replaced before a warning, a log line or an error reaches anyone.

A config names its secrets by reference (``token: ${HUB_TOKEN}``, ``url:
https://x/mcp?t=${T}``) and toolhub expands them at connect time (``toolhub.env_refs``). The
expanded value then travels inside URLs and command lines into exception texts (httpx puts
the URL in its errors), session warnings and logs. So every value expanded from a reference
is remembered here, process-wide, and ``redact`` replaces it with ``${NAME}``, the form the
config wrote. The access log is the other leak: a client that sends ``?token=…`` (refused:
only the ``Authorization`` header authenticates) would have it recorded; ``redact_query``
masks the values of credential-like query parameters, and ``AccessLogRedaction`` applies it
to uvicorn's access log.
"""

from __future__ import annotations

import logging
import re
import threading

#: Shorter values are not secrets worth masking, and masking them would garble text.
MIN_SECRET_LENGTH = 6
MASK = "***"
_QUERY_SECRET = re.compile(
    r"(?i)([?&](?:[a-z0-9_.-]*(?:token|secret|password|passwd|pwd|api[_-]?key|apikey|auth"
    r"|signature|sig|key|credential|session)[a-z0-9_.-]*)=)([^&#\s\"']*)"
)

_lock = threading.Lock()
_secrets: dict[str, str] = {}


def remember(name: str, value: str) -> None:
    """Record that ``value`` came from the variable ``name``: masked as ``${name}`` from now
    on, in this process."""
    if len(value) < MIN_SECRET_LENGTH:
        return
    with _lock:
        _secrets[value] = name


def redact(text: str) -> str:
    """``text`` with every remembered secret shown as its ``${NAME}`` reference and every
    credential-like query parameter masked."""
    with _lock:
        known = sorted(_secrets.items(), key=lambda item: -len(item[0]))
    for value, name in known:
        if value in text:
            text = text.replace(value, "${" + name + "}")
    return redact_query(text)


def redact_query(text: str) -> str:
    """Credential-like query parameter values (``token``, ``api_key``, ``sig`` …) masked."""
    return _QUERY_SECRET.sub(lambda m: m.group(1) + (MASK if m.group(2) else ""), text)


class AccessLogRedaction(logging.Filter):
    """On uvicorn's ``uvicorn.access`` logger: the request line's query credentials masked.
    uvicorn logs ``(client, method, path, http version, status)`` as the record's args."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        return True


def redact_access_log() -> None:
    """Install ``AccessLogRedaction`` on uvicorn's access logger (once)."""
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, AccessLogRedaction) for f in access.filters):
        access.addFilter(AccessLogRedaction())
