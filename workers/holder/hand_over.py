"""How a worker hands a background command's attempt to its host's holder, waiting out a holder
that is alive but does not answer, and telling that apart from a holder that is gone.

Threat: a holder that is frozen (SIGSTOP, a stalled disk, a swap storm) still has a worker's
start request queued on its socket, and reads it when it wakes. A worker that had meanwhile
run the command itself would make two copies of one attempt. So:

* every ``start`` carries its attempt and a ``deadline`` on the host's monotonic clock (the
  worker and its holder share the host): the holder refuses a request it reads after the
  deadline, as the worker no longer waits for that answer (``server.py``);
* the holder takes the attempt in Redis before starting it (``start_fence.lua``), and refuses
  when someone else has it or the call moved on to another attempt;
* a worker whose request went unanswered asks again (a repeated request of an attempt the
  holder has is answered from its table) as long as the holder lives, for at most
  ``TOOLHUB_HOLDER_START_WAIT_SECONDS``. It never runs the command itself unless the holder is
  known dead: no process holds its life lock, or its socket refuses connections, and no new
  holder could be started (``GONE``). When it stops waiting (``SILENT``) it withdraws the
  attempt in Redis the same way; if the holder took it first, it is the holder's.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from .client import REPLY_TIMEOUT_S, HolderClient, Undelivered

logger = logging.getLogger("toolhub.worker.holder")

#: How long a worker waits, in all, for a live holder that does not answer a ``start``.
START_WAIT_ENV = "TOOLHUB_HOLDER_START_WAIT_SECONDS"
DEFAULT_START_WAIT_S = 60.0
#: The holder's answer to a request it read after its deadline.
STALE = "stale"
#: Between two requests to a live holder that took none (its backlog full, say).
_RETRY_PAUSE_S = 0.5


class Unreached(StrEnum):
    """Why a ``start`` got no answer."""

    #: No holder lives (or listens) and none could be started: nothing can have the request.
    GONE = "gone"
    #: A holder lives but did not answer in time: it may still read the request.
    SILENT = "silent"


def start_wait_seconds() -> float:
    raw = os.environ.get(START_WAIT_ENV, "")
    return float(raw) if raw.strip() else DEFAULT_START_WAIT_S


def hand_over(
    client: HolderClient,
    payload: dict[str, Any],
    *,
    give_up: Callable[[], bool],
    wait_s: float | None = None,
) -> dict[str, Any] | Unreached:
    """Send ``payload`` (a ``start``) until the holder answers, spawning a holder when none
    lives; ``give_up()`` true (the attempt was cancelled or handed back) ends the wait early as
    ``SILENT``."""
    wait = start_wait_seconds() if wait_s is None else wait_s
    until = time.monotonic() + wait
    while True:
        timeout = max(0.5, min(REPLY_TIMEOUT_S, until - time.monotonic()))
        request = {**payload, "deadline": time.monotonic() + timeout}
        try:
            reply = client.exchange(request, timeout)
            if isinstance(reply, dict) and reply.get("error") != STALE:
                return reply
            delivered = True  # the holder closed the connection: it may be exiting
        except Undelivered:
            delivered = False
        except (OSError, ValueError, TypeError):
            delivered = True
        if (not delivered or not client.alive()) and not client.ensure_running():
            return Unreached.GONE
        if give_up() or time.monotonic() >= until:
            logger.warning(
                "call %s: the background holder (%s) is alive but did not answer for %.0f s",
                payload.get("message", {}).get("call_id"),
                client.paths.socket,
                wait,
            )
            return Unreached.SILENT
        if not delivered:
            continue
        time.sleep(_RETRY_PAUSE_S)
