-- sweep_unclaimed.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, pending   ARGV: cid, claim_seconds
-- A queued call past its claim deadline: 'waiting' (its message is still in the queue: push
-- the deadline on), 'taken' (a worker took the message and died before claiming it, or kombu
-- lost it between its read and its unacked bookkeeping) with the stored message and how often
-- that happened already, or 'gone' (no longer queued). The deadline moves on in every case, so
-- concurrent sweeps act on a call once.
-- A long queue keeps calls waiting past their deadline; such a call is then popped by a live
-- worker and claimed a moment later, and a sweep between the two would copy it. So a call this
-- sweep saw waiting ('waited') that has left its queue since is 'left': one more deadline for
-- its claim, then 'taken' if still unclaimed (a worker took it and died). A call never seen
-- waiting is 'taken' at once, as before. The scan starts at the tail, the end workers pop: a
-- call past its deadline in a long queue is among the oldest, near it (issue 43).
-- Replies (toolhub.distributed.script_replies.SweepReply):
--   GONE = 'gone'
--   EARLY = 'early'
--   WAITING = 'waiting'
--   TAKEN = 'taken'
--   LEFT = 'left'
local status, claim_by, qkey, message, requeued, waited = unpack(redis.call('HMGET', KEYS[1],
    'status', 'claim_by', 'qkey', 'message', 'requeued', 'waited'))
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
if payload and qkey and redis.call('LPOS', qkey, payload, 'RANK', -1) then
  if waited ~= '1' then redis.call('HSET', KEYS[1], 'waited', '1') end
  return {'waiting'}
end
if waited == '1' then
  redis.call('HSET', KEYS[1], 'waited', '0')
  return {'left'}
end
return {'taken', message or '', tonumber(requeued) or 0}
