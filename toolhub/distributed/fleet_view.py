"""What a fleet is doing now, read from Redis for ``toolhub top``: each queue's depth (both fair
dispatch levels) and how long its oldest call has waited, and the calls running now with the
worker that claimed each.

Read-only and bounded: the queued and running calls read are the first ``limit`` of the
pending and lease indexes (oldest first), their records read in one pipeline, and only the
fields shown (``tool``, ``queue``, ``worker``, ``session_id`` and the times): never a call's
message, arguments or result. A record that expired between the index and the read is left
out; an index entry is not a call.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from redis import Redis

from . import replies
from .fair import over_queue, sunk_queue
from .keys import Keys

__all__ = ["DEFAULT_LIMIT", "FleetView", "QueueView", "RunningCall", "read_fleet"]

#: Queued and running calls read per refresh, oldest first.
DEFAULT_LIMIT = 1000

_FIELDS = ("tool", "queue", "worker", "session_id", "created_at", "started_at")


@dataclass(slots=True)
class QueueView:
    """One queue: messages in its lists (level 0, and ``sunk``: past their tenants' share, the
    over and sunk levels), the call ids in its backlog
    (``backlog.py``), and the queued calls' waits (``queued_calls`` counts the backlog's ids
    too; the oldest wait is a queued call's with a message: the backlog is younger)."""

    name: str
    depth: int = 0
    sunk: int = 0
    backlog: int = 0
    queued_calls: int = 0
    oldest_wait_s: float = 0.0


@dataclass(frozen=True, slots=True)
class RunningCall:
    call_id: str
    tool: str
    worker: str
    session_id: str
    running_s: float


@dataclass(slots=True)
class FleetView:
    """The fleet at ``now`` (Redis's clock)."""

    now: float
    queues: list[QueueView] = field(default_factory=list)
    running: list[RunningCall] = field(default_factory=list)

    def by_worker(self) -> dict[str, list[RunningCall]]:
        """The running calls of each worker, longest running first."""
        found: dict[str, list[RunningCall]] = {}
        for call in sorted(self.running, key=lambda c: -c.running_s):
            found.setdefault(call.worker, []).append(call)
        return found


def read_fleet(
    client: Redis, keys: Keys, queues: tuple[str, ...], *, limit: int = DEFAULT_LIMIT
) -> FleetView:
    """The fleet's queues (``queues``: the Celery queue names) and running calls now."""
    now = replies.time(client)
    pipe = client.pipeline(transaction=False)
    for name in queues:
        pipe.llen(name)
        pipe.llen(sunk_queue(name.encode()))
        pipe.llen(keys.backlog(name))
        pipe.llen(over_queue(name.encode()))
    pipe.zrange(keys.pending, 0, limit - 1)
    pipe.zrange(keys.leases, 0, limit - 1)
    *lengths, pending, leased = pipe.execute()
    view = FleetView(now)
    by_name: dict[str, QueueView] = {}
    for index, name in enumerate(queues):
        depth, sunk, backlog, over = (int(n) for n in lengths[4 * index : 4 * index + 4])
        queue = QueueView(
            name, depth=depth, sunk=sunk + over, backlog=backlog, queued_calls=backlog
        )
        by_name[name] = queue
        view.queues.append(queue)
    for _, record in _records(client, keys, pending):
        queue_name = record.get("queue", "")
        waiting = by_name.get(queue_name)
        if waiting is None:
            waiting = by_name[queue_name] = QueueView(queue_name)
            view.queues.append(waiting)
        waiting.queued_calls += 1
        created = _seconds(record.get("created_at"))
        if created:
            waiting.oldest_wait_s = max(waiting.oldest_wait_s, now - created)
    for cid, record in _records(client, keys, leased):
        started = _seconds(record.get("started_at")) or now
        view.running.append(
            RunningCall(
                call_id=cid,
                tool=record.get("tool", ""),
                worker=record.get("worker", ""),
                session_id=record.get("session_id", ""),
                running_s=max(0.0, now - started),
            )
        )
    return view


def _records(client: Redis, keys: Keys, ids: list[bytes]) -> list[tuple[str, dict[str, str]]]:
    """The shown fields of each call's record, for the calls whose record still exists."""
    pipe = client.pipeline(transaction=False)
    for raw in ids:
        pipe.hmget(keys.call(raw.decode()), list(_FIELDS))
    found = []
    for raw, values in zip(ids, pipe.execute(), strict=True):
        record = {
            name: value.decode("utf-8", "replace")
            for name, value in zip(_FIELDS, values, strict=True)
            if value is not None
        }
        if record:
            found.append((raw.decode(), record))
    return found


def _seconds(value: str | None) -> float:
    try:
        return float(value) if value else 0.0
    except ValueError:
        return 0.0
