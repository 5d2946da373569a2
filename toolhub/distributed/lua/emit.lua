-- emit.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, events, channel   ARGV: attempt, payload, ...
-- Replies (toolhub.distributed.script_replies.EmitReply):
--   STALE = -1  -- this attempt no longer owns the call; else the last seq
local r = redis.call('HMGET', KEYS[1], 'status', 'attempt')
if r[1] ~= 'running' or r[2] ~= ARGV[1] then return -1 end
local seq = 0
for i = 2, #ARGV do seq = emit(KEYS[1], KEYS[2], KEYS[3], ARGV[i], nil) end
return seq
