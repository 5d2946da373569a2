"""Removing stale entries of kombu's ``unacked`` bookkeeping.

kombu's Redis transport keeps every delivered-but-unacknowledged message in a hash (``unacked``:
delivery tag → ``[envelope, exchange, routing key]`` as JSON) and a sorted set
(``unacked_index``: delivery tag → delivery time); an ack removes both. An entry whose ack never
happens stays: a worker killed mid-call, or a call that ended after a Redis restart (its
delivery's channel is gone, so ``toolhub/fences/kombu.py`` drops the ack). kombu's own answer is
to restore such entries to the queue after the visibility timeout; toolhub sets that timeout
above the longest run and does not rely on it: its leases re-run calls whose worker died
(``scripts.py``, ``workers/lifecycle/leases.py``). So the entries only pile up.

``clean_stale_unacked`` removes the old ones whose call no longer needs them: the call record
is finished (``succeeded``, ``failed``, ``cancelled``), gone (expired), belongs to another run
(a newer dispatch of the same call id), or is ``running`` (its lease covers it: a lost worker's
call is re-enqueued from the record, never from this entry). A ``queued`` call's entry stays:
its message was taken but not claimed, and that recovery is the sweeper's. Entries that cannot
be decoded as a toolhub task message are removed with a warning once old enough.

Each removal re-checks, in one script, that the entry is still old and that its call is still
not queued for that run, so a concurrent ack, redelivery or dispatch is never undone.
"""

from __future__ import annotations

import json
import logging
import time
from base64 import b64decode
from collections.abc import Mapping
from typing import Any, cast

from msgpack import unpackb
from redis import Redis

from .keys import Keys
from .lua import source
from .script_replies import RemoveUnackedReply

logger = logging.getLogger("toolhub.unacked")

#: kombu's defaults (``Channel.unacked_key`` / ``unacked_index_key``); toolhub does not
#: override them, but a deployment's transport options may.
DEFAULT_UNACKED_KEY = "unacked"
DEFAULT_INDEX_KEY = "unacked_index"
#: Entries looked at per sweep at most.
DEFAULT_LIMIT = 200


def unacked_keys(transport_options: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """The (hash, index) names kombu uses with these broker transport options."""
    options = transport_options or {}
    prefix = str(options.get("global_keyprefix") or "")
    return (
        prefix + str(options.get("unacked_key") or DEFAULT_UNACKED_KEY),
        prefix + str(options.get("unacked_index_key") or DEFAULT_INDEX_KEY),
    )


def decode_entry(raw: bytes | str) -> tuple[str, str]:
    """(call id, run id) of one ``unacked`` value; ValueError when it is no toolhub message."""
    try:
        envelope = json.loads(raw)[0]
        if envelope.get("content-type") != "application/x-msgpack":
            raise ValueError(f"content type {envelope.get('content-type')!r}")
        _, kwargs, _ = unpackb(b64decode(envelope["body"]), raw=False)
        call_id, run_id = kwargs["call_id"], kwargs["run_id"]
    # JSON, base64, UTF-8 and msgpack errors are all ValueErrors; a wrong shape is one of
    # the others.
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        raise ValueError(f"not a toolhub task message: {exc!r}") from exc
    if not isinstance(call_id, str) or not isinstance(run_id, str):
        raise ValueError("call_id / run_id are not strings")
    return call_id, run_id


def clean_stale_unacked(
    client: Redis,
    keys: Keys,
    *,
    min_age: float,
    transport_options: Mapping[str, Any] | None = None,
    limit: int = DEFAULT_LIMIT,
    now: float | None = None,
) -> int:
    """Remove ``unacked`` entries older than ``min_age`` seconds whose call is finished, gone,
    of another run, or running; look at ``limit`` entries at most (oldest first). Returns how
    many were removed."""
    unacked, index = unacked_keys(transport_options)
    max_score = (time.time() if now is None else now) - min_age
    tags = cast(
        "list[bytes]", client.zrange(index, "-inf", max_score, byscore=True, offset=0, num=limit)
    )
    if not tags:
        return 0
    values = client.hmget(unacked, tags)
    remove = client.register_script(source("remove_unacked"))
    pipe = client.pipeline(transaction=False)
    for tag, value in zip(tags, values, strict=True):
        if value is None:  # acked since, or an index entry without its message
            remove(keys=[unacked, index], args=[tag, max_score], client=pipe)
            continue
        try:
            call_id, run_id = decode_entry(value)
        except ValueError as exc:
            logger.warning("removing undecodable kombu unacked entry %r: %s", _text(tag), exc)
            remove(keys=[unacked, index], args=[tag, max_score], client=pipe)
            continue
        remove(
            keys=[unacked, index, keys.call(call_id)], args=[tag, max_score, run_id], client=pipe
        )
    removed = sum(RemoveUnackedReply(int(n)) is RemoveUnackedReply.REMOVED for n in pipe.execute())
    if removed:
        logger.info(
            "removed %d stale kombu unacked entr%s", removed, "y" if removed == 1 else "ies"
        )
    return removed


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value
