"""One ``EVALSHA`` of a registered script, without redis-py's per-command layers.

Every distributed call runs the claim and finish scripts on its worker, and every progress
item an emit: three or more script calls on the worker's critical path. Through redis-py's
``Script.__call__`` each goes through ``execute_command``: argument encoding one by one in
Python, the client's retry wrapper, observability hooks, response callbacks. That cost 45-60 us
more per call than packing the whole command with hiredis and writing it on a pooled
connection (a claim on a real Redis: p50 195-217 us through ``Script``, 151-159 us here;
docs/benchmarks.md, round seven).

The connection, its timeouts, reconnection and error types are still redis-py's. Anything
other than a reply goes back to the stock path. Redis may not know the script (after a
restart or ``SCRIPT FLUSH``), and stock loads it. A connection may fail, and stock retries
the command with the client's retry policy on a fresh connection, as it always did.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import hiredis
from redis import Redis
from redis.commands.core import Script
from redis.exceptions import ConnectionError, NoScriptError, TimeoutError

from .replies import untyped


def run_script(client: Redis, script: Script, keys: Sequence[Any], args: Sequence[Any]) -> Any:
    """``script(keys=keys, args=args)`` on ``client``, as one packed write and one read."""
    pool = client.connection_pool
    conn = pool.get_connection()
    try:
        command = ("EVALSHA", script.sha, len(keys), *keys, *args)
        untyped(conn.send_packed_command)([hiredis.pack_command(command)], check_health=False)
        return conn.read_response()
    except (NoScriptError, ConnectionError, TimeoutError):
        pass  # redis-py disconnected a failed connection; the stock path takes it from here
    finally:
        pool.release(conn)
    return script(keys=keys, args=args, client=client)
