-- prelude.lua: the helpers every call-protocol script runs after (toolhub/distributed/scripts.py):
-- now(), fmt(), field_of(), sunk(), emit(), closed_attempts(), close_attempt(), finalize(),
-- record_usage(). The loader
-- puts the constants DONE_TTL, DONE_TTL_BACKGROUND, BACKGROUND_QUEUE, PUSHED (the hash of how
-- many messages toolhub's scripts pushed onto each queue list: ``Keys.pushed``), BACKLOG (the
-- prefix of a queue's backlog, ``Keys.backlog``) and fair dispatch's (``fair.py``) before it
-- (from Settings), and quota.lua (the tenant's quotas: what a call holds, ``quota_held``, is
-- released here).
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local function fmt(x) return string.format('%.6f', x) end
local function field_of(from, name)
  for i = from, #ARGV - 1, 2 do
    if ARGV[i] == name then return ARGV[i + 1] end
  end
  return false
end
-- A level-0 message kombu built, with its priority property rewritten to another level's
-- (``field``: SUNK_FIELD by default, or OVER_FIELD; fair.py), or false when it has no such
-- property.
local function sunk(payload, field)
  local at = string.find(payload, NORMAL_FIELD, 1, true)
  if not at then return false end
  return string.sub(payload, 1, at - 1) .. (field or SUNK_FIELD)
         .. string.sub(payload, at + #NORMAL_FIELD)
end
local function emit(call, events, channel, payload, version)
  local seq = redis.call('HINCRBY', call, 'seq', 1)
  if version then
    redis.call('XADD', events, '0-' .. seq, 'd', payload, 'v', version)
  else
    redis.call('XADD', events, '0-' .. seq, 'd', payload)
    version = ''
  end
  redis.call('PUBLISH', channel, seq .. '|' .. version .. '|' .. payload)
  return seq
end
-- The record's attempts with the last one closed (its outcome and end), encoded; nil when
-- there is none to close.
local function closed_attempts(call, outcome, t)
  local raw = redis.call('HGET', call, 'attempts')
  if not raw then return nil end
  local list = cjson.decode(raw)
  local last = list[#list]
  if last and not last['outcome'] then
    last['outcome'] = outcome
    last['finished_at'] = fmt(t)
    return cjson.encode(list)
  end
  return nil
end
local function close_attempt(call, outcome, t)
  local closed = closed_attempts(call, outcome, t)
  if closed then redis.call('HSET', call, 'attempts', closed) end
end
-- ``attempts``: the record's attempts to write with the terminal (``closed_attempts``), or nil.
local function finalize(call, events, channel, leases, state, cid, status, payload, result, ttl, t,
                        attempts)
  local version = redis.call('HGET', state, '__v') or '0'
  local seq
  local streamed = redis.call('EXISTS', events) == 1
  if streamed then
    seq = emit(call, events, channel, payload, version)
  else
    -- No progress: no stream. The record's result is the terminal event (``state_v``, ``seq``),
    -- which spares a finished call the ~4.7 KB a one-entry stream costs.
    seq = redis.call('HINCRBY', call, 'seq', 1)
    redis.call('PUBLISH', channel, seq .. '|' .. version .. '|' .. payload)
  end
  local fields = {'status', status, 'finished_at', fmt(t), 'result', result, 'state_v', version}
  if attempts then fields[9], fields[10] = 'attempts', attempts end
  redis.call('HSET', call, unpack(fields))
  local run, queue, held = unpack(redis.call('HMGET', call, 'run_id', 'queue', 'quota_held'))
  if held then redis.call('ZREM', held, cid) end
  if run then
    local keep = queue == BACKGROUND_QUEUE and DONE_TTL_BACKGROUND or DONE_TTL
    redis.call('SET', call .. ':done:' .. run, '1', 'EX', keep)
  end
  redis.call('HDEL', call, 'message', 'qkey', 'qpos', 'claim_by', 'lease_until', 'handoff',
             'fair', 'quota_held', 'waited', 'trace')
  redis.call('ZREM', leases, cid)
  redis.call('ZREM', leases .. ':pending', cid)
  redis.call('EXPIRE', call, ttl)
  if streamed then redis.call('EXPIRE', events, ttl) end
  redis.call('EXPIRE', call .. ':remote', ttl)
  return seq
end
-- A finished call's figures, from ARGV[i]: ttl, tool, cpu, wall, peak, output (usage.py):
-- on the call's record, and added to its tenant's hour (``usage``): the totals, and the tool's.
-- errors, cpu and peak are written only once not zero (absent reads as 0).
local function record_usage(call, usage, status, i)
  local ttl, tool = ARGV[i], ARGV[i + 1]
  local cpu, wall, peak, out = ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  -- One field on the record, not four: every field of a finished record stays for its TTL.
  redis.call('HSET', call, 'usage', cpu .. ' ' .. wall .. ' ' .. peak .. ' ' .. out)
  local failed, burnt, high = status == 'failed', tonumber(cpu) > 0, tonumber(peak)
  for _, p in ipairs({'', tool .. '|'}) do
    redis.call('HINCRBY', usage, p .. 'calls', 1)
    if failed then redis.call('HINCRBY', usage, p .. 'errors', 1) end
    if burnt then redis.call('HINCRBYFLOAT', usage, p .. 'cpu_seconds', cpu) end
    redis.call('HINCRBYFLOAT', usage, p .. 'wall_seconds', wall)
    redis.call('HINCRBY', usage, p .. 'output_bytes', out)
    if high > 0 and high > tonumber(redis.call('HGET', usage, p .. 'peak_memory_bytes') or '0') then
      redis.call('HSET', usage, p .. 'peak_memory_bytes', peak)
    end
  end
  redis.call('EXPIRE', usage, ttl)
end
