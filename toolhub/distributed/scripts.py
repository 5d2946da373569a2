"""The Lua scripts of the call protocol. Each state transition of a call record is one script,
so it is atomic against every other dispatcher and worker: no read-modify-write races, and the
event that announces a transition is appended in the same step as the transition itself.

The index of queued calls' claim deadlines is ``<leases>:pending`` (``Keys.pending``), and a
queued call's pushed message sits in ``<call>:payload``; the scripts reach both by those
names. toolhub runs on one Redis (as kombu does), so keys a script derives need no cluster
slot.

Each script is a file in ``lua/`` (its keys, arguments and named replies in its header
comment), run after ``lua/prelude.lua``; the sweeps' own (a lost worker's call, a message
taken but never claimed: ``requeue``, ``fail_lost``, ``sweep_unclaimed``, ``reenqueue``,
``touch_reserved``) among them. Failing a call that is still queued is one script
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

from .lua import source
from .settings import QUEUES, Settings

# KEYS: call, events, channel, leases, state
# ARGV: cid, run_id, worker, state_version, ran_seconds, status, payload, result, ttl
# An optimistic run's claim and finish in one step (``workers/optimistic.py``): the tool ran
# before its claim, on the session state its worker held. Accepted only while the call is
# untouched (queued under this message's run id, never attempted, no cancel asked) and the
# state is still the version the tool read; then it is attempt 1, started ``ran_seconds`` ago.
# Returns the terminal's seq; -1 (the call is not untouched) or -2 (the state moved) leave
# everything as it was, and the worker claims the call as usual and runs it again.
CLAIM_AND_FINISH = r"""
local r = redis.call('HMGET', KEYS[1], 'status', 'run_id', 'attempt', 'cancel_requested')
if r[1] ~= 'queued' or r[2] ~= ARGV[2] or r[3] ~= '0' or r[4] == '1' then return -1 end
if redis.call('EXISTS', KEYS[1] .. ':done:' .. ARGV[2]) == 1 then return -1 end
if (redis.call('HGET', KEYS[5], '__v') or '0') ~= ARGV[4] then return -2 end
local t = now()
local started = fmt(t - tonumber(ARGV[5]))
local attempts = {{attempt = 1, worker = ARGV[3], started_at = started, outcome = ARGV[6],
                   finished_at = fmt(t)}}
redis.call('HSET', KEYS[1], 'attempt', 1, 'worker', ARGV[3], 'started_at', started,
           'attempts', cjson.encode(attempts))
return finalize(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[6], ARGV[7],
                ARGV[8], ARGV[9], t)
"""


class Scripts:
    """The scripts, registered once per client (EVALSHA after the first call)."""

    def __init__(self, client: Redis, settings: Settings) -> None:
        # How long a finished run's marker is kept, per kind of call (``finalize``).
        prelude = (
            f"local DONE_TTL = {settings.replay_marker_seconds('command')}\n"
            f"local DONE_TTL_BACKGROUND = {settings.replay_marker_seconds('background')}\n"
            f"local BACKGROUND_QUEUE = '{QUEUES['background']}'\n"
        ) + source("prelude")

        def script(name: str) -> Script:
            return client.register_script(prelude + source(name))

        self.create = script("create")
        self.create_and_enqueue = script("create_and_enqueue")
        self.claim = script("claim")
        self.emit = script("emit")
        self.finish = script("finish")
        self.claim_and_finish: Script = client.register_script(prelude + CLAIM_AND_FINISH)
        self.renew_many = script("renew_many")
        self.cancel = script("cancel")
        self.handoff = script("handoff")
        self.fail_queued = script("fail_queued")
        self.refused = script("refused")
        self.requeue = script("requeue")
        self.fail_lost = script("fail_lost")
        self.sweep_unclaimed = script("sweep_unclaimed")
        self.reenqueue = script("reenqueue")
        self.touch_reserved = script("touch_reserved")
