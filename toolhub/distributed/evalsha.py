"""``EVALSHA`` of a registered script, without redis-py's per-command layers.

Every distributed call runs the claim and finish scripts on its worker, and every progress
item an emit: three or more script calls on the worker's critical path. Every dispatch runs the
record-and-enqueue script, in a pipeline with the others of its loop turn. Through redis-py
(``Script.__call__``, ``Pipeline.evalsha``) each goes through ``execute_command``: argument
encoding one by one in Python, the client's retry wrapper, hooks, response callbacks. Packing
the commands with hiredis and writing them on a pooled connection skips those layers for the
calls made on every distributed call.

A thread that makes such calls all its life (a worker's pool thread: ``hold_connections``)
keeps one connection of the pool checked out for them, instead of a checkout and a release per
script: each costs redis-py's pool two process-id reads, a readiness poll of the socket and its
locks, all syscalls and GIL time on the worker's critical path, twice a call. Every reply on a
held connection is read before its next use, which is what the readiness poll checks; a
connection that broke is released to the pool (which disconnects it) and the next call takes a
fresh one.

The connection, its timeouts, reconnection and error types are still redis-py's. What the
packed path does not handle goes back to the stock one. Redis may not know the script (after
a restart or ``SCRIPT FLUSH``): stock loads it. A connection may break or time out: the batch
goes again through a redis-py pipeline, which retries it on a fresh connection with the
client's retry policy, as it always did.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import hiredis
from redis import Redis
from redis.commands.core import Script
from redis.connection import Connection, ConnectionPool
from redis.exceptions import ConnectionError, NoScriptError, ResponseError, TimeoutError

from .replies import untyped

Call = tuple[Sequence[Any], Sequence[Any]]


class _Held(threading.local):
    """This thread's held connections, one per pool; ``on``: whether this thread holds any."""

    on = False

    def __init__(self) -> None:
        self.connections: dict[int, tuple[ConnectionPool, Connection]] = {}


_held = _Held()


def hold_connections() -> None:
    """From now on this thread keeps one connection per pool checked out for its script calls.
    Only for a thread that lives as long as its process (a leaving thread's connection stays
    checked out): the worker's pool threads, which run every call's claim and finish."""
    _held.on = True


def _checkout(pool: ConnectionPool) -> Connection:
    if not _held.on:
        return pool.get_connection()
    found = _held.connections.get(id(pool))
    if found is not None and found[0] is pool:
        return found[1]
    conn = pool.get_connection()
    _held.connections[id(pool)] = (pool, conn)
    return conn


def _checkin(pool: ConnectionPool, conn: Connection, *, broken: bool) -> None:
    """Back to the pool, unless this thread holds it and it is fine."""
    if not _held.on:
        pool.release(conn)
    elif broken:
        _held.connections.pop(id(pool), None)
        pool.release(conn)


def run_script(client: Redis, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Any:
    """``script(keys=keys, args=args)`` on ``client``, as one packed write and one read."""
    reply = run_scripts(client, script, [(keys, args)])[0]
    if isinstance(reply, NoScriptError):
        return script(keys=keys, args=args, client=client)
    if isinstance(reply, Exception):
        raise reply
    return reply


def run_scripts(client: Redis, script: Script, calls: Sequence[Call]) -> list[Any]:
    """Each ``(keys, args)`` of ``calls`` as an ``EVALSHA`` of ``script``, all in one write;
    the replies in order, an error reply as its exception (``NoScriptError`` among them), as
    ``Pipeline.execute(raise_on_error=False)`` gives them."""
    pool = client.connection_pool
    conn = _checkout(pool)
    broken = True
    try:
        send_scripts(conn, script, calls)
        replies = read_replies(conn, len(calls))
        broken = False
        return replies
    except (ConnectionError, TimeoutError):
        pass  # redis-py disconnected the broken connection; the stock path takes it from here
    finally:
        _checkin(pool, conn, broken=broken)
    return run_pipeline(client, script, calls)


def send_scripts(conn: Connection, script: Script, calls: Sequence[Call]) -> None:
    """Write each call's ``EVALSHA`` on ``conn``, packed by hiredis, without reading."""
    packed = b"".join(
        hiredis.pack_command(("EVALSHA", script.sha, len(keys), *keys, *args))
        for keys, args in calls
    )
    untyped(conn.send_packed_command)([packed], check_health=False)


def read_replies(conn: Connection, count: int) -> list[Any]:
    """The next ``count`` replies on ``conn``, an error reply as its exception."""
    replies: list[Any] = []
    for _ in range(count):
        try:
            replies.append(conn.read_response())
        except ResponseError as exc:
            replies.append(exc)
    return replies


def reply_of(conn: Connection) -> Any:
    """The next reply on ``conn`` (a command written earlier, maybe by another thread): an
    error reply, or the connection's failure (redis-py then disconnects it), as the exception."""
    try:
        return read_replies(conn, 1)[0]
    except (ConnectionError, TimeoutError) as exc:
        return exc


def run_pipeline(client: Redis, script: Script, calls: Sequence[Call]) -> list[Any]:
    """The stock path for what the packed one could not finish: a redis-py pipeline, with
    the client's retries on a fresh connection."""
    pipe = client.pipeline(transaction=False)
    for keys, args in calls:
        pipe.evalsha(script.sha, len(keys), *keys, *args)
    return list(pipe.execute(raise_on_error=False))
