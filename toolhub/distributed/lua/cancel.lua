-- cancel.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, events, channel, leases, state, control
-- ARGV: cid, cancelled_payload, cancelled_result, ttl, control_message
-- Replies (toolhub.distributed.script_replies.CancelReply):
--   UNKNOWN = 'unknown'
--   CANCELLED = 'cancelled'
--   SIGNALLED = 'signalled'
--   FINISHED = 'finished'
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
