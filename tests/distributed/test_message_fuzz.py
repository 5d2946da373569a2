"""A bounded fuzz of what a worker decodes before anything runs (issue 13: "a fuzz of the
worker's message decoding never takes a worker down"), in process, no worker needed.

``read_queue_item`` (the queue screen, ``toolhub.distributed.messages``) gets arbitrary bytes,
arbitrary JSON, and valid task messages with one part replaced by anything: it raises nothing
but ``PoisonMessage``, and what it lets through is something kombu and Celery take without
failing (kombu's own ``Message`` and Celery's own ``Request`` are built from it, on kombu's
in-memory transport). ``FleetKeys.verify_message`` (the signature gate of every task body)
raises nothing but ``SignatureRefused``, accepts what was signed, and refuses any change."""

from __future__ import annotations

import base64
import json
import time
from typing import Any
from uuid import UUID

import msgpack
import pytest
from celery import Celery
from celery.worker.request import Request
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kombu import Connection
from kombu.utils.json import dumps as kombu_dumps
from kombu.utils.json import loads as kombu_loads

from tests.distributed.helpers import CALL_MESSAGE, NO_WORKFLOW, queue_item
from tests.fuzz_size import examples
from toolhub.distributed.messages import PoisonMessage, _envelope, read_queue_item
from toolhub.distributed.signing import FleetKey, FleetKeys, SignatureRefused

#: Bounded in `make test`, twice as many in `make test-long` (``tests/fuzz_size.py``).
FUZZ = settings(
    max_examples=examples(100, 200),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    database=None,
)
EXECUTE = "toolhub.execute"
BACKGROUND_MESSAGE = {
    "task": "toolhub.background",
    "queue": "toolhub.background",
    "call_id": "task-1",
    "run_id": "r-1",
    "session_id": "s-1",
    "config_hash": "h-1",
    "name": "background",
    "tool": "toolhub:background",
    "command": "sleep 1",
    "cwd": None,
    "timeout_s": 60.0,
    "max_attempts": 3,
}

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
)
#: Any JSON value (text may hold surrogates: ``json.dumps`` escapes them).
json_values = st.recursive(
    scalars
    | st.text(
        alphabet=st.characters(
            min_codepoint=0xD7F0, max_codepoint=0xE010, categories=["Cs", "Co", "Lo", "Cn"]
        )
    ),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
#: Any msgpack value (bytes too, and map keys that are not strings).
msgpack_values = st.recursive(
    scalars | st.binary(max_size=16),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(max_size=8) | st.integers(0, 9) | st.binary(max_size=4), inner)
    ),
    max_leaves=12,
)
HEADER_NAMES = ["task", "id", "eta", "expires", "timelimit", "retries", "kwargsrepr", "shadow",
                "root_id", "group_index", "ignore_result", "stamps", "stamped_headers",
                "compression", "lang", "new-header"]  # fmt: skip
PROPERTY_NAMES = ["delivery_tag", "body_encoding", "delivery_info", "priority", "reply_to",
                  "delivery_mode", "correlation_id"]  # fmt: skip
ENVELOPE_NAMES = ["body", "headers", "properties", "content-type", "content-encoding"]
FIELD_NAMES = [*CALL_MESSAGE, "sig", "task", "queue", "extra"]

_memory = Connection("memory://")
_channel = _memory.default_channel
_app = Celery("fuzz", set_as_current=False)


def _task(**kwargs: Any) -> None:
    """Stands for both toolhub tasks: Celery builds a request for it, nothing runs it."""


for _name in (EXECUTE, "toolhub.background"):
    _app.task(name=_name)(_task)


def _accepted_by_kombu_and_celery(envelope: dict[str, Any]) -> None:
    """What the screen passes, kombu's channel and QoS and Celery's request take."""
    message = _channel.Message(envelope, channel=_channel, accept={"application/x-msgpack"})
    args, kwargs, _ = message.decode()
    task = message.headers["task"]
    request = Request(message, app=_app, task=_app.tasks[task], hostname="fuzz")
    assert request.kwargs == kwargs and request.args == args == []
    # What the pool submission, the task-received event and the QoS then use.
    hard, soft = request.time_limits
    assert all(limit is None or isinstance(limit, int | float) for limit in (hard, soft))
    assert request.eta is None and request.expires is None
    event = (request.id, request.name, request.argsrepr, request.kwargsrepr, request.root_id)
    msgpack.packb([*event, request.parent_id, request.request_dict.get("retries", 0)])
    assert isinstance(message.delivery_tag, str)
    message.delivery_tag.encode()
    info = message.delivery_info
    kombu_dumps([envelope, info["exchange"], info["routing_key"]]).encode()
    request.info(safe=True)
    # After the task: Celery would build and apply signatures from these.
    _, _, embed = message.decode()
    assert not any(embed.get(name) for name in ("callbacks", "errbacks", "chain", "chord"))


def _screen(raw: bytes) -> None:
    try:
        envelope = read_queue_item(raw)
    except PoisonMessage as poison:
        assert poison.reason in {"undecodable", "malformed"} and poison.why
        return
    _accepted_by_kombu_and_celery(envelope)


def test_real_task_messages_pass():
    for raw in (queue_item(), queue_item(BACKGROUND_MESSAGE, task="toolhub.background")):
        _accepted_by_kombu_and_celery(read_queue_item(raw))


@FUZZ
@given(st.binary(max_size=600))
def test_arbitrary_bytes(raw: bytes):
    _screen(raw)


@FUZZ
@given(json_values)
def test_arbitrary_json(value: Any):
    _screen(json.dumps(value).encode())


@FUZZ
@given(
    st.sampled_from(["header", "property", "envelope"]),
    st.data(),
    json_values,
)
def test_a_valid_envelope_with_one_part_replaced(part: str, data: st.DataObject, value: Any):
    envelope = json.loads(queue_item())
    if part == "header":
        envelope["headers"][data.draw(st.sampled_from(HEADER_NAMES))] = value
    elif part == "property":
        envelope["properties"][data.draw(st.sampled_from(PROPERTY_NAMES))] = value
    else:
        envelope[data.draw(st.sampled_from(ENVELOPE_NAMES))] = value
    _screen(json.dumps(envelope).encode())


@FUZZ
@given(
    st.sampled_from(["header", "property"]),
    st.data(),
    st.text(alphabet=st.characters(categories=["Cs", "Ll", "Nd", "So"]), max_size=6),
)
def test_a_string_with_any_code_point(part: str, data: st.DataObject, text: str):
    """JSON can spell a lone surrogate (``\\ud800``), which nothing downstream can encode."""
    envelope = json.loads(queue_item())
    names = HEADER_NAMES if part == "header" else PROPERTY_NAMES
    envelope[f"{part}s" if part == "header" else "properties"][
        data.draw(st.sampled_from(names))
    ] = text
    _screen(json.dumps(envelope).encode())


@FUZZ
@given(st.sampled_from(FIELD_NAMES), msgpack_values, st.booleans())
def test_a_call_message_with_one_field_replaced(name: str, value: Any, background: bool):
    message = dict(BACKGROUND_MESSAGE if background else CALL_MESSAGE)
    message[name] = value
    task = "toolhub.background" if background else EXECUTE
    _screen(queue_item(message, task=task))


@FUZZ
@given(msgpack_values)
def test_an_arbitrary_msgpack_body(value: Any):
    try:
        body = bytes(msgpack.packb(value))
    except (TypeError, ValueError, OverflowError):
        return
    _screen(queue_item(body=body))
    _screen(queue_item(body=bytes(msgpack.packb([[], value, NO_WORKFLOW]))))


@FUZZ
@given(st.integers(min_value=0), st.integers(min_value=0, max_value=255))
def test_a_valid_item_with_a_byte_changed(where: int, byte: int):
    raw = bytearray(queue_item())
    raw[where % len(raw)] = byte
    _screen(bytes(raw))
    envelope = json.loads(queue_item())
    body = bytearray(base64.b64decode(envelope["body"]))
    body[where % len(body)] = byte
    envelope["body"] = base64.b64encode(bytes(body)).decode()
    _screen(json.dumps(envelope).encode())


KEYS = FleetKeys(FleetKey("k" * 40))
OTHER = FleetKeys(FleetKey("o" * 40))
#: The message age the gate is given (any: these messages are dated now).
AGE = 600.0


@FUZZ
@given(st.dictionaries(st.sampled_from(FIELD_NAMES), msgpack_values, max_size=4), st.booleans())
def test_the_signature_gate_raises_only_its_refusal(message: dict[str, Any], background: bool):
    task = "toolhub.background" if background else EXECUTE
    with pytest.raises(SignatureRefused) as refused:
        KEYS.verify_message(task, message, AGE)
    assert refused.value.reason in {"unsigned", "bad_signature"}
    message["sig"] = "v1:" + KEYS.current.kid + ":" + "0" * 64
    with pytest.raises(SignatureRefused):
        KEYS.verify_message(task, message, AGE)


@FUZZ
@given(st.sampled_from(FIELD_NAMES), msgpack_values)
def test_a_signed_message_verifies_and_any_change_is_refused(name: str, value: Any):
    try:
        signed = KEYS.sign_message(dict(CALL_MESSAGE, arguments={"v": value}, iat=int(time.time())))
    except (TypeError, ValueError, OverflowError):
        return  # not encodable: no dispatcher could have sent it
    KEYS.verify_message(EXECUTE, signed, AGE)
    decoded = msgpack.unpackb(msgpack.packb(signed), raw=False, strict_map_key=False)
    KEYS.verify_message(EXECUTE, decoded, AGE)  # what a worker receives
    for refused in (
        OTHER.sign_message(dict(signed)),
        {**signed, name: [value, "changed"]},
        {k: v for k, v in signed.items() if k != "sig"},
    ):
        with pytest.raises(SignatureRefused):
            KEYS.verify_message(EXECUTE, refused, AGE)
    with pytest.raises(SignatureRefused):
        KEYS.verify_message("toolhub.background", signed, AGE)


def _decoded_by_kombu(raw: bytes) -> Any:
    return kombu_loads(raw.decode("utf-8"))


def test_the_screen_decodes_typed_values_and_escaped_names_as_kombu_does():
    """The screen skips kombu's per-object hook when nothing in the item could need it: a
    typed value (an object of ``__type__`` and ``__value__``), or any escape (which could
    spell that name). Either one goes through kombu's own decoder."""
    envelope = json.loads(queue_item())
    envelope["headers"]["stamps"] = {"s": UUID(int=7)}
    typed = kombu_dumps(envelope)  # the UUID as kombu's typed value
    assert '"__type__"' in typed
    for text in (typed, typed.replace('"__type__"', '"\\u005f_type__"')):
        raw = text.encode()
        assert read_queue_item(raw) == _decoded_by_kombu(raw)
        assert read_queue_item(raw)["headers"]["stamps"] == {"s": UUID(int=7)}
    raw = queue_item()
    assert b"\\" not in raw and b"__type__" not in raw
    assert read_queue_item(raw) == _decoded_by_kombu(raw)


@FUZZ
@given(json_values)
def test_any_json_decodes_as_kombu_decodes_it(value: Any):
    raw = json.dumps({"value": value}).encode()
    try:
        screened = _envelope(raw)
    except PoisonMessage:
        return
    assert screened == _decoded_by_kombu(raw)
