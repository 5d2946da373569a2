-- prelude.lua: the helpers every call-protocol script runs after (toolhub/distributed/scripts.py):
-- now(), fmt(), field_of(), sunk(), emit(), closed_attempts(), close_attempt(), finalize(),
-- usage_field(), record_usage(). The loader
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
-- there is none to close. ``raw``: the record's ``attempts`` when the caller read it already.
local function closed_attempts(call, outcome, t, raw)
  if raw == nil then raw = redis.call('HGET', call, 'attempts') end
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
-- ``read``: the record's fields a running attempt's finish read already (finish.lua), which
-- spares their commands: ``seq``, ``run``, ``queue``, ``held``, and ``usage`` to write with
-- the terminal. Such a call was claimed, so it has no claim deadline left in ``pending`` and
-- none of the fields of a queued call (``qkey``, ``qpos``, ``claim_by``, ``fair``, ``waited``).
local function finalize(call, events, channel, leases, state, cid, status, payload, result, ttl, t,
                        attempts, read)
  local version = redis.call('HGET', state, '__v') or '0'
  local seq
  local streamed = redis.call('EXISTS', events) == 1
  local fields = {'status', status, 'finished_at', fmt(t), 'result', result, 'state_v', version}
  if streamed then
    seq = emit(call, events, channel, payload, version)
  else
    -- No progress: no stream. The record's result is the terminal event (``state_v``, ``seq``),
    -- which spares a finished call the ~4.7 KB a one-entry stream costs.
    if read then
      seq = (tonumber(read.seq) or 0) + 1
      fields[#fields + 1], fields[#fields + 2] = 'seq', seq
    else
      seq = redis.call('HINCRBY', call, 'seq', 1)
    end
    redis.call('PUBLISH', channel, seq .. '|' .. version .. '|' .. payload)
  end
  if attempts then fields[#fields + 1], fields[#fields + 2] = 'attempts', attempts end
  if read and read.usage then fields[#fields + 1], fields[#fields + 2] = 'usage', read.usage end
  redis.call('HSET', call, unpack(fields))
  local run, queue, held
  if read then
    run, queue, held = read.run, read.queue, read.held
  else
    run, queue, held = unpack(redis.call('HMGET', call, 'run_id', 'queue', 'quota_held'))
  end
  if held then redis.call('ZREM', held, cid) end
  if run then
    local keep = queue == BACKGROUND_QUEUE and DONE_TTL_BACKGROUND or DONE_TTL
    redis.call('SET', call .. ':done:' .. run, '1', 'EX', keep)
  end
  if read then
    -- A claimed call's queue fields went at its claim (claim.lua); each field named here
    -- costs a scan of the record, whether or not it is there.
    redis.call('HDEL', call, 'message', 'lease_until', 'handoff', 'trace')
    if held then redis.call('HDEL', call, 'quota_held') end
  else
    redis.call('HDEL', call, 'message', 'qkey', 'qpos', 'claim_by', 'lease_until', 'handoff',
               'fair', 'quota_held', 'waited', 'trace')
  end
  redis.call('ZREM', leases, cid)
  if not read then redis.call('ZREM', leases .. ':pending', cid) end
  redis.call('EXPIRE', call, ttl)
  if streamed then redis.call('EXPIRE', events, ttl) end
  redis.call('EXPIRE', call .. ':remote', ttl)
  return seq
end
-- A finished call's figures, from ARGV[i]: ttl, tool, cpu, wall, peak, output (usage.py).
-- ``usage_field``: the record's one field of them (not four: every field of a finished record
-- stays for its TTL), which the terminal's write takes (``finalize``).
local function usage_field(i)
  return ARGV[i + 2] .. ' ' .. ARGV[i + 3] .. ' ' .. ARGV[i + 4] .. ' ' .. ARGV[i + 5]
end
-- ``record_usage`` adds them to the tenant's hour (``usage``): the totals, and the tool's.
-- errors, cpu and peak are written only once not zero (absent reads as 0). The hour's hash
-- gets its TTL when its first call makes it (only this writes it).
local function record_usage(usage, status, i)
  local ttl, tool = ARGV[i], ARGV[i + 1]
  local cpu, wall, peak, out = ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local failed, burnt, high = status == 'failed', tonumber(cpu) > 0, tonumber(peak)
  local first = redis.call('HINCRBY', usage, 'calls', 1) == 1
  for _, p in ipairs({'', tool .. '|'}) do
    if p ~= '' then redis.call('HINCRBY', usage, p .. 'calls', 1) end
    if failed then redis.call('HINCRBY', usage, p .. 'errors', 1) end
    if burnt then redis.call('HINCRBYFLOAT', usage, p .. 'cpu_seconds', cpu) end
    redis.call('HINCRBYFLOAT', usage, p .. 'wall_seconds', wall)
    redis.call('HINCRBY', usage, p .. 'output_bytes', out)
    if high > 0 and high > tonumber(redis.call('HGET', usage, p .. 'peak_memory_bytes') or '0') then
      redis.call('HSET', usage, p .. 'peak_memory_bytes', peak)
    end
  end
  if first then redis.call('EXPIRE', usage, ttl) end
end
