"""``EVALSHA`` of a registered script, without redis-py's per-command layers.

Every distributed call runs the claim and finish scripts on its worker, and every progress
item an emit: three or more script calls on the worker's critical path. Every dispatch runs the
record-and-enqueue script, in a pipeline with the others of its loop turn. Through redis-py
(``Script.__call__``, ``Pipeline.evalsha``) each goes through ``execute_command``: argument
encoding one by one in Python, the client's retry wrapper, hooks, response callbacks. Packing
the commands with hiredis and writing them on a pooled connection skips those layers for the
calls made on every distributed call.

The connection, its timeouts, reconnection and error types are still redis-py's. What the
packed path does not handle goes back to the stock one. Redis may not know the script (after
a restart or ``SCRIPT FLUSH``): stock loads it. A connection may break or time out: the batch
goes again through a redis-py pipeline, which retries it on a fresh connection with the
client's retry policy, as it always did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import hiredis
from redis import Redis
from redis.commands.core import Script
from redis.connection import Connection
from redis.exceptions import ConnectionError, NoScriptError, ResponseError, TimeoutError

from .replies import untyped

Call = tuple[Sequence[Any], Sequence[Any]]


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
    conn = pool.get_connection()
    try:
        send_scripts(conn, script, calls)
        return read_replies(conn, len(calls))
    except (ConnectionError, TimeoutError):
        pass  # redis-py disconnected the broken connection; the stock path takes it from here
    finally:
        pool.release(conn)
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


def run_pipeline(client: Redis, script: Script, calls: Sequence[Call]) -> list[Any]:
    """The stock path for what the packed one could not finish: a redis-py pipeline, with
    the client's retries on a fresh connection."""
    pipe = client.pipeline(transaction=False)
    for keys, args in calls:
        pipe.evalsha(script.sha, len(keys), *keys, *args)
    return list(pipe.execute(raise_on_error=False))
