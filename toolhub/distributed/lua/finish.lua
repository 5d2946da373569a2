-- finish.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, events, channel, leases, state[, usage]
-- ARGV: cid, attempt, status, payload, result, ttl, outcome[, usage ttl, tool, cpu, wall, peak,
-- output]: with the usage key, the call's figures (``record_usage``)
-- Replies (toolhub.distributed.script_replies.FinishReply):
--   STALE = -1  -- this attempt no longer owns the call; else the terminal's seq
-- The record's fields finalize needs are read here with the check, in one command.
local r = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'attempts', 'seq', 'run_id', 'queue',
                     'quota_held')
if r[1] ~= 'running' or r[2] ~= ARGV[2] then return -1 end
local t = now()
local read = {seq = r[4], run = r[5], queue = r[6], held = r[7]}
if KEYS[6] then read.usage = usage_field(8) end
local seq = finalize(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[3], ARGV[4],
                     ARGV[5], ARGV[6], t, closed_attempts(KEYS[1], ARGV[7], t, r[3]), read)
if KEYS[6] then record_usage(KEYS[6], ARGV[3], 8) end
return seq
