-- answer.lua: standalone, no prelude (toolhub/answers/redis.py).
-- KEYS: questions hash, answer list   ARGV: cid, payload, ttl
-- Replies (toolhub.distributed.script_replies.AnswerReply):
--   NOT_ASKED = 0  -- no such open question, or it was answered already
--   ANSWERED = 1  -- the answer was queued for the call
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
if redis.call('LLEN', KEYS[2]) > 0 then return 0 end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[3])
return 1
