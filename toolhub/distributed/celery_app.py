"""The Celery configuration of toolhub, shared by the worker app (``workers.app``) and by
dispatchers, which only send messages with it.

Each setting answers a Celery-on-Redis pitfall (docs/distributed.md has the full list):
msgpack only (a broker message can never unpickle code), late acks plus reject on worker lost
(a killed worker's message is not acked away), prefetch 1 on long queues, a visibility timeout
above the longest run (a healthy long call is never redelivered), a soft-shutdown window, and
task events on so Flower sees every call. Results never go through a Celery result backend:
toolhub streams them through its own Redis channel.

kombu's ack emulation is off: a worker holds the messages it took in memory only, instead of
copying each into kombu's ``unacked`` hash on delivery and deleting it on ack (two round trips
and about a quarter of a no-op call's worker time). toolhub never relied on kombu's restore,
which waits out the visibility timeout: the call record is the truth. A queued record whose
message left its queue unclaimed is re-enqueued from the stored message by the sweep
(``recovery.py``), a running call by its lease, and a worker shutting down still puts back
what it holds but has not started (kombu's in-memory restore).
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from typing import Any, cast
from urllib.parse import urlsplit

from celery import Celery
from redis.connection import parse_url

from .fair import PRIORITY_STEPS
from .redis_address import RedisAddress, parse_redis_url
from .settings import ALL_QUEUES, QUEUES, Settings

EXECUTE_TASK = "toolhub.execute"
BACKGROUND_TASK = "toolhub.background"
#: A dispatcher asks a worker to start a session's stdio MCP servers and publish their tools
#: (``toolhub/distributed/mcp_tools.py``).
MCP_TOOLS_TASK = "toolhub.mcp_tools"
#: redis-py's URL parser (untyped): the broker reads its TLS options as the store does.
_parse_url = cast(Callable[[str], dict[str, Any]], parse_url)


def broker_tls(url: str) -> dict[str, Any] | None:
    """The broker's TLS options for a ``rediss://`` URL, read as redis-py reads them (the
    store's client, the pub/sub reader): every ``ssl_*`` query option of the URL, and a
    verified certificate unless the URL says otherwise. Threat: kombu alone would take a
    ``rediss://`` URL with no ``ssl_cert_reqs`` as ``CERT_NONE``, accepting any certificate,
    where redis-py requires a valid one. None for a URL without TLS."""
    if urlsplit(url).scheme != "rediss":
        return None
    params: dict[str, Any] = _parse_url(url)
    options = {key: value for key, value in params.items() if key.startswith("ssl_")}
    options.setdefault("ssl_cert_reqs", ssl.CERT_REQUIRED)
    return options


def sentinel_tls(address: RedisAddress) -> dict[str, Any] | None:
    """The broker's TLS options toward a Sentinel-named primary (``ssl=true`` in the URL), with a
    verified certificate unless the URL says otherwise, as for ``rediss://``."""
    if not address.tls.get("ssl"):
        return None
    options = {key: value for key, value in address.tls.items() if key.startswith("ssl_")}
    options.setdefault("ssl_cert_reqs", ssl.CERT_REQUIRED)
    return options


def celery_config(settings: Settings) -> dict[str, Any]:
    address = parse_redis_url(settings.redis_url)
    broker_url, sentinel_options = address.broker()
    return {
        "broker_url": broker_url,
        "broker_use_ssl": sentinel_tls(address) if address.is_sentinel else broker_tls(broker_url),
        "result_backend": None,
        "task_ignore_result": True,
        "task_serializer": "msgpack",
        "result_serializer": "msgpack",
        "event_serializer": "msgpack",
        "accept_content": ["msgpack"],
        "result_accept_content": ["msgpack"],
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "task_acks_on_failure_or_timeout": True,
        "worker_prefetch_multiplier": int(os.environ.get("TOOLHUB_PREFETCH_MULTIPLIER", "1")),
        "broker_transport_options": {
            "visibility_timeout": settings.visibility_timeout,
            "socket_connect_timeout": 5,
            "ack_emulation": False,
            # Three levels: level 0, then the over and sunk levels of a tenant's calls past its
            # fair share (``fair.py``); a worker's BRPOP names every level-0 list first, then
            # every over list. kombu's default of four steps would make it name four lists per
            # queue it serves, each message paying for the longer command in kombu and Redis.
            "priority_steps": list(PRIORITY_STEPS),
            **sentinel_options,
        },
        "broker_connection_retry_on_startup": True,
        "broker_connection_timeout": 5,
        "task_publish_retry_policy": {
            "max_retries": 2,
            "interval_start": 0,
            "interval_step": 0.1,
            "interval_max": 0.2,
        },
        "worker_soft_shutdown_timeout": settings.soft_shutdown_seconds,
        "worker_enable_soft_shutdown_on_idle": True,
        "worker_send_task_events": settings.task_events,
        # Flower lists a call from the worker's ``task-received`` (which carries the same
        # ``kwargsrepr``); the dispatcher's ``task-sent`` would cost every call a publish.
        "task_send_sent_event": False,
        "task_default_queue": QUEUES["fast"],
        "task_create_missing_queues": True,
        "worker_disable_rate_limits": True,
        "worker_hijack_root_logger": False,
        "worker_pool": "threads",
    }


def make_celery(settings: Settings, *, main: str = "toolhub", events: str | None = None) -> Celery:
    """The app; ``events`` names Celery's ``app.events`` class, as ``Celery(events=…)`` does
    (the workers batch their task events, ``workers/lifecycle/consumer.py``)."""
    app = Celery(main, set_as_current=False, events=events)
    app.conf.update(celery_config(settings))
    return app


__all__ = [
    "ALL_QUEUES",
    "BACKGROUND_TASK",
    "EXECUTE_TASK",
    "broker_tls",
    "celery_config",
    "make_celery",
]
