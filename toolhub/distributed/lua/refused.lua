-- refused.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, events, channel, leases, state   ARGV: cid, payload, result, ttl, run_id, lapsed
-- A queued call whose message a worker refused to run (malformed, or not signed with the fleet
-- key): failed, so its caller does not wait for a run that will never come. Only while the
-- record is still queued under that message's run id: a stray or forged copy never fails a
-- call it does not belong to, nor one already running. Two refusals also answer a running
-- record of that run: a replay (the run's done marker exists: the record was reset after it
-- finished) and, with ``lapsed`` '1', a genuine message too old to run (``expired``) of a call
-- whose lease lapsed (no copy of its message can ever run again; a live lease is left alone).
-- Replies (toolhub.distributed.script_replies.RefusedReply):
--   NOT_ANSWERED = 0  -- no call of this run to answer; else the terminal's seq
local r = redis.call('HMGET', KEYS[1], 'status', 'run_id', 'lease_until')
if r[2] ~= ARGV[5] then return 0 end
local t = now()
if r[1] == 'running' then
  local done = redis.call('EXISTS', KEYS[1] .. ':done:' .. ARGV[5]) == 1
  if not done and not (ARGV[6] == '1' and (tonumber(r[3]) or 0) <= t) then return 0 end
  close_attempt(KEYS[1], 'refused', t)
elseif r[1] ~= 'queued' then
  return 0
end
return finalize(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], ARGV[1], 'failed', ARGV[2],
                ARGV[3], ARGV[4], t)
