-- create_and_enqueue.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: call, events, queue, pending, session, config, state, tasks, channel, fair, sunk queue,
-- over queue
-- ARGV: run_id, active_ttl, message, claim_seconds, cid, session_ttl, the 8 quota arguments
-- (quota.lua), field, value, ...
-- CREATE, then LPUSH the Celery message kombu built (``enqueue.py``) onto its queue: one round
-- trip, and the message is queued if and only if the record was created. Idempotent for a
-- retried dispatch (same run_id): the first run already queued the message, and a worker may
-- have claimed or even finished it since (a turn's first writes run while the dispatcher is
-- still preparing the rest, ``dispatch_batch.py``), so a record with this run id, in any
-- status, answers 1. The record names the list its message went to (``qkey``) and its place
-- in that list's pushes (``qpos``: PUSHED counts every push of toolhub's scripts per list),
-- until the claim, so the sweep can tell a call still waiting in its queue from one a dead
-- worker took without scanning the list (``sweep_unclaimed.lua``). The session's keys get their
-- TTL refreshed here, by use, at no extra round trip; 2 means the session's config expired,
-- 3 that the id is another session's call (as in CREATE). 4 is 1 with the call's channel
-- already subscribed when the message was queued (``PUBSUB NUMSUB``): the dispatcher's own
-- subscription, sent just before, was active before any worker could publish, so it need not
-- wait for Redis's confirmation nor read the stream first.
-- Replies (toolhub.distributed.script_replies.CreateAndEnqueueReply):
--   IN_USE = 0  -- the id is a live call's
--   CREATED = 1  -- created and queued
--   SESSION_EXPIRED = 2  -- the session's config expired
--   OTHER_SESSION = 3  -- the id is another session's call
--   CREATED_SUBSCRIBED = 4  -- created and queued, its channel already subscribed
--   RATE_LIMITED = 5  -- over a quota of its tenant: {5, quota, limit, retry_after}, nothing written
local st, run, owner = unpack(redis.call('HMGET', KEYS[1], 'status', 'run_id', 'session_id'))
if owner and owner ~= field_of(15, 'session_id') then return 3 end
if st and run == ARGV[1] then return 1 end
if st == 'queued' or st == 'running' then return 0 end
-- The session's keys live SESSION_TTL (ARGV[6]) past their last use: refreshed here when less
-- than that, less a hundredth of it (at most a minute), is left, so a session's busy stretch
-- refreshes them about once a minute rather than with four commands a call.
local left, session_ttl = redis.call('TTL', KEYS[6]), tonumber(ARGV[6])
if left == -2 then return 2 end
if left < session_ttl - math.min(60, session_ttl / 100) then
  for _, key in ipairs({KEYS[6], KEYS[5], KEYS[7], KEYS[8]}) do
    redis.call('EXPIRE', key, ARGV[6])
  end
end
local t = now()
local refused = quota_admit(7, ARGV[5], t)
if refused then return quota_refusal(5, refused) end
redis.call('DEL', KEYS[1], KEYS[2], KEYS[1] .. ':remote')
-- Fair dispatch (toolhub/distributed/fair.py): KEYS[10] indexes the tenant's calls queued and
-- not yet claimed (call id -> when the entry lapses; claim.lua removes it, named by the record's
-- 'fair'). At FAIR_SHARE or more (lapsed entries trimmed first) the message goes to its queue's
-- sunk list (KEYS[11]), which workers pop only when no level-0 message waits, with kombu's
-- priority property rewritten to match. FAIR_SHARE 0: no bookkeeping (the claim's ZREM finds
-- nothing), one FIFO. Past BACKLOG_WINDOW messages in the sunk list, or while its backlog is not
-- empty (one FIFO: nothing overtakes it), only the call id is pushed, onto the queue's backlog:
-- no message, no claim deadline (no worker can take it); the record, which keeps the message,
-- names the backlog in 'qkey' until a worker of the queue promotes it (promote.lua).
-- Between FAIR_SHARE and FAIR_BURST queued calls the message goes to the over list (KEYS[12]),
-- popped after every level-0 list and before any sunk one: a tenant whose few calls piled up
-- while the workers were slow waits behind the level-0 calls, not behind a burst's thousands.
local queue, payload = KEYS[3], ARGV[3]
if FAIR_SHARE > 0 then
  local fair = KEYS[10]
  if redis.call('ZCARD', fair) >= FAIR_SHARE then
    redis.call('ZREMRANGEBYSCORE', fair, '-inf', t)
    local queued = redis.call('ZCARD', fair)
    if queued >= FAIR_SHARE then
      local low = sunk(payload, queued < FAIR_BURST and OVER_FIELD or SUNK_FIELD)
      local backlog = BACKLOG .. KEYS[3]
      if low and queued < FAIR_BURST then
        queue, payload = KEYS[12], low
      elseif low and BACKLOG_WINDOW > 0 and (redis.call('LLEN', backlog) > 0
          or redis.call('LLEN', KEYS[11]) >= BACKLOG_WINDOW) then
        queue, payload = backlog, false
      elseif low then
        queue, payload = KEYS[11], low
      end
    end
  end
  redis.call('ZADD', fair, t + tonumber(ARGV[2]), ARGV[5])
  redis.call('EXPIRE', fair, ARGV[2])
end
local fields = {'status', 'queued', 'run_id', ARGV[1], 'seq', 0, 'attempt', 0, 'lost', 0,
                'created_at', fmt(t), 'qkey', queue, 'fair', KEYS[10]}
if payload then
  local by, n = t + tonumber(ARGV[4]), #fields
  fields[n + 1], fields[n + 2] = 'claim_by', fmt(by)
  fields[n + 3], fields[n + 4] = 'qpos', redis.call('HINCRBY', PUSHED, queue, 1)
  redis.call('ZADD', KEYS[4], by, ARGV[5])
end
for i = 15, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('LPUSH', queue, payload or ARGV[5])
if redis.call('PUBSUB', 'NUMSUB', KEYS[9])[2] > 0 then return 4 end
return 1
