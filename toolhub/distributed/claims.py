"""A worker's claim of a delivered message: what the claim script (``lua/claim.lua``) lets it do,
decoded by name from the script's reply.

Threat: a message delivered twice (a redelivery, a replay of a finished run, a duplicate after a
lost worker) must run at most once at a time; the script decides under the record's lock and
this is how the worker reads its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .script_replies import ClaimAction

__all__ = ["Claim", "decode_claim"]


@dataclass(frozen=True, slots=True)
class Claim:
    """What a worker may do with a delivered message: ``run`` it as ``attempt``, or drop it
    (``duplicate``: another worker holds a live lease; ``finished``/``gone``/``stale``: nothing
    left to do; ``cancelled``/``exhausted``: the script already wrote the terminal), or refuse
    it (``replayed``: its run finished already, and its record was reset since)."""

    action: ClaimAction
    attempt: int
    state: dict[bytes, bytes] | None = None
    #: Attempts lost before this one: when > 0, this run repeats work that may have happened.
    lost: int = 0
    #: This attempt takes up the remote task an earlier one recorded (``redis_task_ledger.py``):
    #: it repeats nothing, and its result says so itself.
    resumed: bool = False


#: The script's reply word -> its action (a dict read, not the enum's lookup by value).
_ACTIONS = {action.value.encode(): action for action in ClaimAction}


def decode_claim(reply: list[Any]) -> Claim:
    """The claim script's reply, ``{action, attempt}`` and for ``run`` also ``state`` (flat
    hash), ``lost`` and ``resumed`` (header of ``lua/claim.lua``)."""
    action, attempt = _ACTIONS[reply[0]], int(reply[1])
    if action is not ClaimAction.RUN:
        return Claim(action, attempt)
    flat, lost, resumed = reply[2], int(reply[3]), reply[4] == 1
    state = dict(zip(flat[::2], flat[1::2], strict=True))
    return Claim(action, attempt, state, lost, resumed)
