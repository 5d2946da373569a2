-- remember_remote_task.lua: standalone, no prelude (toolhub/distributed/remote_tasks.py).
-- KEYS: call, remote   ARGV: attempt, record
-- 1: recorded; 0: this attempt no longer owns the call (or its lease ran out).
-- Replies (toolhub.distributed.script_replies.RememberReply):
--   NOT_OWNER = 0  -- this attempt no longer owns the call, or its lease ran out
--   RECORDED = 1  -- recorded
local r = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'lease_until')
if r[1] ~= 'running' or r[2] ~= ARGV[1] then return 0 end
local t = redis.call('TIME')
if tonumber(r[3] or '0') <= tonumber(t[1]) + tonumber(t[2]) / 1000000 then return 0 end
local ttl = redis.call('PTTL', KEYS[1])
if ttl <= 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PX', ttl)
return 1
