"""The queue screen: one bad queue item must not stop a worker, nor every worker after it.

Targets kombu 5.7.0 (``kombu/transport/redis.py``) under Celery 5.7. ``Channel._brpop_read``
reads the reply of its ``BRPOP`` and hands ``loads(item)`` to the transport's ``_deliver``,
which runs Celery's consumer callback, all on the thread that receives every message. Any
exception on that path ends in Celery's consumer loop, which stops the worker
("Unrecoverable error"): a list item that is not JSON raised ``JSONDecodeError`` in kombu;
a valid envelope around a body of the wrong shape raised in Celery's task strategy, after
kombu's QoS had recorded it as unacked, so it was redelivered to each fresh worker, which
died the same way, until someone removed it by hand (issue 13).

``install`` replaces ``_brpop_read`` with the same steps (read the reply, rotate the queue
cycle, deliver, then the same cleanup in ``finally``) and one more: the raw item goes through
``toolhub.distributed.messages.read_queue_item`` first, and an item it refuses goes to
``on_poison`` (``Refusals.refuse``: dead-letter list, log line, metric, an answer to its call)
instead of kombu. Only task queues are screened: a pidbox reply queue (the answers to a
``celery inspect`` or Flower's worker queries, in the process that asked) is delivered as
kombu would. Nothing of a refused item reaches kombu's QoS, so it leaves no unacked entry
and is never redelivered; the worker goes on with its next item.

``Channel._get`` (``basic_get``, which Celery's consumer does not use) is left as it is.
``install`` checks the channel attributes the replacement uses; on a kombu without them
nothing is patched and a warning says so (the worker then runs as stock kombu would). Channels
look ``_brpop_read`` up when they are made, so ``install`` runs when ``workers.app`` is
imported, before the worker connects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from queue import Empty
from typing import Any, cast

from kombu.utils import json as kombu_json

from toolhub.distributed.messages import PoisonMessage, read_queue_item

from .kombu_redis import TARGET_KOMBU

logger = logging.getLogger("toolhub.worker.kombu")

#: kombu's pidbox reply queues end so (``Mailbox.reply_exchange`` is ``reply.celery.pidbox``).
REPLY_QUEUE_SUFFIX = ".reply.celery.pidbox"
PoisonSink = Callable[[bytes, str, PoisonMessage], None]
#: kombu's own JSON decoding (its type hooks included), as stock ``_brpop_read`` uses it.
_kombu_loads = cast(Callable[[str], Any], kombu_json.loads)
_MARK = "_toolhub_queue_screen"
#: Class attributes the replacement uses (``_queue_cycle`` and ``connection_errors`` are set
#: by kombu 5.7's ``Channel.__init__``; another kombu version is logged).
_USED = ("_brpop_read", "sep", "client", "_in_poll")


class _Screen:
    """The one sink of this process (``install`` sets it)."""

    on_poison: PoisonSink | None = None


def _screened_brpop_read(self: Any, **options: Any) -> bool:
    """kombu 5.7's ``Channel._brpop_read``, with every item screened before delivery."""
    try:
        try:
            reply = self.client.parse_response(self.client.connection, "BRPOP", **options)
        except self.connection_errors:
            # As kombu does: disconnect, so the next iteration reconnects.
            self.client.connection.disconnect()
            raise
        if not reply:
            raise Empty()
        dest, item = reply
        name = dest.decode() if isinstance(dest, bytes) else str(dest)
        queue = name.rsplit(self.sep, 1)[0]
        self._queue_cycle.rotate(queue)
        raw = item if isinstance(item, bytes) else str(item).encode()
        if is_control_reply_queue(queue):
            # Not a task queue: replies to this process's own ``inspect``/``control`` calls.
            self.connection._deliver(_kombu_loads(raw.decode()), queue)
            return True
        try:
            envelope = read_queue_item(raw)
        except PoisonMessage as poison:
            _refuse(raw, queue, poison)
        else:
            self.connection._deliver(envelope, queue)
        return True
    finally:
        self._in_poll = None
        flush = getattr(self, "_flush_brpop_reauth", None)
        if flush is not None:
            flush()


def is_control_reply_queue(queue: str) -> bool:
    """Whether ``queue`` is one of kombu's pidbox reply queues (``<oid>.reply.celery.pidbox``):
    a process that sends ``inspect``/``control`` (Flower, ``celery inspect``) BRPOPs its
    replies from it. Those are kombu's own messages, not toolhub tasks; they are delivered as
    stock kombu does, unscreened."""
    return queue.endswith(REPLY_QUEUE_SUFFIX)


def _refuse(raw: bytes, queue: str, poison: PoisonMessage) -> None:
    sink = _Screen.on_poison
    try:
        if sink is not None:
            sink(raw, queue, poison)
    except Exception as exc:  # the consumer thread must survive its own error handling
        logger.warning("a refused item from %s was dropped (%s: %s)", queue, poison, exc)


setattr(_screened_brpop_read, _MARK, True)


def install(on_poison: PoisonSink) -> bool:
    """Screen every item kombu's Redis channel pops (idempotent); refused items go to
    ``on_poison``. Returns whether the screen is in place."""
    import kombu
    from kombu.transport import redis as transport

    _Screen.on_poison = on_poison
    channel: Any = getattr(transport, "Channel", None)
    original = getattr(channel, "_brpop_read", None)
    if getattr(original, _MARK, False):
        return True
    missing = [name for name in _USED if not hasattr(channel, name)]
    if channel is None or missing or not callable(original):
        logger.warning(
            "kombu %s: Redis Channel lacks %s; the queue screen written for kombu %s is not "
            "installed (a malformed queue item may stop the worker)",
            kombu.__version__,
            ", ".join(missing) or "_brpop_read",
            TARGET_KOMBU,
        )
        return False
    if kombu.__version__ != TARGET_KOMBU:
        logger.info(
            "kombu %s: installing the queue screen written for %s", kombu.__version__, TARGET_KOMBU
        )
    channel._brpop_read = _screened_brpop_read
    return True
