-- decide_approval.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, events, channel, leases, state, the session's approvals, every session's
-- ARGV: cid, status, payload, result, ttl, approval, due
-- Ends a call awaiting approval without running it: denied, expired or cancelled, with its
-- terminal event (every follower, on any dispatcher, gets the answer) and `approval` (the
-- decisions, this one last) in its record. `due` = 1 (an expiry): only once Redis's clock
-- has passed the approval's expiry.
-- Replies (toolhub.distributed.script_replies.DecideApprovalReply):
--   NOT_DUE = -1  -- an expiry asked for before the approval expired
--   NOT_AWAITING = 0  -- the call does not await approval; else the terminal's seq
local st, expires = unpack(redis.call('HMGET', KEYS[1], 'status', 'approval_expires'))
if st ~= 'awaiting_approval' then
  redis.call('ZREM', KEYS[7], ARGV[1])
  return 0
end
local t = now()
if ARGV[7] == '1' and expires and tonumber(expires) > t then return -1 end
redis.call('ZREM', KEYS[6], ARGV[1])
redis.call('ZREM', KEYS[7], ARGV[1])
redis.call('HSET', KEYS[1], 'approval', ARGV[6])
return finalize(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], ARGV[2], ARGV[3], ARGV[4],
                ARGV[5], t)
