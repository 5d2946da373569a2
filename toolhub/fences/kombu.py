"""Every reach into kombu's internals, and the plain public path beside each.

Written against kombu 5.7.0 (``kombu/messaging.py``, ``kombu/transport/redis.py``) under Celery
5.7; pyproject pins ``kombu>=5.7,<5.8``. Each reach checks the attributes it uses and, on a kombu
without them, is not made (a warning says so); on another version with them it is made and
logged. With ``TOOLHUB_PLAIN_LIBRARIES`` naming ``kombu`` (or ``all``) none is made:

* ``capture_publish`` (the dispatcher's one-round-trip enqueue, ``distributed/enqueue.py``)
  runs a publish with a capturing ``Producer._batch_local.current`` and hands back the Redis
  commands kombu would have sent. Plain: None, and the caller publishes with
  ``app.send_task`` (kombu's public ``Producer.publish``) after writing the record: two round
  trips instead of one, the same message on the same queue.
* ``screen_deliveries`` (the worker's queue screen, ``workers/poison.py``) replaces the Redis
  ``Channel._brpop_read`` with the same steps plus a screen of each raw item before kombu
  decodes it. Plain: stock kombu delivers every item; one it cannot decode (not JSON, a body
  Celery's strategy rejects) stops the consumer ("Unrecoverable error") and the worker exits
  for its supervisor to restart, with the item redelivered to the next worker. kombu has no
  public hook before its own decode, so the plain path cannot dead-letter such items.
* ``guard_detached_channels`` (surviving a Redis restart with unacked messages held, the
  workaround in ``guard_detached_channels``'s docstring) wraps ``Channel._connparams``,
  ``QoS.ack`` and ``QoS.reject``. Plain: stock kombu; on a broker restart the consumer stops
  and the worker exits (its supervisor restarts it, leases recover its calls).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from queue import Empty
from typing import Any

import redis.exceptions

from . import plain

__all__ = [
    "TARGET_KOMBU",
    "ChannelDetached",
    "capture_publish",
    "guard_detached_channels",
    "screen_deliveries",
]

logger = logging.getLogger("toolhub.fences.kombu")

#: The kombu release these reaches were written and tested against.
TARGET_KOMBU = "5.7.0"
_MARK = "_toolhub_fence"
Command = tuple[str, tuple[Any, ...]]
#: ``screen(raw, queue)``: the decoded envelope to deliver, or None when the item was refused.
Screen = Callable[[bytes, str], Any]


def _kombu_version() -> str:
    import kombu

    return str(kombu.__version__)


# -- publish capture ------------------------------------------------------------------------------


class _Collector:
    """Stands in for kombu's ``PublishBatch``: records the commands of one publish."""

    __slots__ = ("commands",)

    def __init__(self) -> None:
        self.commands: list[Command] = []

    def add(self, name: str, *args: Any) -> None:
        self.commands.append((name, args))


class _CaptureState:
    """Stands in for kombu's per-thread ``_ProducerBatchState`` while one message is built."""

    __slots__ = ("collector",)

    def __init__(self) -> None:
        self.collector = _Collector()

    def publish(self, channel: Any, message: Any, **kwargs: Any) -> None:
        channel.basic_publish(message, _publish_batch=self.collector, **kwargs)


def capture_publish(producer: Any, publish: Callable[[], object]) -> list[Command] | None:
    """Run ``publish`` (a publish through ``producer``) with kombu's publish-batch hook
    collecting the Redis commands instead of sending them; None on the plain path or when
    this kombu has no such hook (nothing was published then)."""
    if plain("kombu"):
        return None
    local = getattr(producer, "_batch_local", None)
    if local is None or getattr(local, "current", None) is not None:
        return None
    state = _CaptureState()
    local.current = state
    try:
        publish()
    finally:
        del local.current
    return state.collector.commands


# -- the queue screen ----------------------------------------------------------------------------

#: Class attributes the replacement ``_brpop_read`` uses (``_queue_cycle`` and
#: ``connection_errors`` are set by kombu 5.7's ``Channel.__init__``).
_SCREEN_USES = ("_brpop_read", "sep", "client", "_in_poll")


class _Screen:
    """The one screen of this process (``screen_deliveries`` sets it)."""

    screen: Screen | None = None


def _screened_brpop_read(self: Any, **options: Any) -> bool:
    """kombu 5.7's ``Channel._brpop_read``, with every raw item screened before delivery."""
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
        screen = _Screen.screen
        envelope = screen(raw, queue) if screen is not None else None
        if envelope is not None:
            self.connection._deliver(envelope, queue)
        return True
    finally:
        self._in_poll = None
        flush = getattr(self, "_flush_brpop_reauth", None)
        if flush is not None:
            flush()


setattr(_screened_brpop_read, _MARK, True)


def screen_deliveries(screen: Screen) -> bool:
    """Hand every item kombu's Redis channel pops to ``screen`` before kombu decodes it
    (idempotent; the latest ``screen`` wins). Returns whether the screen is in place. Channels
    look ``_brpop_read`` up when they are made: call this before the worker connects."""
    if plain("kombu"):
        logger.info("kombu: plain path, no queue screen (TOOLHUB_PLAIN_LIBRARIES)")
        return False
    from kombu.transport import redis as transport

    _Screen.screen = screen
    channel: Any = getattr(transport, "Channel", None)
    original = getattr(channel, "_brpop_read", None)
    if getattr(original, _MARK, False):
        return True
    missing = [name for name in _SCREEN_USES if not hasattr(channel, name)]
    if channel is None or missing or not callable(original):
        logger.warning(
            "kombu %s: Redis Channel lacks %s; the queue screen written for kombu %s is not "
            "installed (a malformed queue item may stop the worker)",
            _kombu_version(),
            ", ".join(missing) or "_brpop_read",
            TARGET_KOMBU,
        )
        return False
    _log_other_version("the queue screen")
    channel._brpop_read = _screened_brpop_read
    return True


# -- detached channels ---------------------------------------------------------------------------


class ChannelDetached(redis.exceptions.ConnectionError):
    """A kombu Redis channel was used after its connection was closed."""


def _detached(channel: Any) -> bool:
    transport = getattr(channel, "connection", None)
    return transport is None or getattr(transport, "client", None) is None


def _guard_connparams(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def _connparams(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _detached(self):
            raise ChannelDetached("kombu Redis channel used after its connection was closed")
        return original(self, *args, **kwargs)

    setattr(_connparams, _MARK, True)
    return _connparams


def _guard_settle(
    original: Callable[..., Any], base: Callable[..., Any], what: str
) -> Callable[..., Any]:
    """``QoS.ack`` / ``QoS.reject``: on a detached channel, only forget the delivery locally
    (what the Redis QoS does after its Redis write, through the virtual QoS's ``ack``)."""

    @functools.wraps(original)
    def settle(self: Any, delivery_tag: Any, *args: Any, **kwargs: Any) -> Any:
        if _detached(self.channel):
            logger.warning(
                "%s of delivery %s dropped: its broker connection was lost (toolhub sweeps "
                "the unacked entry it leaves)",
                what,
                delivery_tag,
            )
            return base(self, delivery_tag)
        return original(self, delivery_tag, *args, **kwargs)

    setattr(settle, _MARK, True)
    return settle


def guard_detached_channels() -> bool:
    """Let a worker holding unacked messages reconnect after a broker connection loss
    (idempotent). Returns whether the guard is in place.

    On a connection loss Celery's consumer calls ``Connection.collect()``, which closes the
    channels: the consuming channel's ``Channel.close`` first drains its pending ``BRPOP``,
    which raises on the dead socket *before* the channel is marked closed, so it stays half
    open with its unacked messages in ``QoS._delivered``. ``collect()`` then detaches the
    transport (``transport.client = None``) and Celery closes the connection again, which
    closes the same channel a second time; ``QoS.restore_unacked`` asks for a client and
    ``Channel._connparams`` reads ``self.connection.client.hostname`` from the detached
    transport: an ``AttributeError``, not a connection error, so it escapes Celery's
    ``ignore_errors`` and the consumer stops with "Unrecoverable error" (kombu#582, #970).

    Guarded, a detached channel raises :class:`ChannelDetached` (in the transport's
    ``connection_errors``), so Celery ignores it and reconnects; the ack of a message
    delivered on such a channel is dropped with one warning, and its ``unacked`` entry is
    swept by toolhub (``toolhub.distributed.unacked``)."""
    if plain("kombu"):
        logger.info("kombu: plain path, no detached-channel guard (TOOLHUB_PLAIN_LIBRARIES)")
        return False
    from kombu.transport import redis as transport
    from kombu.transport import virtual

    channel: Any = getattr(transport, "Channel", None)
    qos: Any = getattr(transport, "QoS", None)
    connparams: Any = getattr(channel, "_connparams", None)
    ack: Any = getattr(qos, "ack", None)
    reject: Any = getattr(qos, "reject", None)
    base_ack: Any = getattr(getattr(virtual, "QoS", None), "ack", None)
    if not all(callable(f) for f in (connparams, ack, reject, base_ack)):
        logger.warning(
            "kombu %s: Redis transport has no Channel._connparams / QoS.ack / QoS.reject; the "
            "workaround for kombu %s is not installed (a broker restart may stop the worker)",
            _kombu_version(),
            TARGET_KOMBU,
        )
        return False
    if getattr(connparams, _MARK, False):
        return True
    _log_other_version("the Redis channel guard")
    channel._connparams = _guard_connparams(connparams)
    qos.ack = _guard_settle(ack, base_ack, "ack")
    qos.reject = _guard_settle(reject, base_ack, "reject")
    return True


def _log_other_version(what: str) -> None:
    version = _kombu_version()
    if version != TARGET_KOMBU:
        logger.info("kombu %s: installing %s written for %s", version, what, TARGET_KOMBU)
