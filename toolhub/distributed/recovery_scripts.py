"""The Lua scripts of recovery: what the sweeps run for a call whose worker is gone (its
lease ran out) and for a queued call whose message was taken but never claimed. Like every
script of the call protocol (``scripts.py``, which registers these too), each is one atomic
step, and runs after ``scripts.py``'s prelude (``now``, ``fmt``, ``close_attempt``,
``finalize``).
"""

# KEYS: call, leases   ARGV: cid, grace_seconds
# Returns {message, 'rerun'|'resume'|'fail'} for a call whose lease expired ('resume': the lost
# attempt recorded a remote task, which the next one polls instead of calling the tool, so it
# is re-enqueued under either policy; 'fail': its policy on worker loss says not to run it
# again, and the sweeper calls FAIL_LOST).
REQUEUE = r"""
local r = redis.call('HMGET', KEYS[1], 'status', 'lease_until', 'message', 'on_lost',
                     'handoff', 'cancel_requested')
if r[1] ~= 'running' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return false
end
local t = now()
if tonumber(r[2]) > t then
  redis.call('ZADD', KEYS[2], r[2], ARGV[1])
  return false
end
redis.call('ZADD', KEYS[2], t + tonumber(ARGV[2]), ARGV[1])
if redis.call('EXISTS', KEYS[1] .. ':remote') == 1 then return {r[3], 'resume'} end
local fail = r[4] == 'fail' and r[5] ~= '1' and r[6] ~= '1'
return {r[3], fail and 'fail' or 'rerun'}
"""

# KEYS: call, events, channel, leases, state   ARGV: cid, payload, result, ttl
# A running call whose worker is gone and whose policy is not to re-run it: the lost attempt
# is closed and the call fails with ``worker_lost`` (the command may have partly run).
FAIL_LOST = r"""
local r = redis.call('HMGET', KEYS[1], 'status', 'lease_until')
if r[1] ~= 'running' then return 0 end
local t = now()
if tonumber(r[2]) > t then return 0 end
close_attempt(KEYS[1], 'worker_lost', t)
redis.call('HINCRBY', KEYS[1], 'lost', 1)
return finalize(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], 'failed', ARGV[2],
                ARGV[3], ARGV[4], t)
"""

# KEYS: call, pending   ARGV: cid, claim_seconds
# A queued call past its claim deadline: 'waiting' (its message is still in the queue: push
# the deadline on), 'taken' (a worker took the message and died before claiming it, or kombu
# lost it between its read and its unacked bookkeeping) with the stored message and how often
# that happened already, or 'gone' (no longer queued). The deadline moves on in every case, so
# concurrent sweeps act on a call once.
SWEEP_UNCLAIMED = r"""
local status, claim_by, qkey, message, requeued = unpack(redis.call('HMGET', KEYS[1], 'status',
    'claim_by', 'qkey', 'message', 'requeued'))
if status ~= 'queued' then
  redis.call('ZREM', KEYS[2], ARGV[1])
  return {'gone'}
end
local t = now()
if tonumber(claim_by or '0') > t then
  redis.call('ZADD', KEYS[2], claim_by, ARGV[1])
  return {'early'}
end
local by = t + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'claim_by', fmt(by))
redis.call('ZADD', KEYS[2], by, ARGV[1])
local payload = redis.call('GET', KEYS[1] .. ':payload')
if payload and qkey and redis.call('LPOS', qkey, payload) then return {'waiting'} end
return {'taken', message or '', tonumber(requeued) or 0}
"""

# KEYS: call, queue, pending   ARGV: cid, run_id, payload, claim_seconds
# Push a fresh message for a taken-but-unclaimed call (same run id, so exactly one of the
# messages can ever claim it) and count it.
REENQUEUE = r"""
local r = redis.call('HMGET', KEYS[1], 'status', 'run_id')
if r[1] ~= 'queued' or r[2] ~= ARGV[2] then return 0 end
local by = now() + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'qkey', KEYS[2], 'claim_by', fmt(by))
redis.call('SET', KEYS[1] .. ':payload', ARGV[3], 'EX', math.max(redis.call('TTL', KEYS[1]), 1))
redis.call('HINCRBY', KEYS[1], 'requeued', 1)
redis.call('ZADD', KEYS[3], by, ARGV[1])
redis.call('LPUSH', KEYS[2], ARGV[3])
return 1
"""

# KEYS: call, pending   ARGV: cid, run_id, claim_seconds
# A live worker holds this call's message but has not started it yet (prefetched while its
# threads are busy): move the claim deadline on so the sweep leaves it alone.
TOUCH_RESERVED = r"""
local r = redis.call('HMGET', KEYS[1], 'status', 'run_id')
if r[1] ~= 'queued' or r[2] ~= ARGV[2] then return 0 end
local by = now() + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'claim_by', fmt(by))
redis.call('ZADD', KEYS[2], by, ARGV[1])
return 1
"""
