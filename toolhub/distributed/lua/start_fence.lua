-- start_fence.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- Who starts attempt N of a background command, decided once: the host's holder, the worker
-- itself (no holder could be reached), or nobody (the worker gave up on a holder that did not
-- answer: 'withdrawn'). The first to ask for the attempt gets it; everyone after is told who
-- did, so a start request the holder reads late, or twice, never starts a second copy.
-- KEYS: call   ARGV: attempt, runner ('holder', 'worker' or 'withdrawn')
-- Sets `started_in` = '<attempt> <runner>' (kept with the record: where the attempt ran).
-- Replies (toolhub.distributed.script_replies.StartFenceReply): who has the attempt, or
--   LOST = 'lost'  -- the call is not running as this attempt (it moved on, or ended)
--   HOLDER = 'holder'
--   WORKER = 'worker'
--   WITHDRAWN = 'withdrawn'
local r = redis.call('HMGET', KEYS[1], 'status', 'attempt', 'started_in')
if r[1] ~= 'running' or r[2] ~= ARGV[1] then return 'lost' end
local prefix = ARGV[1] .. ' '
if r[3] and string.sub(r[3], 1, #prefix) == prefix then
  return string.sub(r[3], #prefix + 1)
end
redis.call('HSET', KEYS[1], 'started_in', prefix .. ARGV[2])
return ARGV[2]
