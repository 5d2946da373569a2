-- renew_many.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- Renews the leases of many calls in one command (one reply, however many calls).
-- KEYS: leases, call_1 .. call_n
-- ARGV: lease_seconds, cid_1, attempt_1 .. cid_n, attempt_n
-- Returns per call 0 (lease lost), 1 (renewed), 2 (renewed, and a cancel was requested: the
-- backstop for a control message the worker missed while its pub/sub connection was down) or
-- 3 (the call ended as this attempt's own terminal, or a cancel, wrote it: nothing to stop).
-- A renewal must land when Redis is full (maxmemory, noeviction): it only rewrites a field and
-- a score that exist, so it adds no memory, but Redis refuses a script's deny-oom command
-- (HSET, ZADD) under OOM while the script has not written yet. So the script's first write
-- is a ZREM of a member the index never holds (not deny-oom, a no-op); from then on Redis lets
-- the renewal through rather than stop a script half done. A lease lost to a full Redis would
-- be a healthy call re-run (tests/distributed/test_lease_oom.py).
-- Replies (toolhub.distributed.script_replies.RenewReply):
--   LOST = 0  -- lease lost
--   RENEWED = 1  -- renewed
--   CANCEL_REQUESTED = 2  -- renewed, and a cancel was requested
--   ENDED = 3  -- the call ended by this attempt's own terminal (or a cancel)
redis.call('ZREM', KEYS[1], '')
local lease_until = now() + tonumber(ARGV[1])
local stamp = fmt(lease_until)
local ended = {succeeded = true, failed = true, cancelled = true}
local codes = {}
for i = 2, #KEYS do
  local r = redis.call('HMGET', KEYS[i], 'status', 'attempt', 'cancel_requested')
  if r[2] ~= ARGV[2 * i - 1] then
    codes[i - 1] = 0
  elseif r[1] ~= 'running' then
    -- Ended under this attempt: by its own terminal (outcome = the status) or not (a sweep
    -- failed it as lost, a refusal): only the first needs no stopping.
    local raw = redis.call('HGET', KEYS[i], 'attempts')
    local list = raw and cjson.decode(raw) or {}
    local last = list[#list]
    local own = last and ended[last['outcome']] and tostring(last['attempt']) == r[2]
    codes[i - 1] = own and 3 or 0
  else
    redis.call('HSET', KEYS[i], 'lease_until', stamp)
    redis.call('ZADD', KEYS[1], lease_until, ARGV[2 * i - 2])
    codes[i - 1] = r[3] == '1' and 2 or 1
  end
end
return codes
