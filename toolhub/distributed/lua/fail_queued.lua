-- fail_queued.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, events, channel, leases, state   ARGV: cid, payload, result, ttl
-- A call that will never run while it is still queued: failed, with its terminal event, so
-- every follower (not only the process that found out) gets an answer. Its message never
-- reached the broker (the dispatcher), or it kept being taken by workers that died before
-- claiming it (the sweep, ``recovery.py``).
-- Replies (toolhub.distributed.script_replies.FailQueuedReply):
--   NOT_QUEUED = 0  -- the call is not queued; else the terminal's seq
if redis.call('HGET', KEYS[1], 'status') ~= 'queued' then return 0 end
return finalize(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], 'failed', ARGV[2],
                ARGV[3], ARGV[4], now())
