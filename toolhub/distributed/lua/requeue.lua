-- requeue.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, leases   ARGV: cid, grace_seconds
-- Returns {message, 'rerun'|'resume'|'fail'} for a call whose lease expired ('resume': the lost
-- attempt recorded a remote task, which the next one polls instead of calling the tool, so it
-- is re-enqueued under either policy; 'fail': its policy on worker loss says not to run it
-- again, and the sweeper calls FAIL_LOST).
-- Replies (toolhub.distributed.script_replies.RequeueOutcome):
--   RERUN = 'rerun'
--   RESUME = 'resume'
--   FAIL = 'fail'
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
