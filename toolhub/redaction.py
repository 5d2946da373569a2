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

Tool output is the third leak: a command prints a token (``env``, ``cat ~/.aws/credentials``).
``redact_secrets`` adds the shapes of common credentials (GitHub, OpenAI/Anthropic-style
``sk-…``, Slack, AWS access keys and secret keys, private key blocks) to ``redact``; the
secrets-redaction hook (``toolhub/hooks/secrets.py``) applies it to every call's output before
anything is stored or streamed, and ``remember``s the values of the environment variables the
operator marks, so they are masked as ``${NAME}`` too.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
import threading

from pydantic_core import to_json

#: Shorter values are not secrets worth masking, and masking them would garble text.
MIN_SECRET_LENGTH = 6
MASK = "***"
_QUERY_SECRET = re.compile(
    r"(?i)([?&](?:[a-z0-9_.-]*(?:token|secret|password|passwd|pwd|api[_-]?key|apikey|auth"
    r"|signature|sig|key|credential|session)[a-z0-9_.-]*)=)([^&#\s\"']*)"
)

#: Credential shapes: (label, a text every match contains, pattern). A match is shown as
#: ``[REDACTED:<label>]``, after what its group ``keep`` matched (the name of a ``key = value``
#: pair). The pattern runs only on a text that holds its marker (lower-cased for the AWS
#: secret), so most text costs a substring search per shape.
TOKEN_SHAPES: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    (
        "private_key",
        "PRIVATE KEY-----",
        re.compile(
            r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----"
        ),
    ),
    ("github_token", "gh", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}")),
    ("github_token", "github_pat_", re.compile(r"\bgithub_pat_\w{20,}")),
    ("api_key", "sk-", re.compile(r"\bsk-[A-Za-z0-9_-]{20,}")),
    ("slack_token", "xox", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    ("aws_access_key", "IA", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    (
        "aws_secret_key",
        "aws_secret_access_key",
        re.compile(r"(?i)(?P<keep>aws_secret_access_key\s*[=:]\s*[\"']?)[A-Za-z0-9/+=]{40}"),
    ),
)


def _masked(mask: str, match: re.Match[str]) -> str:
    return (match.groupdict().get("keep") or "") + mask


#: Per shape: its marker, whether the marker is matched in any case, the pattern, and the
#: replacement.
_SHAPES = tuple(
    (
        marker,
        bool(pattern.flags & re.IGNORECASE),
        pattern,
        functools.partial(_masked, f"[REDACTED:{label}]"),
    )
    for label, marker, pattern in TOKEN_SHAPES
)
#: The first line of a private key block: a block cut by a stream (its end not yet seen).
PRIVATE_KEY_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----")
PRIVATE_KEY_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY-----")

#: The case-sensitive shapes of ``TOKEN_SHAPES`` without their word boundaries (a character
#: JSON writes escaped, such as a newline, is a word character's neighbour there), and the
#: marker of a private key block: what ``may_change`` looks for, with the remembered values.
#: None of these characters is written differently in JSON (no quote, backslash or control).
SHAPE_CORES = (
    r"gh[pousr]_[A-Za-z0-9]{20}|github_pat_\w{20}|sk-[A-Za-z0-9_-]{20}"
    r"|xox[abposr]-[A-Za-z0-9-]{10}|(?:AKIA|ASIA)[0-9A-Z]{16}|PRIVATE KEY-----"
)

_lock = threading.Lock()
_secrets: dict[str, str] = {}
#: ``_secrets``, longest first (a value inside another is replaced after it); None: stale.
_by_length: list[tuple[str, str]] | None = None
#: ``SHAPE_CORES`` or a remembered value, as is or as JSON writes it; None: stale.
_cores: re.Pattern[str] | None = None


def remember(name: str, value: str) -> None:
    """Record that ``value`` came from the variable ``name``: masked as ``${name}`` from now
    on, in this process."""
    if len(value) < MIN_SECRET_LENGTH:
        return
    global _by_length, _cores
    with _lock:
        _secrets[value] = name
        _by_length = _cores = None


def redact(text: str) -> str:
    """``text`` with every remembered secret shown as its ``${NAME}`` reference and every
    credential-like query parameter masked."""
    global _by_length
    known = _by_length
    if known is None:
        with _lock:
            known = _by_length = sorted(_secrets.items(), key=lambda item: -len(item[0]))
    for value, name in known:
        if value in text:
            text = text.replace(value, "${" + name + "}")
    return redact_query(text)


def redact_secrets(text: str) -> str:
    """``redact`` plus every credential shape of ``TOKEN_SHAPES`` masked."""
    text = redact(text)
    lowered: str | None = None
    for marker, any_case, pattern, masked in _SHAPES:
        if any_case:  # the AWS secret's name, in any case
            lowered = text.lower() if lowered is None else lowered
            if marker not in lowered:
                continue
        elif marker not in text:
            continue
        text = pattern.sub(masked, text)
        lowered = None
    return text


def may_change(text: str) -> bool:
    """False only when ``redact_secrets`` gives ``text`` back as it is, and equally any string
    whose JSON form (``pydantic_core.to_json``) is inside ``text``: so one call settles every
    string of a JSON-written value. A True may be a false alarm (a remembered value's JSON form
    met elsewhere, a marker in a dict key): the caller then redacts string by string.

    Why it holds: a string ``redact_secrets`` changes holds a remembered value, a match of a
    shape (each holds its part in ``SHAPE_CORES``, or the AWS secret's name in any case) or a
    credential-like query parameter; and JSON writes a string character by character (only
    quotes, backslashes and control characters differ), so each of these is in the string's
    JSON form too, the value as JSON writes it."""
    if _cores_pattern().search(text) is not None:
        return True
    if "aws_secret_access_key" in text.lower():
        return True
    return "=" in text and ("?" in text or "&" in text) and _QUERY_SECRET.search(text) is not None


def _cores_pattern() -> re.Pattern[str]:
    global _cores
    found = _cores
    if found is None:
        with _lock:
            forms = {SHAPE_CORES}
            for value in _secrets:
                forms.add(re.escape(value))
                # A lone surrogate: JSON cannot write it, so no JSON text holds the value.
                with contextlib.suppress(ValueError):
                    forms.add(re.escape(to_json(value).decode()[1:-1]))
            found = _cores = re.compile("|".join(sorted(forms)))
    return found


def redact_query(text: str) -> str:
    """Credential-like query parameter values (``token``, ``api_key``, ``sig`` …) masked."""
    if "=" not in text or ("?" not in text and "&" not in text):
        return text  # no query parameter: spares the scan of a long output
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
