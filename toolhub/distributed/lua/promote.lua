-- promote.lua: runs after prelude.lua (toolhub/distributed/scripts.py).
-- KEYS: backlog, sunk queue, pending, call, call, ...
-- ARGV: claim_seconds, then per call: cid, run_id, payload (one per call key, oldest first)
-- Move the oldest ids of a queue's backlog into its sunk list (fair.py, backlog.py): each call
-- as the message a worker built from its record's (kombu's level-0 message, rewritten here to
-- the sunk level), with its claim deadline and its place in the list's pushes, as the
-- create-and-enqueue script would have queued it. The id leaves the backlog and the message
-- enters the list in this one step, so no call is lost between the two. An id is promoted only
-- while it is the backlog's oldest (a concurrent promoter took it otherwise: this one stops)
-- and its record still waits in this backlog under that run ('qkey', 'run_id'); an id whose
-- call ended meanwhile (cancelled, its record expired or reused) just leaves the backlog, as
-- does one given an empty payload (the promoter found it so).
-- Returns the number of ids taken off the backlog (promoted or dropped).
local by = now() + tonumber(ARGV[1])
local taken = 0
for i = 4, #KEYS do
  local at = 2 + (i - 4) * 3
  local cid, run, payload = ARGV[at], ARGV[at + 1], ARGV[at + 2]
  if redis.call('LINDEX', KEYS[1], -1) ~= cid then break end
  redis.call('RPOP', KEYS[1])
  taken = taken + 1
  local status, qkey, current = unpack(redis.call('HMGET', KEYS[i], 'status', 'qkey', 'run_id'))
  local message = payload ~= '' and sunk(payload)
  if message and status == 'queued' and qkey == KEYS[1] and current == run then
    redis.call('HSET', KEYS[i], 'qkey', KEYS[2], 'qpos', redis.call('HINCRBY', PUSHED, KEYS[2], 1),
               'claim_by', fmt(by))
    redis.call('ZADD', KEYS[3], by, cid)
    redis.call('LPUSH', KEYS[2], message)
  end
end
return taken
