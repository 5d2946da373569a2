-- remove_unacked.lua: standalone, no prelude (toolhub/distributed/unacked.py).
-- KEYS: unacked, unacked_index[, call]   ARGV: tag, max_score[, run_id]
-- Removes the entry unless it was refreshed since (younger than max_score, or gone from the
-- index) or its call is queued for this run. Returns 1 when removed.
-- Replies (toolhub.distributed.script_replies.RemoveUnackedReply):
--   KEPT = 0  -- refreshed since, or its call is queued for this run
--   REMOVED = 1  -- removed
local score = redis.call('ZSCORE', KEYS[2], ARGV[1])
if not score or tonumber(score) > tonumber(ARGV[2]) then return 0 end
if KEYS[3] then
  local r = redis.call('HMGET', KEYS[3], 'status', 'run_id')
  if r[1] == 'queued' and r[2] == ARGV[3] then return 0 end
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
