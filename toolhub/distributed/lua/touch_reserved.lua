-- touch_reserved.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, pending   ARGV: cid, run_id, claim_seconds
-- A live worker holds this call's message but has not started it yet (prefetched while its
-- threads are busy): move the claim deadline on so the sweep leaves it alone.
-- Replies (toolhub.distributed.script_replies.TouchReply):
--   NOT_QUEUED = 0  -- no longer queued under this run
--   TOUCHED = 1  -- the claim deadline moved on
local r = redis.call('HMGET', KEYS[1], 'status', 'run_id')
if r[1] ~= 'queued' or r[2] ~= ARGV[2] then return 0 end
local by = now() + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'claim_by', fmt(by))
redis.call('ZADD', KEYS[2], by, ARGV[1])
return 1
