-- sweep_unclaimed.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, pending   ARGV: cid, claim_seconds
-- A queued call past its claim deadline: 'waiting' (its message is still in the queue: push
-- the deadline on), 'taken' (a worker took the message and died before claiming it, or kombu
-- lost it between its read and its unacked bookkeeping) with the stored message and how often
-- that happened already, or 'gone' (no longer queued). The deadline moves on in every case, so
-- concurrent sweeps act on a call once.
-- Replies (toolhub.distributed.script_replies.SweepReply):
--   GONE = 'gone'
--   EARLY = 'early'
--   WAITING = 'waiting'
--   TAKEN = 'taken'
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
