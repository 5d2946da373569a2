-- reenqueue.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, queue, pending   ARGV: cid, run_id, payload, claim_seconds
-- Push a fresh message for a taken-but-unclaimed call (same run id, so exactly one of the
-- messages can ever claim it) and count it; its place in the queue's pushes (``qpos``) is
-- what the sweep checks next (``sweep_unclaimed.lua``).
-- Replies (toolhub.distributed.script_replies.ReenqueueReply):
--   NOT_QUEUED = 0  -- no longer queued under this run
--   QUEUED = 1  -- a fresh message was pushed
local r = redis.call('HMGET', KEYS[1], 'status', 'run_id')
if r[1] ~= 'queued' or r[2] ~= ARGV[2] then return 0 end
local by = now() + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], 'qkey', KEYS[2], 'qpos', redis.call('HINCRBY', PUSHED, KEYS[2], 1),
           'claim_by', fmt(by))
redis.call('HINCRBY', KEYS[1], 'requeued', 1)
redis.call('HDEL', KEYS[1], 'waited')
redis.call('ZADD', KEYS[3], by, ARGV[1])
redis.call('LPUSH', KEYS[2], ARGV[3])
return 1
