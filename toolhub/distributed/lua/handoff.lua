-- handoff.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, leases   ARGV: cid, attempt
local r = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'message')
if r[1] ~= 'running' or r[2] ~= ARGV[2] then return false end
redis.call('HSET', KEYS[1], 'lease_until', '0', 'handoff', '1')
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return r[3]
