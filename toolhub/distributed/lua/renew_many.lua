-- renew_many.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- Renews the leases of many calls in one command (one reply, however many calls).
-- KEYS: leases, call_1 .. call_n
-- ARGV: lease_seconds, cid_1, attempt_1 .. cid_n, attempt_n
-- Returns per call 0 (lease lost), 1 (renewed) or 2 (renewed, and a cancel was requested: the
-- backstop for a control message the worker missed while its pub/sub connection was down).
-- Replies (toolhub.distributed.script_replies.RenewReply):
--   LOST = 0  -- lease lost
--   RENEWED = 1  -- renewed
--   CANCEL_REQUESTED = 2  -- renewed, and a cancel was requested
local lease_until = now() + tonumber(ARGV[1])
local stamp = fmt(lease_until)
local codes = {}
for i = 2, #KEYS do
  local r = redis.call('HMGET', KEYS[i], 'status', 'attempt', 'cancel_requested')
  if r[1] ~= 'running' or r[2] ~= ARGV[2 * i - 1] then
    codes[i - 1] = 0
  else
    redis.call('HSET', KEYS[i], 'lease_until', stamp)
    redis.call('ZADD', KEYS[1], lease_until, ARGV[2 * i - 2])
    codes[i - 1] = r[3] == '1' and 2 or 1
  end
end
return codes
