-- claim.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, events, channel, leases, state
-- ARGV: cid, run_id, worker, lease_seconds, ttl, lost_payload, lost_result,
--       cancelled_payload, cancelled_result
-- The four terminals may be empty: a claim that would write one (its worker lost too often, a
-- cancel requested) then returns {'terminal', attempt} before changing anything, and the worker
-- claims again with them. Almost no claim needs one, and building and sending them cost every
-- claim (``CallRecords.claim``).
-- 'replayed': the run finished already and its record was reset since (the module docstring).
-- Returns {action, attempt} and, for 'run', the session state (saves the worker a round trip),
-- how many attempts were lost before this one, and 1 when this attempt takes up the remote
-- task an earlier one recorded (``remote_tasks.py``; counted in ``resumed``). A call whose
-- policy on worker loss is ``fail`` (``on_lost``) is never re-run here: 'lost_fail' tells the
-- worker to fail it (``FAIL_LOST``), a cold path that keeps the failure text off every claim;
-- one that left a remote task is resumed, whatever its policy.
-- Replies (toolhub.distributed.script_replies.ClaimAction):
--   GONE = 'gone'
--   STALE = 'stale'
--   FINISHED = 'finished'
--   REPLAYED = 'replayed'
--   DUPLICATE = 'duplicate'
--   TERMINAL = 'terminal'
--   LOST_FAIL = 'lost_fail'
--   EXHAUSTED = 'exhausted'
--   CANCELLED = 'cancelled'
--   RUN = 'run'
local call, events, channel, leases, state = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local cid = ARGV[1]
local r = redis.call('HMGET', call, 'status', 'run_id', 'attempt', 'lease_until',
                     'cancel_requested', 'handoff', 'max_attempts', 'on_lost', 'lost', 'fair')
if not r[1] then return {'gone', 0} end
if r[2] ~= ARGV[2] then return {'stale', 0} end
-- Its message left the queue: no longer one of its tenant's waiting calls (fair dispatch).
if r[10] then redis.call('ZREM', r[10], cid) end
local status = r[1]
local attempt = tonumber(r[3]) or 0
if status ~= 'queued' and status ~= 'running' then return {'finished', attempt} end
if redis.call('EXISTS', call .. ':done:' .. ARGV[2]) == 1 then return {'replayed', attempt} end
local t = now()
if status == 'running' and tonumber(r[4]) > t then return {'duplicate', attempt} end
local resumed = 0
local bare = ARGV[6] == ''
local lost = tonumber(r[9]) or 0
if status == 'running' then
  resumed = redis.call('EXISTS', call .. ':remote')
  if r[6] == '1' then
    if bare and r[5] == '1' then return {'terminal', attempt} end
    close_attempt(call, 'handed_back', t)
  elseif r[8] == 'fail' and r[5] ~= '1' and resumed == 0 then
    return {'lost_fail', attempt}
  else
    if bare and (r[5] == '1' or lost + 1 >= (tonumber(r[7]) or 3)) then
      return {'terminal', attempt}
    end
    close_attempt(call, 'worker_lost', t)
    lost = redis.call('HINCRBY', call, 'lost', 1)
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
local lease_until, started = t + tonumber(ARGV[4]), fmt(t)
-- A record starts at attempt 0 with no attempts listed: the first attempt's start is the
-- call's, written with the rest (one write); a later one appends to the list.
local list = {}
if attempt > 1 then
  local raw = redis.call('HGET', call, 'attempts')
  list = raw and cjson.decode(raw) or {}
end
list[#list + 1] = {attempt = attempt, worker = ARGV[3], started_at = started}
local fields = {'status', 'running', 'attempt', attempt, 'worker', ARGV[3],
                'lease_until', fmt(lease_until), 'handoff', '0', 'attempts', cjson.encode(list)}
if attempt == 1 then fields[13], fields[14] = 'started_at', started end
redis.call('HSET', call, unpack(fields))
if attempt > 1 then redis.call('HSETNX', call, 'started_at', started) end
redis.call('ZADD', leases, lease_until, cid)
redis.call('ZREM', leases .. ':pending', cid)
redis.call('HDEL', call, 'qkey', 'qpos', 'claim_by', 'fair', 'waited')
if resumed == 1 then redis.call('HINCRBY', call, 'resumed', 1) end
return {'run', attempt, redis.call('HGETALL', state), lost, resumed}
