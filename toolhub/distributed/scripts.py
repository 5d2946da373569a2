"""The Lua scripts of the call protocol. Each state transition of a call record is one script,
so it is atomic against every other dispatcher and worker: no read-modify-write races, and the
event that announces a transition is appended in the same step as the transition itself.

The index of queued calls' claim deadlines is ``<leases>:pending`` (``Keys.pending``), and the
count of messages the scripts pushed onto each queue list is ``PUSHED`` (``Keys.pushed``, a
constant of the prelude, as is ``BACKLOG``, the prefix of ``Keys.backlog``); the scripts reach
them by those names. toolhub runs on one Redis (as
kombu does), so keys a script derives need no cluster slot.

Each script is a file in ``lua/`` (its keys, arguments and named replies in its header
comment), run after ``lua/quota.lua`` (a tenant's quotas, ``quota.py``) and
``lua/prelude.lua``; the sweeps' own (a lost worker's call, a message taken but never
claimed: ``requeue``, ``fail_lost``, ``sweep_unclaimed``, ``reenqueue``, ``touch_reserved``)
among them. Failing a call that is still queued is one script
(``fail_queued``), for the dispatcher and the sweep alike.

Fencing: every write by a worker names the attempt it runs; a write from an attempt that is no
longer current (its lease expired and another worker took over) is refused, so a zombie worker
can never publish into a call it lost.

Finished runs stay finished: every terminal (``finalize``) also writes ``<call>:done:<run_id>``
(``1``: a shared integer, the smallest value Redis keeps), and a claim of a run that has one
answers ``replayed`` however the record reads. It is kept as long as a message of its kind may
run (``Settings.replay_marker_seconds``: after that a worker refuses the message as expired),
usually far shorter than the record. Threat: a writer of Redis with no fleet key resets a
finished call's record to ``queued`` (or ``running`` with a lapsed lease) and pushes its
signed message again; the message verifies, so only the claim can tell. Redeliveries of an
unfinished run (kombu's, a sweep's re-enqueue, a hand-back) find no marker and are handled
as before. The marker is per run, not per call id: a call id reused by a new dispatch (a new
run id) neither sees nor replaces it.
"""

from __future__ import annotations

from redis import Redis
from redis.commands.core import Script

from .fair import lua_constants
from .keys import Keys
from .lua import source
from .settings import QUEUES, Settings


def lua_string(text: str) -> str:
    """``text`` as a Lua string literal: any other byte than a letter, digit, ``:``, ``_``,
    ``-`` or ``.`` escaped as decimal, so any prefix is safe."""
    plain = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_-.")
    return '"' + "".join(chr(b) if b in plain else f"\\{b:03d}" for b in text.encode()) + '"'


class Scripts:
    """The scripts, registered once per client (EVALSHA after the first call)."""

    def __init__(self, client: Redis, settings: Settings) -> None:
        keys = Keys(settings.prefix)
        # How long a finished run's marker is kept, per kind of call (``finalize``).
        prelude = (
            (
                f"local DONE_TTL = {settings.replay_marker_seconds('command')}\n"
                f"local DONE_TTL_BACKGROUND = {settings.replay_marker_seconds('background')}\n"
                f"local BACKGROUND_QUEUE = '{QUEUES['background']}'\n"
                f"local PUSHED = {lua_string(keys.pushed)}\n"
                f"local BACKLOG = {lua_string(keys.backlog(''))}\n"
            )
            + lua_constants(settings.fair_share, settings.fair_burst, settings.backlog_window)
            + source("quota")
            + source("prelude")
        )

        def script(name: str) -> Script:
            return client.register_script(prelude + source(name))

        self.create = script("create")
        self.create_and_enqueue = script("create_and_enqueue")
        self.claim = script("claim")
        self.emit = script("emit")
        self.finish = script("finish")
        self.renew_many = script("renew_many")
        self.start_fence = script("start_fence")
        self.cancel = script("cancel")
        self.handoff = script("handoff")
        self.fail_queued = script("fail_queued")
        self.refused = script("refused")
        self.requeue = script("requeue")
        self.fail_lost = script("fail_lost")
        self.sweep_unclaimed = script("sweep_unclaimed")
        self.reenqueue = script("reenqueue")
        self.touch_reserved = script("touch_reserved")
        self.promote = script("promote")
        # Approvals (``approvals.py``): an approval is checked and queued in one script.
        self.await_approval = script("await_approval")
        self.approve = client.register_script(
            prelude + source("approve") + source("create_and_enqueue")
        )
        self.decide_approval = script("decide_approval")
