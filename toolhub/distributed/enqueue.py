"""Turning ``app.send_task`` into Redis commands instead of running them.

The dispatcher's hot path writes the call record and enqueues the Celery message. Done the
plain way that is two round trips (the record script, then kombu's ``LPUSH``); here kombu's
own publish path is run with a *capturing* batch, so it builds exactly the message it would
push (Celery's task message, msgpack body, kombu's Redis envelope, queue key with its priority
suffix) and hands over the final Redis commands instead of sending them. The record script
then runs those commands itself, in the same round trip (``lua/create_and_enqueue.lua``): the
message reaches the queue if and only if the record was created, and workers (and Flower)
receive an ordinary Celery message.

Capturing still runs Celery's and kombu's whole per-message path (more Python than the round
trip it saves costs, and on the dispatcher's event-loop thread). ``MessageTemplate`` keeps
one captured message per (task, queue) and re-fills only what varies per call; it
verifies itself against a second capture when made and is not used if it cannot rebuild it.

The capture is a reach into kombu's publish-batch hook, fenced in ``toolhub.fences.kombu``
(``capture_publish``). ``capture_send_task`` returns None when that hook is missing, the plain
kombu path is chosen (``TOOLHUB_PLAIN_LIBRARIES``), or kombu produces anything but a single
``LPUSH`` (a queue with an expiry, another transport): the caller then takes the two-step
path, kombu's public publish after the record script.
"""

from __future__ import annotations

import json
import logging
import threading
from base64 import b64decode, b64encode
from collections.abc import Callable, Mapping
from typing import Any
from uuid import uuid4

from celery import Celery
from kombu import serialization
from kombu.utils import json as kombu_json
from msgpack import unpackb

from toolhub.fences import plain
from toolhub.fences.kombu import capture_publish

logger = logging.getLogger("toolhub.enqueue")

#: kombu's own serializer registry and JSON encoder (untyped): what its publish path uses.
_serialize: Callable[..., tuple[str, str, bytes]] = serialization.dumps
_json_dumps: Callable[[Any], str] = kombu_json.dumps


def capture_send_task(app: Celery, name: str, **options: Any) -> tuple[bytes, bytes] | None:
    """``app.send_task(name, **options)`` without the I/O: returns (queue key, payload) for the
    ``LPUSH`` kombu would run, or None when this kombu cannot be captured this way (or the
    plain kombu path is chosen: ``toolhub.fences.kombu``)."""
    with app.producer_or_acquire() as producer:
        commands = capture_publish(
            producer, lambda: app.send_task(name, producer=producer, **options)
        )
    if commands is None:
        return None
    if len(commands) != 1 or commands[0][0] != "lpush" or len(commands[0][1]) != 2:
        logger.debug("kombu publish not capturable (%r); using the two-step path", commands)
        return None
    key, payload = commands[0][1]
    return _bytes(key), _bytes(payload)


def _bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


class MessageTemplate:
    """The captured message of one (task, queue, options), re-filled per call: what varies
    between two calls is the task id, the keyword arguments, their ``kwargsrepr`` and kombu's
    delivery tag; the rest (headers, properties, queue key) is the same every time, so
    ``build`` skips Celery's and kombu's per-message machinery (routing, signals, producer
    pool, serializer registry), which costs more than the Redis round trip it feeds.

    The template checks itself when made: it must rebuild a second, independently captured
    message exactly (but for the delivery tag), or ``make`` returns None and the caller
    captures every message. A Celery or kombu upgrade that adds a per-message field therefore
    costs speed, never correctness."""

    def __init__(self, key: bytes, envelope: dict[str, Any]) -> None:
        self.key = key
        self.envelope = envelope
        args, _, embed = unpackb(b64decode(envelope["body"]), raw=False)
        self.args = args
        self.embed = embed

    @classmethod
    def make(cls, app: Celery, name: str, queue: str, **options: Any) -> MessageTemplate | None:
        first = capture_send_task(
            app, name, task_id="t-1", queue=queue, kwargs={"k": 1}, kwargsrepr="r1", **options
        )
        second = capture_send_task(
            app, name, task_id="t-2", queue=queue, kwargs={"k": [2]}, kwargsrepr="r2", **options
        )
        if first is None or second is None or first[0] != second[0]:
            return None
        try:
            template = cls(first[0], json.loads(first[1]))
            rebuilt = json.loads(template.build("t-2", {"k": [2]}, "r2"))
        except (KeyError, TypeError, ValueError) as exc:
            logger.debug("no message template: %s", exc)
            return None
        expected = json.loads(second[1])
        for envelope in (rebuilt, expected):
            envelope["properties"].pop("delivery_tag", None)
        if rebuilt != expected:
            logger.debug("no message template: rebuilt %r != captured %r", rebuilt, expected)
            return None
        return template

    def build(
        self,
        task_id: str,
        kwargs: dict[str, Any],
        kwargsrepr: str,
        extra_headers: Mapping[str, Any] | None = None,
    ) -> bytes:
        """``extra_headers``: set on top of Celery's (the call's trace context)."""
        template = self.envelope
        headers = dict(template["headers"])
        if extra_headers:
            headers.update(extra_headers)
        headers["id"] = headers["root_id"] = task_id
        headers["kwargsrepr"] = kwargsrepr
        properties = dict(template["properties"])
        properties["correlation_id"] = task_id
        if "kwargsrepr" in properties:  # send_task's extra options land here too
            properties["kwargsrepr"] = kwargsrepr
        properties["delivery_tag"] = str(uuid4())
        _, _, body = _serialize((self.args, kwargs, self.embed), serializer="msgpack")
        envelope = dict(template)
        envelope["body"] = b64encode(body).decode()
        envelope["headers"] = headers
        envelope["properties"] = properties
        return _bytes(_json_dumps(envelope))


class Enqueuer:
    """The (queue key, payload) of a task message: from a ``MessageTemplate`` per (task,
    queue) when one passes its self-check, else captured from ``send_task`` every time."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        self._templates: dict[tuple[str, str], MessageTemplate | None] = {}
        self._lock = threading.Lock()

    def message(
        self,
        name: str,
        queue: str,
        kwargs: dict[str, Any],
        kwargsrepr: str,
        headers: Mapping[str, Any] | None = None,
    ) -> tuple[bytes, bytes] | None:
        """``headers``: message headers beside Celery's (the call's trace context)."""
        if plain("kombu"):
            return None  # a template is a captured message too: the plain path takes neither
        key = (name, queue)
        if key not in self._templates:
            with self._lock:
                if key not in self._templates:
                    self._templates[key] = MessageTemplate.make(
                        self.app, name, queue, ignore_result=True
                    )
        template = self._templates[key]
        if template is not None:
            return template.key, template.build(str(uuid4()), kwargs, kwargsrepr, headers)
        extra = {"headers": dict(headers)} if headers else {}
        return capture_send_task(
            self.app,
            name,
            queue=queue,
            kwargs=kwargs,
            kwargsrepr=kwargsrepr,
            ignore_result=True,
            **extra,
        )
