-- fail_lost.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, events, channel, leases, state   ARGV: cid, payload, result, ttl
-- A running call whose worker is gone and whose policy is not to re-run it: the lost attempt
-- is closed and the call fails with ``worker_lost`` (the command may have partly run).
-- Replies (toolhub.distributed.script_replies.FailLostReply):
--   NOT_LOST = 0  -- not running with a lapsed lease; else the terminal's seq
local r = redis.call('HMGET', KEYS[1], 'status', 'lease_until')
if r[1] ~= 'running' then return 0 end
local t = now()
if tonumber(r[2]) > t then return 0 end
close_attempt(KEYS[1], 'worker_lost', t)
redis.call('HINCRBY', KEYS[1], 'lost', 1)
return finalize(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], 'failed', ARGV[2],
                ARGV[3], ARGV[4], t)
