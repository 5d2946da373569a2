-- await_approval.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, events, the session's approvals (zset), every session's (zset)
-- ARGV: cid, ttl, expires_at, field, value, ...
-- A call a permission rule sends to a person: its record, `awaiting_approval`, with what will
-- run (the fields: session, tool, name, queue, the canonical arguments, the rule, the expiry),
-- and nothing queued; the session's index of waiting calls (call id -> expiry) lists it, and
-- every session's, which the workers' sweep reads to end the expired ones. The
-- same id rules as CREATE: a finished record of the same session is replaced.
-- Replies (toolhub.distributed.script_replies.AwaitApprovalReply):
--   IN_USE = 0  -- the id is a live call's (or one already awaiting)
--   AWAITING = 1  -- recorded, awaiting approval
--   OTHER_SESSION = 3  -- the id is another session's call
local st, owner = unpack(redis.call('HMGET', KEYS[1], 'status', 'session_id'))
if owner and owner ~= field_of(4, 'session_id') then return 3 end
if st == 'queued' or st == 'running' or st == 'awaiting_approval' then return 0 end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[1] .. ':remote')
redis.call('HSET', KEYS[1], 'status', 'awaiting_approval', 'seq', 0, 'attempt', 0, 'lost', 0,
           'created_at', fmt(now()), unpack(ARGV, 4))
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[1])
redis.call('EXPIRE', KEYS[3], ARGV[2])
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[1])
return 1
