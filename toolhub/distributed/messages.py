"""What a worker accepts off a queue, checked before kombu or Celery touch the item.

A queue list holds whatever was pushed onto it, and kombu's Redis channel hands each item to
Celery's consumer on the thread that receives every message: an item that is not JSON raised
``JSONDecodeError`` there, and a well-formed envelope around a body of the wrong shape raised
in Celery's task strategy, and either stopped the worker ("Unrecoverable error"). A body of
the wrong shape had already been recorded as unacked, so kombu redelivered it to every fresh
worker, which died the same way (issue 13).

``read_queue_item`` decides, for the raw bytes of one item, whether it is a toolhub task
message that kombu and Celery can take without failing: kombu's Redis envelope (JSON, the
fields kombu's channel and QoS read), Celery's protocol-2 headers (the ones its strategy and
``Request`` interpret, with the types they expect), a msgpack body decoded as kombu decodes
it (``[[], kwargs, embed]``, no callbacks or chords: toolhub sends none) and kwargs that are
a toolhub message of the task the headers name (``EXECUTE_FIELDS``, ``BACKGROUND_FIELDS``,
``MCP_TOOLS_FIELDS``). Anything else raises ``PoisonMessage``, the only exception it raises (a
bounded fuzz holds it to that: ``tests/distributed/test_message_fuzz.py``); the worker
moves such an item to the dead-letter list (``deadletter.py``) instead of delivering it.

Unknown extra headers and kwargs are let through, so a newer dispatcher that adds a field is
not dead-lettered by an older worker. Signatures are not checked here: the task body checks
them (``workers/calls/refusals.py``), on a path that runs for every message however it arrives.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any

import msgpack
from kombu.utils import json as kombu_json

from .celery_app import BACKGROUND_TASK, EXECUTE_TASK, MCP_TOOLS_TASK

#: ``PoisonMessage.reason``: the item is not even a JSON envelope with a decodable body.
UNDECODABLE = "undecodable"
#: ``PoisonMessage.reason``: it decodes, but is not a toolhub task message.
MALFORMED = "malformed"

CONTENT_TYPE = "application/x-msgpack"
CONTENT_ENCODING = "binary"

#: kombu's JSON decoder (untyped), the one its channel would have used on the item.
_json_loads: Callable[[str], Any] = kombu_json.loads
#: A JSON escape of a UTF-16 surrogate: such a string may hold a lone surrogate, which kombu
#: and redis-py cannot encode again (an exception on the consumer thread).
_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")
#: kombu's decoder reads an object of ``__type__`` and ``__value__`` as a typed value. An
#: envelope with neither that name nor any escape (which could spell it) decodes the same with
#: the standard decoder, which has no per-object hook: two substring scans, not one regex.
_TYPED = "__type__"

#: A type check (``isinstance`` against the tuple: the fast path) or a predicate.
Check = tuple[type, ...] | Callable[[Any], bool]
NONE: tuple[type, ...] = (type(None),)
STR: tuple[type, ...] = (str,)
OPTIONAL_STR = STR + NONE
OPTIONAL_INT = (int, *NONE)
NUMBER: tuple[type, ...] = (int, float)
DICT: tuple[type, ...] = (dict,)


def _passes(check: Check, value: Any) -> bool:
    return isinstance(value, check) if isinstance(check, tuple) else check(value)


def _id(value: Any) -> bool:
    return isinstance(value, str) and value != ""


def _equals(expected: str) -> Check:
    return lambda value: value == expected


def _timelimit(value: Any) -> bool:
    return value is None or (
        isinstance(value, list)
        and len(value) == 2
        and all(limit is None or isinstance(limit, NUMBER) for limit in value)
    )


def _str_list(value: Any) -> bool:
    return value is None or (isinstance(value, list) and all(isinstance(i, str) for i in value))


#: The Celery headers its worker interprets, and what each must be for it not to fail.
#: ``eta`` and ``expires`` must be absent: toolhub sends neither, and Celery parses them.
HEADERS: dict[str, Check] = {
    "id": _id,
    "shadow": OPTIONAL_STR,
    "root_id": OPTIONAL_STR,
    "parent_id": OPTIONAL_STR,
    "group": OPTIONAL_STR,
    "group_index": OPTIONAL_INT,
    "origin": OPTIONAL_STR,
    "argsrepr": OPTIONAL_STR,
    "kwargsrepr": OPTIONAL_STR,
    "eta": NONE,
    "expires": NONE,
    "retries": OPTIONAL_INT,
    "replaced_task_nesting": OPTIONAL_INT,
    "timelimit": _timelimit,
    "ignore_result": (bool, *NONE),
    "stamped_headers": _str_list,
    "stamps": DICT + NONE,
}
#: The kombu properties its channel, QoS and restore read.
PROPERTIES: dict[str, Check] = {
    "delivery_tag": _id,
    "body_encoding": _equals("base64"),
    "correlation_id": OPTIONAL_STR,
    "reply_to": OPTIONAL_STR,
    "delivery_mode": OPTIONAL_INT,
    "priority": OPTIONAL_INT,
}
#: Fields of a call message (``toolhub.executors.celery``); ``sig`` is the fleet signature.
EXECUTE_FIELDS: dict[str, Check] = {
    "call_id": _id,
    "run_id": _id,
    "session_id": _id,
    "config_hash": _id,
    "name": STR,
    "tool": STR,
    "arguments": DICT,
    "max_attempts": (int,),
}
#: Fields of a durable background command's message (``toolhub.tasks.redis``).
BACKGROUND_FIELDS: dict[str, Check] = {
    "task": _equals(BACKGROUND_TASK),
    "queue": STR,
    "call_id": _id,
    "run_id": _id,
    "session_id": _id,
    "config_hash": OPTIONAL_STR,
    "name": STR,
    "tool": STR,
    "command": STR,
    "cwd": OPTIONAL_STR,
    "timeout_s": NUMBER,
    "max_attempts": (int,),
}
#: Fields of a request to publish a session's stdio MCP tools (``mcp_tools.py``).
MCP_TOOLS_FIELDS: dict[str, Check] = {
    "task": _equals(MCP_TOOLS_TASK),
    "session_id": _id,
    "config_hash": _id,
}
#: ``subagent``: a background sub-agent's request (``task``), run instead of ``command``;
#: ``iat``: the signed issue time (``signing.py``).
OPTIONAL_FIELDS: dict[str, Check] = {
    "sig": STR,
    "iat": (int,),
    "task": STR,
    "queue": STR,
    "subagent": DICT,
}
TASKS: dict[str, dict[str, Check]] = {
    EXECUTE_TASK: EXECUTE_FIELDS,
    BACKGROUND_TASK: BACKGROUND_FIELDS,
    MCP_TOOLS_TASK: MCP_TOOLS_FIELDS,
}
#: Celery's workflow fields of the body's third part: toolhub sends none of them, and Celery
#: would build and run signatures from whatever they held.
EMBED_FIELDS = ("callbacks", "errbacks", "chain", "chord")


class PoisonMessage(ValueError):
    """A queue item that is not a toolhub task message.

    ``reason`` is ``undecodable`` or ``malformed`` (the metric's label), ``why`` one short
    sentence that quotes no content of the item. ``call_id`` and ``run_id`` are set when the
    item names them, so the call it claims to be can be answered."""

    def __init__(
        self, reason: str, why: str, *, call_id: str | None = None, run_id: str | None = None
    ) -> None:
        super().__init__(f"{reason}: {why}")
        self.reason = reason
        self.why = why
        self.call_id = call_id
        self.run_id = run_id


def read_queue_item(raw: bytes) -> dict[str, Any]:
    """kombu's envelope of a toolhub task message (delivered as is), or ``PoisonMessage``;
    see the module docstring."""
    envelope = _envelope(raw)
    headers = _field(envelope, "headers", DICT)
    properties = _field(envelope, "properties", DICT)
    _check_fields("property", properties, PROPERTIES, required=("delivery_tag", "body_encoding"))
    info = _field(properties, "delivery_info", DICT)
    for name in ("exchange", "routing_key"):
        _field(info, name, STR, where="delivery_info")
    if envelope.get("content-type") != CONTENT_TYPE:
        raise PoisonMessage(MALFORMED, f"content type is not {CONTENT_TYPE}")
    if envelope.get("content-encoding") != CONTENT_ENCODING:
        raise PoisonMessage(MALFORMED, f"content encoding is not {CONTENT_ENCODING}")
    if "compression" in headers:
        raise PoisonMessage(MALFORMED, "compressed bodies are not sent by toolhub")
    task = headers.get("task")
    if not isinstance(task, str) or task not in TASKS:
        raise PoisonMessage(MALFORMED, "header 'task' names no toolhub task")
    _check_fields("header", headers, HEADERS, required=("id",))
    _check_message(task, _body(_field(envelope, "body", STR)))
    return envelope


def _envelope(raw: bytes) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PoisonMessage(UNDECODABLE, "not UTF-8") from None
    escaped = "\\" in text
    specific = escaped or _TYPED in text
    try:
        envelope = _json_loads(text) if specific else json.loads(text)
    except Exception as exc:  # kombu's hook decodes typed values: any exception is possible
        raise PoisonMessage(UNDECODABLE, f"not JSON ({type(exc).__name__})") from None
    if not isinstance(envelope, dict):
        raise PoisonMessage(MALFORMED, "not a JSON object")
    if escaped and _SURROGATE.search(text) and not _encodable(envelope):
        raise PoisonMessage(UNDECODABLE, "a string holds a lone UTF-16 surrogate")
    return envelope


def _encodable(value: Any) -> bool:
    """Whether every string inside ``value`` encodes as UTF-8 (kombu re-encodes them)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _body(body: str) -> dict[str, Any]:
    """The kwargs of a protocol-2 body, decoded exactly as Celery will decode it (kombu's
    msgpack decoder is ``unpackb(data, raw=False)``; content type and encoding are checked)."""
    try:
        data = base64.b64decode(body.encode("utf-8"))
    except ValueError:
        raise PoisonMessage(UNDECODABLE, "body is not base64") from None
    try:
        decoded = msgpack.unpackb(data, raw=False)  # what kombu's msgpack decoder calls
    except Exception as exc:  # msgpack raises several types (ValueError, StackError, …)
        raise PoisonMessage(UNDECODABLE, f"body is not msgpack ({type(exc).__name__})") from None
    if not (isinstance(decoded, list) and len(decoded) == 3):
        raise PoisonMessage(MALFORMED, "body is not [args, kwargs, embed]")
    args, kwargs, embed = decoded
    ids = _ids(kwargs)
    if args != []:
        raise PoisonMessage(MALFORMED, "body has positional arguments", **ids)
    if not isinstance(kwargs, dict):
        raise PoisonMessage(MALFORMED, "body kwargs is not a map")
    if not isinstance(embed, dict) or any(embed.get(name) is not None for name in EMBED_FIELDS):
        raise PoisonMessage(MALFORMED, "body carries Celery callbacks or workflow", **ids)
    return kwargs


def _ids(kwargs: Any) -> dict[str, str | None]:
    """The call id and run id an item names, if it names them: its call can be answered."""
    if not isinstance(kwargs, dict):
        return {"call_id": None, "run_id": None}
    call_id, run_id = kwargs.get("call_id"), kwargs.get("run_id")
    return {
        "call_id": call_id if _id(call_id) else None,
        "run_id": run_id if _id(run_id) else None,
    }


def _check_message(task: str, kwargs: dict[str, Any]) -> None:
    ids = _ids(kwargs)
    fields = TASKS[task]
    if not all(isinstance(name, str) for name in kwargs):
        raise PoisonMessage(MALFORMED, "a kwargs name is not a string", **ids)
    for name, check in fields.items():
        if name not in kwargs:
            raise PoisonMessage(MALFORMED, f"call message has no {name!r}", **ids)
        if not _passes(check, kwargs[name]):
            raise PoisonMessage(MALFORMED, f"call message field {name!r} is invalid", **ids)
    for name, check in OPTIONAL_FIELDS.items():
        if name in kwargs and name not in fields and not _passes(check, kwargs[name]):
            raise PoisonMessage(MALFORMED, f"call message field {name!r} is invalid", **ids)
    if kwargs.get("task", EXECUTE_TASK) != task:
        raise PoisonMessage(MALFORMED, f"call message is not a {task} message", **ids)


def _field(container: dict[str, Any], name: str, check: Check, *, where: str = "envelope") -> Any:
    value = container.get(name)
    if not _passes(check, value):
        raise PoisonMessage(MALFORMED, f"{where} field {name!r} is missing or invalid")
    return value


def _check_fields(
    kind: str, values: dict[str, Any], checks: dict[str, Check], *, required: tuple[str, ...]
) -> None:
    for name in required:
        if name not in values:
            raise PoisonMessage(MALFORMED, f"{kind} {name!r} is missing")
    for name, value in values.items():
        check = checks.get(name)
        if check is not None and not _passes(check, value):
            raise PoisonMessage(MALFORMED, f"{kind} {name!r} is invalid")
