"""Fair dispatch: one tenant's burst must not queue in front of another tenant's single call.

Celery's Redis queues are FIFO lists: 5,000 calls one tenant queues at once would sit in front
of every call another tenant makes after them. toolhub keeps one FIFO per queue, but in two
priority levels (kombu's Redis priorities: ``priority_steps`` ``[0, SUNK_PRIORITY]``, one list
per step, ``q`` and ``q\\x06\\x169``). Every worker's ``BRPOP`` names the level-0 lists of its
queues before the sunk ones, so a sunk message runs only when no level-0 message waits.

The dispatcher's create-and-enqueue script (``lua/create_and_enqueue.lua``) decides the level
in the round trip that queues the call: it counts the calls of the call's tenant that are
queued and not yet claimed (``Keys.fair_queued``: a sorted set, call id -> when the entry
lapses); below ``Settings.fair_share`` the call goes to its queue's level-0 list, at or above
it to the sunk list. A burst therefore fills the sunk list past its first ``fair_share``
calls, and a tenant with a few calls in flight keeps being served next: at most
``fair_share`` calls of each other tenant wait in front of it. Within a level, order stays
FIFO, so a burst still runs in the order it was sent, and nothing is dropped or reordered
across tenants beyond that.

The claim removes the call from the set (``lua/claim.lua``); an entry nobody removes (a message
lost with its record) lapses with the record's active TTL, so a missed removal can cost a
tenant its priority for a bounded time, never forever. A sunk message carries kombu's
``priority`` property of the sunk level (the script rewrites ``NORMAL_FIELD`` to
``SUNK_FIELD`` in the payload it pushes), so kombu's own restore of a message a worker held but
had not started puts it back on the sunk list. toolhub's recovery sweeps re-enqueue a lost call
at level 0: it already waited its turn once.

A long burst does not keep a Celery message per call: past ``Settings.backlog_window``
messages in the sunk list (or while a backlog already waits), the script pushes only the call
id onto the queue's backlog (``Keys.backlog``, a list toolhub owns; the record keeps the
message), and the workers of that queue promote the oldest ids into the sunk list as it drains
(``backlog.py``). The sunk list and its backlog are one FIFO, so nothing changes in who runs
first; a waiting call costs its record and a list entry instead of a ~1.4 KB message.

Threat: a tenant that floods the queues; the set is keyed by the tenant read from the stored
session id, which no client chooses (``toolhub.tenancy.principal``).
"""

from __future__ import annotations

#: kombu's Redis priority of a call past its tenant's fair share (0 is served first).
SUNK_PRIORITY = 9
#: kombu's Redis priority of a call past its tenant's fair share but not its burst line: served
#: after every level-0 call and before any sunk one.
OVER_PRIORITY = 5
#: kombu's priority steps on Redis: one list per step, popped in this order.
PRIORITY_STEPS = (0, OVER_PRIORITY, SUNK_PRIORITY)
#: kombu's Redis transport: between a queue's name and its priority step (``Channel.sep``).
PRIORITY_SEP = b"\x06\x16"
#: kombu's envelope property as it serializes it (``kombu.utils.json``), at level 0 and sunk.
NORMAL_FIELD = '"priority": 0'
SUNK_FIELD = f'"priority": {SUNK_PRIORITY}'
OVER_FIELD = f'"priority": {OVER_PRIORITY}'


def sunk_queue(queue_key: bytes) -> bytes:
    """The list kombu keeps for ``queue_key``'s messages at ``SUNK_PRIORITY``."""
    return queue_key + PRIORITY_SEP + str(SUNK_PRIORITY).encode()


def over_queue(queue_key: bytes) -> bytes:
    """The list kombu keeps for ``queue_key``'s messages at ``OVER_PRIORITY``."""
    return queue_key + PRIORITY_SEP + str(OVER_PRIORITY).encode()


def lua_constants(fair_share: int, fair_burst: int, backlog_window: int) -> str:
    """The constants the create-and-enqueue and promote scripts read (``scripts.py`` puts
    them first; ``BACKLOG``, the backlog keys' prefix, comes with the other key names)."""
    return (
        f"local FAIR_SHARE = {int(fair_share)}\n"
        f"local FAIR_BURST = {int(fair_burst)}\n"
        f"local BACKLOG_WINDOW = {int(backlog_window)}\n"
        f"local NORMAL_FIELD = '{NORMAL_FIELD}'\n"
        f"local SUNK_FIELD = '{SUNK_FIELD}'\n"
        f"local OVER_FIELD = '{OVER_FIELD}'\n"
    )


__all__ = [
    "NORMAL_FIELD",
    "OVER_FIELD",
    "OVER_PRIORITY",
    "PRIORITY_STEPS",
    "SUNK_FIELD",
    "SUNK_PRIORITY",
    "lua_constants",
    "over_queue",
    "sunk_queue",
]
