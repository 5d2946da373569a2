"""The Lua scripts of the call protocol. Each state transition of a call record is one script,
so it is atomic against every other dispatcher and worker: no read-modify-write races, and the
event that announces a transition is appended in the same step as the transition itself.

The index of queued calls' claim deadlines is ``<leases>:pending`` (``Keys.pending``), and a
queued call's pushed message sits in ``<call>:payload``; the scripts reach both by those
names. toolhub runs on one Redis (as kombu does), so keys a script derives need no cluster
slot.

The sweeps' own scripts (a lost worker's call, a message taken but never claimed) are in
``recovery_scripts.py``; ``Scripts`` registers both, each after the prelude here. Failing a
call that is still queued is one script here (``FAIL_QUEUED``), for the dispatcher and the
sweep alike.

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

from .recovery_scripts import (
    FAIL_LOST,
    REENQUEUE,
    REQUEUE,
    SWEEP_UNCLAIMED,
    TOUCH_RESERVED,
)
from .settings import QUEUES, Settings

_LUA_PRELUDE = r"""
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local function fmt(x) return string.format('%.6f', x) end
local function field_of(from, name)
  for i = from, #ARGV - 1, 2 do
    if ARGV[i] == name then return ARGV[i + 1] end
  end
  return false
end
local function emit(call, events, channel, payload, version)
  local seq = redis.call('HINCRBY', call, 'seq', 1)
  if version then
    redis.call('XADD', events, '0-' .. seq, 'd', payload, 'v', version)
  else
    redis.call('XADD', events, '0-' .. seq, 'd', payload)
    version = ''
  end
  redis.call('PUBLISH', channel, seq .. '|' .. version .. '|' .. payload)
  return seq
end
local function close_attempt(call, outcome, t)
  local raw = redis.call('HGET', call, 'attempts')
  if not raw then return end
  local list = cjson.decode(raw)
  local last = list[#list]
  if last and not last['outcome'] then
    last['outcome'] = outcome
    last['finished_at'] = fmt(t)
    redis.call('HSET', call, 'attempts', cjson.encode(list))
  end
end
local function finalize(call, events, channel, leases, state, cid, status, payload, result, ttl, t)
  local version = redis.call('HGET', state, '__v') or '0'
  local seq
  if redis.call('EXISTS', events) == 1 then
    seq = emit(call, events, channel, payload, version)
  else
    -- No progress: no stream. The record's result is the terminal event (``state_v``, ``seq``),
    -- which spares a finished call the ~4.7 KB a one-entry stream costs.
    seq = redis.call('HINCRBY', call, 'seq', 1)
    redis.call('PUBLISH', channel, seq .. '|' .. version .. '|' .. payload)
  end
  redis.call('HSET', call, 'status', status, 'finished_at', fmt(t), 'result', result,
             'state_v', version)
  local run, queue = unpack(redis.call('HMGET', call, 'run_id', 'queue'))
  if run then
    local keep = queue == BACKGROUND_QUEUE and DONE_TTL_BACKGROUND or DONE_TTL
    redis.call('SET', call .. ':done:' .. run, '1', 'EX', keep)
  end
  redis.call('HDEL', call, 'message', 'qkey', 'claim_by', 'lease_until', 'handoff')
  redis.call('DEL', call .. ':payload')
  redis.call('ZREM', leases, cid)
  redis.call('ZREM', leases .. ':pending', cid)
  redis.call('EXPIRE', call, ttl)
  redis.call('EXPIRE', events, ttl)
  redis.call('EXPIRE', call .. ':remote', ttl)
  return seq
end
"""

# KEYS: call, events, pending   ARGV: run_id, active_ttl, claim_seconds, cid, field, value, ...
# 1: created; 0: the id is a live call's; 3: the id is another session's call (kept until its
# record expires: a call id never moves between sessions, so another session cannot replace
# a finished call's record and events by reusing its id).
# A queued record carries a claim deadline (``claim_by``, indexed in ``pending``): a message
# taken off the queue by a worker that died before its claim is found by the sweep
# (``SWEEP_UNCLAIMED``) instead of waiting for kombu's hours-long visibility timeout.
CREATE = r"""
local st, owner = unpack(redis.call('HMGET', KEYS[1], 'status', 'session_id'))
if owner and owner ~= field_of(5, 'session_id') then return 3 end
if st == 'queued' or st == 'running' then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[1] .. ':remote')
local by = now() + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'status', 'queued', 'run_id', ARGV[1], 'seq', 0, 'attempt', 0,
           'lost', 0, 'created_at', fmt(now()), 'claim_by', fmt(by), unpack(ARGV, 5))
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[3], by, ARGV[4])
return 1
"""

# KEYS: call, events, queue, pending, session, config, state, tasks, channel
# ARGV: run_id, active_ttl, message, claim_seconds, cid, session_ttl, field, value, ...
# CREATE, then LPUSH the Celery message kombu built (``enqueue.py``) onto its queue: one round
# trip, and the message is queued if and only if the record was created. Idempotent for a
# retried dispatch (same run_id): the first run already queued the message, and a worker may
# have claimed or even finished it since (a turn's first writes run while the dispatcher is
# still preparing the rest, ``dispatch_batch.py``), so a record with this run id, in any
# status, answers 1. The pushed bytes
# are kept beside the record (``call:{cid}:payload``, and ``qkey`` on it) until the claim, so
# the sweep can tell a call still waiting in its queue (LPOS) from one a dead worker took. A
# key of their own: in the record, a value that large would move the whole hash to Redis's
# larger encoding for good. The session's keys get their
# TTL refreshed here, by use, at no extra round trip; 2 means the session's config expired,
# 3 that the id is another session's call (as in CREATE). 4 is 1 with the call's channel
# already subscribed when the message was queued (``PUBSUB NUMSUB``): the dispatcher's own
# subscription, sent just before, was active before any worker could publish, so it need not
# wait for Redis's confirmation nor read the stream first.
CREATE_AND_ENQUEUE = r"""
local st, run, owner = unpack(redis.call('HMGET', KEYS[1], 'status', 'run_id', 'session_id'))
if owner and owner ~= field_of(7, 'session_id') then return 3 end
if st and run == ARGV[1] then return 1 end
if st == 'queued' or st == 'running' then return 0 end
if redis.call('EXPIRE', KEYS[6], ARGV[6]) == 0 then return 2 end
redis.call('EXPIRE', KEYS[5], ARGV[6])
redis.call('EXPIRE', KEYS[7], ARGV[6])
redis.call('EXPIRE', KEYS[8], ARGV[6])
redis.call('DEL', KEYS[1], KEYS[2], KEYS[1] .. ':remote')
local t = now()
local by = t + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'status', 'queued', 'run_id', ARGV[1], 'seq', 0, 'attempt', 0,
           'lost', 0, 'created_at', fmt(t), 'claim_by', fmt(by), 'qkey', KEYS[3],
           unpack(ARGV, 7))
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('SET', KEYS[1] .. ':payload', ARGV[3], 'EX', ARGV[2])
redis.call('ZADD', KEYS[4], by, ARGV[5])
redis.call('LPUSH', KEYS[3], ARGV[3])
if redis.call('PUBSUB', 'NUMSUB', KEYS[9])[2] > 0 then return 4 end
return 1
"""

# KEYS: call, events, channel, leases, state
# ARGV: cid, run_id, worker, lease_seconds, ttl, lost_payload, lost_result,
#       cancelled_payload, cancelled_result
# The four terminals may be empty: a claim that would write one (its worker lost too often, a
# cancel requested) then returns {'terminal', attempt} before changing anything, and the worker
# claims again with them. Almost no claim needs one, and building and sending them cost every
# claim (``CallRecords.claim``).
# 'replayed': the run finished already and its record was reset since (the module docstring).
# Returns {action, attempt} and, for 'run', the session state (saves the worker a round trip),
# how many attempts were lost before this one, and 1 when this attempt takes up the remote
# task an earlier one recorded (``redis_task_ledger.py``; counted in ``resumed``). A call whose
# policy on worker loss is ``fail`` (``on_lost``) is never re-run here: 'lost_fail' tells the
# worker to fail it (``FAIL_LOST``), a cold path that keeps the failure text off every claim;
# one that left a remote task is resumed, whatever its policy.
CLAIM = r"""
local call, events, channel, leases, state = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local cid = ARGV[1]
local r = redis.call('HMGET', call, 'status', 'run_id', 'attempt', 'lease_until',
                     'cancel_requested', 'handoff', 'max_attempts', 'on_lost', 'lost')
if not r[1] then return {'gone', 0} end
if r[2] ~= ARGV[2] then return {'stale', 0} end
local status = r[1]
local attempt = tonumber(r[3]) or 0
if status ~= 'queued' and status ~= 'running' then return {'finished', attempt} end
if redis.call('EXISTS', call .. ':done:' .. ARGV[2]) == 1 then return {'replayed', attempt} end
local t = now()
if status == 'running' and tonumber(r[4]) > t then return {'duplicate', attempt} end
local resumed = 0
local bare = ARGV[6] == ''
if status == 'running' then
  resumed = redis.call('EXISTS', call .. ':remote')
  if r[6] == '1' then
    if bare and r[5] == '1' then return {'terminal', attempt} end
    close_attempt(call, 'handed_back', t)
  elseif r[8] == 'fail' and r[5] ~= '1' and resumed == 0 then
    return {'lost_fail', attempt}
  else
    if bare and (r[5] == '1' or (tonumber(r[9]) or 0) + 1 >= (tonumber(r[7]) or 3)) then
      return {'terminal', attempt}
    end
    close_attempt(call, 'worker_lost', t)
    local lost = redis.call('HINCRBY', call, 'lost', 1)
    if r[5] ~= '1' and lost >= (tonumber(r[7]) or 3) then
      finalize(call, events, channel, leases, state, cid, 'failed', ARGV[6], ARGV[7], ARGV[5], t)
      return {'exhausted', attempt}
    end
  end
end
if r[5] == '1' then
  if bare then return {'terminal', attempt} end
  finalize(call, events, channel, leases, state, cid, 'cancelled', ARGV[8], ARGV[9], ARGV[5], t)
  return {'cancelled', attempt}
end
attempt = attempt + 1
local lease_until = t + tonumber(ARGV[4])
redis.call('HSET', call, 'status', 'running', 'attempt', attempt, 'worker', ARGV[3],
           'lease_until', fmt(lease_until), 'handoff', '0')
redis.call('HSETNX', call, 'started_at', fmt(t))
local raw = redis.call('HGET', call, 'attempts')
local list = raw and cjson.decode(raw) or {}
list[#list + 1] = {attempt = attempt, worker = ARGV[3], started_at = fmt(t)}
redis.call('HSET', call, 'attempts', cjson.encode(list))
redis.call('ZADD', leases, lease_until, cid)
redis.call('ZREM', leases .. ':pending', cid)
redis.call('HDEL', call, 'qkey', 'claim_by')
redis.call('DEL', call .. ':payload')
if resumed == 1 then redis.call('HINCRBY', call, 'resumed', 1) end
local lost = tonumber(redis.call('HGET', call, 'lost')) or 0
return {'run', attempt, redis.call('HGETALL', state), lost, resumed}
"""

# KEYS: call, events, channel   ARGV: attempt, payload, ...
EMIT = r"""
local r = redis.call('HMGET', KEYS[1], 'status', 'attempt')
if r[1] ~= 'running' or r[2] ~= ARGV[1] then return -1 end
local seq = 0
for i = 2, #ARGV do seq = emit(KEYS[1], KEYS[2], KEYS[3], ARGV[i], nil) end
return seq
"""

# KEYS: call, events, channel, leases, state
# ARGV: cid, attempt, status, payload, result, ttl, outcome
FINISH = r"""
local r = redis.call('HMGET', KEYS[1], 'status', 'attempt')
if r[1] ~= 'running' or r[2] ~= ARGV[2] then return -1 end
local t = now()
close_attempt(KEYS[1], ARGV[7], t)
return finalize(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[3], ARGV[4],
                ARGV[5], ARGV[6], t)
"""

# Renews the leases of many calls in one command (one reply, however many calls).
# KEYS: leases, call_1 .. call_n
# ARGV: lease_seconds, cid_1, attempt_1 .. cid_n, attempt_n
# Returns per call 0 (lease lost), 1 (renewed) or 2 (renewed, and a cancel was requested: the
# backstop for a control message the worker missed while its pub/sub connection was down).
RENEW_MANY = r"""
local lease_until = now() + tonumber(ARGV[1])
local stamp = fmt(lease_until)
local codes = {}
for i = 2, #KEYS do
  local r = redis.call('HMGET', KEYS[i], 'status', 'attempt', 'cancel_requested')
  if r[1] ~= 'running' or r[2] ~= ARGV[2 * i - 1] then
    codes[i - 1] = 0
  else
    redis.call('HSET', KEYS[i], 'lease_until', stamp)
    redis.call('ZADD', KEYS[1], lease_until, ARGV[2 * i - 2])
    codes[i - 1] = r[3] == '1' and 2 or 1
  end
end
return codes
"""

# KEYS: call, events, channel, leases, state, control
# ARGV: cid, cancelled_payload, cancelled_result, ttl, control_message
CANCEL = r"""
local r = redis.call('HMGET', KEYS[1], 'status', 'lease_until')
if not r[1] then return 'unknown' end
local t = now()
local expired = r[1] == 'running' and tonumber(r[2]) <= t
if r[1] == 'queued' or expired then
  if expired then close_attempt(KEYS[1], 'worker_lost', t) end
  finalize(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], 'cancelled', ARGV[2], ARGV[3],
           ARGV[4], t)
  return 'cancelled'
end
if r[1] == 'running' then
  redis.call('HSET', KEYS[1], 'cancel_requested', '1')
  redis.call('PUBLISH', KEYS[6], ARGV[5])
  return 'signalled'
end
return 'finished'
"""

# KEYS: call, events, channel, leases, state   ARGV: cid, payload, result, ttl
# A call that will never run while it is still queued: failed, with its terminal event, so
# every follower (not only the process that found out) gets an answer. Its message never
# reached the broker (the dispatcher), or it kept being taken by workers that died before
# claiming it (the sweep, ``recovery.py``).
FAIL_QUEUED = r"""
if redis.call('HGET', KEYS[1], 'status') ~= 'queued' then return 0 end
return finalize(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], 'failed', ARGV[2],
                ARGV[3], ARGV[4], now())
"""

# KEYS: call, events, channel, leases, state   ARGV: cid, payload, result, ttl, run_id, lapsed
# A queued call whose message a worker refused to run (malformed, or not signed with the fleet
# key): failed, so its caller does not wait for a run that will never come. Only while the
# record is still queued under that message's run id: a stray or forged copy never fails a
# call it does not belong to, nor one already running. Two refusals also answer a running
# record of that run: a replay (the run's done marker exists: the record was reset after it
# finished) and, with ``lapsed`` '1', a genuine message too old to run (``expired``) of a call
# whose lease lapsed (no copy of its message can ever run again; a live lease is left alone).
REFUSED = r"""
local r = redis.call('HMGET', KEYS[1], 'status', 'run_id', 'lease_until')
if r[2] ~= ARGV[5] then return 0 end
local t = now()
if r[1] == 'running' then
  local done = redis.call('EXISTS', KEYS[1] .. ':done:' .. ARGV[5]) == 1
  if not done and not (ARGV[6] == '1' and (tonumber(r[3]) or 0) <= t) then return 0 end
  close_attempt(KEYS[1], 'refused', t)
elseif r[1] ~= 'queued' then
  return 0
end
return finalize(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], 'failed', ARGV[2],
                ARGV[3], ARGV[4], t)
"""

# KEYS: call, leases   ARGV: cid, attempt
HANDOFF = r"""
local r = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'message')
if r[1] ~= 'running' or r[2] ~= ARGV[2] then return false end
redis.call('HSET', KEYS[1], 'lease_until', '0', 'handoff', '1')
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return r[3]
"""


class Scripts:
    """The scripts, registered once per client (EVALSHA after the first call)."""

    def __init__(self, client: Redis, settings: Settings) -> None:
        # How long a finished run's marker is kept, per kind of call (``finalize``).
        prelude = (
            f"local DONE_TTL = {settings.replay_marker_seconds('command')}\n"
            f"local DONE_TTL_BACKGROUND = {settings.replay_marker_seconds('background')}\n"
            f"local BACKGROUND_QUEUE = '{QUEUES['background']}'\n"
        ) + _LUA_PRELUDE
        self.create: Script = client.register_script(prelude + CREATE)
        self.create_and_enqueue: Script = client.register_script(prelude + CREATE_AND_ENQUEUE)
        self.claim: Script = client.register_script(prelude + CLAIM)
        self.emit: Script = client.register_script(prelude + EMIT)
        self.finish: Script = client.register_script(prelude + FINISH)
        self.renew_many: Script = client.register_script(prelude + RENEW_MANY)
        self.cancel: Script = client.register_script(prelude + CANCEL)
        self.handoff: Script = client.register_script(prelude + HANDOFF)
        self.fail_queued: Script = client.register_script(prelude + FAIL_QUEUED)
        self.refused: Script = client.register_script(prelude + REFUSED)
        self.requeue: Script = client.register_script(prelude + REQUEUE)
        self.fail_lost: Script = client.register_script(prelude + FAIL_LOST)
        self.sweep_unclaimed: Script = client.register_script(prelude + SWEEP_UNCLAIMED)
        self.reenqueue: Script = client.register_script(prelude + REENQUEUE)
        self.touch_reserved: Script = client.register_script(prelude + TOUCH_RESERVED)
