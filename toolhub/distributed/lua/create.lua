-- create.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, events, pending
-- ARGV: run_id, active_ttl, claim_seconds, cid, the 8 quota arguments (quota.lua), field,
-- value, ...
-- 1: created; 0: the id is a live call's; 3: the id is another session's call (kept until its
-- record expires: a call id never moves between sessions, so another session cannot replace
-- a finished call's record and events by reusing its id).
-- A queued record carries a claim deadline (``claim_by``, indexed in ``pending``): a message
-- taken off the queue by a worker that died before its claim is found by the sweep
-- (``SWEEP_UNCLAIMED``) instead of waiting for kombu's hours-long visibility timeout.
-- Replies (toolhub.distributed.script_replies.CreateReply):
--   IN_USE = 0  -- the id is a live call's
--   CREATED = 1  -- created
--   OTHER_SESSION = 3  -- the id is another session's call
--   RATE_LIMITED = 5  -- over a quota of its tenant: {5, quota, limit, retry_after}, nothing written
local st, owner = unpack(redis.call('HMGET', KEYS[1], 'status', 'session_id'))
if owner and owner ~= field_of(13, 'session_id') then return 3 end
if st == 'queued' or st == 'running' then return 0 end
local refused = quota_admit(5, ARGV[4], now())
if refused then return quota_refusal(5, refused) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[1] .. ':remote')
local by = now() + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'status', 'queued', 'run_id', ARGV[1], 'seq', 0, 'attempt', 0,
           'lost', 0, 'created_at', fmt(now()), 'claim_by', fmt(by), unpack(ARGV, 13))
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[3], by, ARGV[4])
return 1
