-- sweep_unclaimed.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, pending   ARGV: cid, claim_seconds
-- A queued call past its claim deadline: 'waiting' (its message is still in the queue: push
-- the deadline on), 'taken' (a worker took the message and died before claiming it, or kombu
-- lost it between its read and its unacked bookkeeping) with the stored message and how often
-- that happened already, or 'gone' (no longer queued). The deadline moves on in every case, so
-- concurrent sweeps act on a call once.
-- A long queue keeps calls waiting past their deadline, and then a sweep falls behind them: a
-- live worker pops such a call and claims it a moment later (or, prefetched, has its deadline
-- moved on by its lease keeper within a sixth of a lease), and a sweep in between would copy
-- it. So a missing call that this sweep saw waiting ('waited' 1), or that no sweep looked at
-- within a claim deadline of its deadline (sweeps come every half claim deadline: they were
-- behind), is 'left': half a claim deadline more, once ('waited' 0), then 'taken' if still
-- unclaimed (its worker died holding it). A call the sweeps kept up with is 'taken' at once,
-- as before.
-- Still in its queue, without scanning it: the record keeps the list (``qkey``) and the call's
-- place among the pushes onto it (``qpos``, from PUSHED). Workers pop the oldest first (LPUSH,
-- BRPOP), so the LLEN items left are the newest pushes: the call waits while its place is
-- among the last LLEN of PUSHED. A push that was not counted (a hand-back, a rerun or a
-- background command: kombu's own publish) only lengthens the list, so the check can call a
-- taken call waiting a while longer (until those items are popped), never a waiting one taken.
-- A place above PUSHED (the counter was reset) reads as missing: a copy is wasted, none lost.
-- Replies (toolhub.distributed.script_replies.SweepReply):
--   GONE = 'gone'
--   EARLY = 'early'
--   WAITING = 'waiting'
--   TAKEN = 'taken'
--   LEFT = 'left'
local status, claim_by, qkey, qpos, message, requeued, waited = unpack(redis.call('HMGET',
    KEYS[1], 'status', 'claim_by', 'qkey', 'qpos', 'message', 'requeued', 'waited'))
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
local place = tonumber(qpos or '')
local pushed = place and qkey and tonumber(redis.call('HGET', PUSHED, qkey) or '0')
if pushed and place <= pushed and place > pushed - redis.call('LLEN', qkey) then
  if waited ~= '1' then redis.call('HSET', KEYS[1], 'waited', '1') end
  return {'waiting'}
end
local grace = tonumber(ARGV[2]) / 2
local behind = t - tonumber(claim_by or '0') > tonumber(ARGV[2])
if waited ~= '0' and (waited == '1' or behind) then
  redis.call('HSET', KEYS[1], 'waited', '0', 'claim_by', fmt(t + grace))
  redis.call('ZADD', KEYS[2], t + grace, ARGV[1])
  return {'left'}
end
return {'taken', message or '', tonumber(requeued) or 0}
