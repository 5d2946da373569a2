-- emit.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, events, channel, session streams (zset), session stream bytes (hash)
-- ARGV: attempt, call cap, session cap, ttl, payload, ...
-- Replies (toolhub.distributed.script_replies.EmitReply):
--   STALE = -1  -- this attempt no longer owns the call; else the last seq
-- Bounded (docs/distributed.md, "Bytes kept per call and per session"): a call's stream holds
-- at most ``call cap`` bytes of progress, and the session's streams together ``session cap``.
-- Older progress is deleted from the front of a stream (its newest entry always stays) and
-- counted in the call's ``trimmed``/``trimmed_to``, from which readers make the marker. The
-- session's hash holds each call's bytes (field: the call key) and their ``total``; the zset
-- orders its calls by their first event, so the oldest give up their progress first.
local r = redis.call('HMGET', KEYS[1], 'status', 'attempt')
if r[1] ~= 'running' or r[2] ~= ARGV[1] then return -1 end
local call_cap, session_cap, ttl = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local session_bytes = KEYS[5]
-- Delete the oldest entries of one call's stream until it holds at most ``keep`` bytes of
-- progress (never its newest entry); returns the bytes deleted.
local function trim(call, events, keep)
  local held = tonumber(redis.call('HGET', call, 'sbytes') or '0')
  local freed = 0
  while held - freed > keep do
    local batch = redis.call('XRANGE', events, '-', '+', 'COUNT', 16)
    if #batch <= 1 then break end
    for i = 1, #batch - 1 do
      if held - freed <= keep then break end
      local id, fields = batch[i][1], batch[i][2]
      redis.call('XDEL', events, id)
      freed = freed + #fields[2]
      redis.call('HSET', call, 'trimmed_to', string.sub(id, 3))
    end
  end
  if freed > 0 then
    redis.call('HINCRBY', call, 'sbytes', -freed)
    redis.call('HINCRBY', call, 'trimmed', freed)
    redis.call('HINCRBY', session_bytes, call, -freed)
    redis.call('HINCRBY', session_bytes, 'total', -freed)
  end
  return freed
end
local seq, added = 0, 0
for i = 5, #ARGV do
  seq = emit(KEYS[1], KEYS[2], KEYS[3], ARGV[i], nil)
  added = added + #ARGV[i]
end
redis.call('HINCRBY', KEYS[1], 'sbytes', added)
redis.call('HINCRBY', session_bytes, KEYS[1], added)
local total = redis.call('HINCRBY', session_bytes, 'total', added)
redis.call('ZADD', KEYS[4], 'NX', now(), KEYS[1])
total = total - trim(KEYS[1], KEYS[2], call_cap)
-- Over the session's share: the oldest calls' progress goes first, this call's last.
for _ = 1, 64 do
  if total <= session_cap then break end
  local oldest = redis.call('ZRANGE', KEYS[4], 0, 0)[1]
  if not oldest or oldest == KEYS[1] then
    local held = tonumber(redis.call('HGET', KEYS[1], 'sbytes') or '0')
    trim(KEYS[1], KEYS[2], math.max(0, held - (total - session_cap)))
    break
  end
  trim(oldest, oldest .. ':events', 0)
  -- What is left of it (its newest entry; nothing once it expired) leaves the session's count.
  -- ``0 - left``, not ``-left``: Lua's -0 reaches Redis as "-0", which HINCRBY refuses.
  local left = tonumber(redis.call('HGET', session_bytes, oldest) or '0')
  redis.call('HDEL', session_bytes, oldest)
  total = redis.call('HINCRBY', session_bytes, 'total', 0 - left)
  redis.call('ZREM', KEYS[4], oldest)
end
redis.call('EXPIRE', session_bytes, ttl)
redis.call('EXPIRE', KEYS[4], ttl)
return seq
