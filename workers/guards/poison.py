"""The queue screen: one bad queue item must not stop a worker, nor every worker after it.

kombu's Redis channel hands each popped item to its transport's ``_deliver``, which runs
Celery's consumer callback, all on the thread that receives every message. Any exception on
that path ends in Celery's consumer loop, which stops the worker ("Unrecoverable error"): a
list item that is not JSON raised ``JSONDecodeError`` in kombu; a valid envelope around a body
of the wrong shape raised in Celery's task strategy, after kombu's QoS had recorded it as
unacked, so it was redelivered to each fresh worker, which died the same way, until someone
removed it by hand (issue 13).

``install`` puts ``screen`` in front of kombu's decode (the reach is fenced in
``toolhub.fences.kombu.screen_deliveries``): the raw item goes through
``toolhub.distributed.messages.read_queue_item`` first, and an item it refuses goes to
``on_poison`` (``Refusals.refuse``: dead-letter list, log line, metric, an answer to its call)
instead of kombu. Only task queues are screened: a pidbox reply queue (the answers to a
``celery inspect`` or Flower's worker queries, in the process that asked) is delivered as
kombu would. Nothing of a refused item reaches kombu's QoS, so it leaves no unacked entry
and is never redelivered; the worker goes on with its next item. ``install`` runs when
``workers.app`` is imported, before the worker connects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

from kombu.utils import json as kombu_json

from toolhub.distributed.messages import PoisonMessage, read_queue_item
from toolhub.fences.kombu import screen_deliveries

logger = logging.getLogger("toolhub.worker.kombu")

#: kombu's pidbox reply queues end so (``Mailbox.reply_exchange`` is ``reply.celery.pidbox``).
REPLY_QUEUE_SUFFIX = ".reply.celery.pidbox"
PoisonSink = Callable[[bytes, str, PoisonMessage], None]
#: kombu's own JSON decoding (its type hooks included), as stock ``_brpop_read`` uses it.
_kombu_loads = cast(Callable[[str], Any], kombu_json.loads)


class _Sink:
    """The one sink of this process (``install`` sets it)."""

    on_poison: PoisonSink | None = None


def screen(raw: bytes, queue: str) -> Any:
    """The envelope kombu should deliver for ``raw`` popped from ``queue``, or None when the
    item was refused (handed to the sink)."""
    if is_control_reply_queue(queue):
        # Not a task queue: replies to this process's own ``inspect``/``control`` calls.
        return _kombu_loads(raw.decode())
    try:
        return read_queue_item(raw)
    except PoisonMessage as poison:
        _refuse(raw, queue, poison)
        return None


def is_control_reply_queue(queue: str) -> bool:
    """Whether ``queue`` is one of kombu's pidbox reply queues (``<oid>.reply.celery.pidbox``):
    a process that sends ``inspect``/``control`` (Flower, ``celery inspect``) BRPOPs its
    replies from it. Those are kombu's own messages, not toolhub tasks; they are delivered as
    stock kombu does, unscreened."""
    return queue.endswith(REPLY_QUEUE_SUFFIX)


def _refuse(raw: bytes, queue: str, poison: PoisonMessage) -> None:
    sink = _Sink.on_poison
    try:
        if sink is not None:
            sink(raw, queue, poison)
    except Exception as exc:  # the consumer thread must survive its own error handling
        logger.warning("a refused item from %s was dropped (%s: %s)", queue, poison, exc)


def install(on_poison: PoisonSink) -> bool:
    """Screen every item kombu's Redis channel pops (idempotent); refused items go to
    ``on_poison``. Returns whether the screen is in place."""
    _Sink.on_poison = on_poison
    return screen_deliveries(screen)
