-- quota.lua: a tenant's quotas, checked where a call is created (toolhub/distributed/quota.py);
-- loaded before prelude.lua (``scripts.py``), so ``finalize`` can release what a call held.
-- quota_admit(at, cid, t) reads the 8 arguments ARGV[at] .. ARGV[at + 7]:
--   base (``{prefix}quota:{tenant}:``; '' = no quotas), set ('calls' or 'tasks': which
--   count of calls in flight this one joins; '' = none), its limit (0 = none), how long the
--   entry may stay at most (the call's deadline, seconds), rate per second (0 = none), burst,
--   command CPU-seconds per hour (0 = none), usage base (``{prefix}usage:{tenant}:``).
-- It answers nil when the call may go on (its token taken, its entry added), else
-- {quota, limit, retry_after} with nothing written but the pruning of expired entries.
-- Order: the counts first, the token last, so a refusal never costs a token.
local QUOTA_BUSY_RETRY = 1
local function quota_fmt(x) return string.format('%.6f', x) end
local function quota_admit(at, cid, t)
  local base = ARGV[at]
  if base == '' then return nil end
  local set, limit, hold = ARGV[at + 1], tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
  local rate, burst, cpu = tonumber(ARGV[at + 4]), tonumber(ARGV[at + 5]), tonumber(ARGV[at + 6])
  local held = base .. set
  if limit > 0 then
    -- An entry past its call's deadline is a call nobody finished (its whole fleet died).
    redis.call('ZREMRANGEBYSCORE', held, '-inf', t)
    if redis.call('ZCARD', held) >= limit then
      local name = set == 'tasks' and 'concurrent_background_tasks' or 'concurrent_calls'
      return {name, limit, QUOTA_BUSY_RETRY}
    end
  end
  if cpu > 0 then
    -- Sliding hour: this hour's CPU-seconds, and the previous hour's weighted by the part of
    -- it still inside the window.
    local hour = math.floor(t / 3600)
    local into = t - hour * 3600
    local usage = ARGV[at + 7]
    local now_used = tonumber(redis.call('HGET', usage .. hour, 'cpu_seconds')) or 0
    local before = tonumber(redis.call('HGET', usage .. (hour - 1), 'cpu_seconds')) or 0
    local over = now_used + before * (1 - into / 3600) - cpu
    if over >= 0 then
      local wait
      if before > 0 and over < before * (1 - into / 3600) then
        wait = over * 3600 / before  -- the previous hour slides out fast enough
      else
        wait = (3600 - into) + 3600 * math.max(1 - cpu / now_used, 0)
      end
      return {'cpu_seconds_per_hour', cpu, math.max(wait, 0.001)}
    end
  end
  local tokens
  if rate > 0 then
    local bucket = redis.call('HMGET', base .. 'rate', 'tokens', 'at')
    tokens = burst
    if bucket[1] then
      tokens = math.min(burst, tonumber(bucket[1]) + math.max(t - tonumber(bucket[2]), 0) * rate)
    end
    if tokens < 1 then return {'calls_per_second', rate, (1 - tokens) / rate} end
    redis.call('HSET', base .. 'rate', 'tokens', quota_fmt(tokens - 1), 'at', quota_fmt(t))
    redis.call('PEXPIRE', base .. 'rate', math.ceil(burst / rate * 1000) + 1000)
  end
  if limit > 0 then
    redis.call('ZADD', held, t + hold, cid)
    if redis.call('TTL', held) < hold then redis.call('EXPIRE', held, math.ceil(hold)) end
  end
  return nil
end
-- A refusal as a script reply: Lua numbers would reach the client as integers.
local function quota_refusal(code, refused)
  return {code, refused[1], quota_fmt(refused[2]), quota_fmt(refused[3])}
end
