"""A workaround for kombu 5.7's Redis transport: a worker that holds unacked messages (any
running call, with late acks) when Redis goes away must reconnect, not crash.

Targets kombu 5.7.0 (``kombu/transport/redis.py``) under Celery 5.7. What happens on a broker
connection loss (reproduced with a plain Celery app, no toolhub code involved):

1. Celery's consumer (``Consumer.on_connection_error_after_connected``) calls
   ``Connection.collect()``, which closes the channels. The consuming
   channel's ``Channel.close`` first drains its pending ``BRPOP`` (``_brpop_read``); on the dead
   socket that raises a connection error *before* the channel is marked closed, so it stays
   half open, its unacked messages still in ``QoS._delivered``.
2. ``collect()`` then detaches the transport from its connection (``transport.client = None``).
3. Celery closes the connection again (``Connection.close``), which closes the same channel a
   second time. ``virtual.Channel.close`` now reaches ``QoS.restore_unacked_once``; the Redis
   ``QoS.restore_unacked`` asks for a client, the channel's pool is gone, and
   ``Channel._connparams`` reads ``self.connection.client.hostname`` from the detached
   transport: ``AttributeError: 'NoneType' object has no attribute 'hostname'``. An
   ``AttributeError`` is not a connection error, so it escapes Celery's ``ignore_errors`` and
   the consumer stops with "Unrecoverable error": the worker shuts down instead of
   reconnecting (toolhub's with exit code 0, once its running calls end). kombu#582 reports
   the same ``_connparams`` dereference on a channel closed after its connection was gone, and
   kombu#970 the shutdown restore failing in the same ``conn_or_acquire`` path.

The workaround: a channel whose transport is detached raises :class:`ChannelDetached` (a
``redis.exceptions.ConnectionError``, which is in the transport's ``connection_errors``) instead
of the ``AttributeError``, so every caller treats it as the connection loss it is: Celery
ignores it and reconnects. The acknowledgement of a message delivered on such a channel (a call
that ends after the reconnect) cannot reach Redis through that channel either; it is dropped
with one warning line instead of a critical log with a traceback. Its kombu ``unacked`` entry is
left behind, and toolhub removes it (``toolhub.distributed.unacked``, swept by the lease
keeper): toolhub does not rely on kombu's restore, its leases re-run calls whose worker died.

``install`` checks that every attribute it wraps exists and is callable; on a kombu without
them nothing is patched (a warning says so) and the old behaviour stays, rather than the worker
failing to start. On another kombu version with them it still patches, and says so.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import redis.exceptions

from toolhub.distributed.unacked import clean_stale_unacked

if TYPE_CHECKING:
    from workers.calls.runtime import WorkerRuntime

logger = logging.getLogger("toolhub.worker.kombu")

#: The kombu release this workaround was written and tested against.
TARGET_KOMBU = "5.7.0"
_MARK = "_toolhub_detached_guard"


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


def install() -> bool:
    """Patch kombu's Redis transport (idempotent). Returns whether the guard is in place."""
    try:
        import kombu
        from kombu.transport import redis as transport
        from kombu.transport import virtual
    except ImportError:  # pragma: no cover - kombu is a dependency of Celery
        return False
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
            kombu.__version__,
            TARGET_KOMBU,
        )
        return False
    if getattr(connparams, _MARK, False):
        return True
    if kombu.__version__ != TARGET_KOMBU:
        logger.info(
            "kombu %s: installing the Redis channel guard written for %s",
            kombu.__version__,
            TARGET_KOMBU,
        )
    channel._connparams = _guard_connparams(connparams)
    qos.ack = _guard_settle(ack, base_ack, "ack")
    qos.reject = _guard_settle(reject, base_ack, "reject")
    return True


def clean_unacked(runtime: WorkerRuntime) -> int:
    """The lease keeper's sweep of the kombu ``unacked`` entries left behind (dropped acks,
    killed workers): those older than two leases whose call no longer needs them."""
    store = runtime.store
    return clean_stale_unacked(
        store.client,
        store.keys,
        min_age=2 * runtime.settings.lease_seconds,
        transport_options=runtime.app.conf.broker_transport_options,
    )
