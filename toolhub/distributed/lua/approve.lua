-- approve.lua: runs after prelude.lua and BEFORE create_and_enqueue.lua, as one script
-- (toolhub/distributed/scripts.py): the same KEYS and ARGV as create_and_enqueue, and KEYS[12]
-- the session's approvals. An approval either queues the call, in this one step, or changes
-- nothing: of two approvers answering at once, one queues it and the other is told it was
-- decided. Here the approval is checked (the call awaits it, is this session's, has not
-- expired by Redis's clock); then its status is cleared, so create_and_enqueue writes the
-- queued record afresh with the approver's fields (among them `approval`, the decisions so
-- far and this one) and pushes the message the approver built and signed.
-- Replies (toolhub.distributed.script_replies.ApproveReply):
--   IN_USE = 0  -- never: the record was cleared just before
--   QUEUED = 1  -- approved and queued
--   SESSION_EXPIRED = 2  -- the session's config expired: store it and approve again
--   OTHER_SESSION = 3  -- never: checked here first
--   QUEUED_SUBSCRIBED = 4  -- approved and queued, its channel already subscribed
--   RATE_LIMITED = 5  -- never: an approved call is not held to the rate quota
--   NOT_AWAITING = 10  -- the call does not await approval (decided, cancelled, finished)
--   EXPIRED = 11  -- its approval expired (the approver then ends it: decide_approval)
--   UNKNOWN = 12  -- no such call of this session
local ast, aowner, aexpires = unpack(redis.call('HMGET', KEYS[1], 'status', 'session_id',
                                                'approval_expires'))
if not ast or aowner ~= field_of(15, 'session_id') then return 12 end
if ast ~= 'awaiting_approval' then return 10 end
if aexpires and tonumber(aexpires) <= now() then return 11 end
if redis.call('EXISTS', KEYS[6]) == 0 then return 2 end
redis.call('ZREM', KEYS[12], ARGV[5])
redis.call('ZREM', KEYS[13], ARGV[5])
redis.call('HDEL', KEYS[1], 'status')
