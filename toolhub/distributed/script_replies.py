"""What each Lua script of the call protocol answers, by name: one enum per script, the same
names and values as the ``Replies`` header of its ``.lua`` file (``toolhub/distributed/lua``;
a test checks they agree). ``RATE_LIMITED`` comes as a list with the quota it is over
(``quota.script_reply`` reads it as ``OverQuota``). Scripts that answer a sequence number on
success name only their refusals (``EmitReply.STALE``); any other value is the sequence
number.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class CreateReply(IntEnum):
    IN_USE = 0
    CREATED = 1
    OTHER_SESSION = 3
    RATE_LIMITED = 5


class CreateAndEnqueueReply(IntEnum):
    IN_USE = 0
    CREATED = 1
    SESSION_EXPIRED = 2
    OTHER_SESSION = 3
    CREATED_SUBSCRIBED = 4
    RATE_LIMITED = 5


class ClaimAction(StrEnum):
    GONE = "gone"
    STALE = "stale"
    FINISHED = "finished"
    REPLAYED = "replayed"
    DUPLICATE = "duplicate"
    TERMINAL = "terminal"
    LOST_FAIL = "lost_fail"
    EXHAUSTED = "exhausted"
    CANCELLED = "cancelled"
    RUN = "run"


class EmitReply(IntEnum):
    STALE = -1


class FinishReply(IntEnum):
    STALE = -1


class RenewReply(IntEnum):
    LOST = 0
    RENEWED = 1
    CANCEL_REQUESTED = 2
    ENDED = 3


class StartFenceReply(StrEnum):
    LOST = "lost"
    HOLDER = "holder"
    WORKER = "worker"
    WITHDRAWN = "withdrawn"


class CancelReply(StrEnum):
    UNKNOWN = "unknown"
    CANCELLED = "cancelled"
    SIGNALLED = "signalled"
    FINISHED = "finished"


class FailQueuedReply(IntEnum):
    NOT_QUEUED = 0


class RefusedReply(IntEnum):
    NOT_ANSWERED = 0


class RequeueOutcome(StrEnum):
    RERUN = "rerun"
    RESUME = "resume"
    FAIL = "fail"


class FailLostReply(IntEnum):
    NOT_LOST = 0


class SweepReply(StrEnum):
    GONE = "gone"
    EARLY = "early"
    WAITING = "waiting"
    TAKEN = "taken"
    LEFT = "left"


class ReenqueueReply(IntEnum):
    NOT_QUEUED = 0
    QUEUED = 1


class TouchReply(IntEnum):
    NOT_QUEUED = 0
    TOUCHED = 1


class AnswerReply(IntEnum):
    NOT_ASKED = 0
    ANSWERED = 1


class RemoveUnackedReply(IntEnum):
    KEPT = 0
    REMOVED = 1


class RememberReply(IntEnum):
    NOT_OWNER = 0
    RECORDED = 1


class AwaitApprovalReply(IntEnum):
    IN_USE = 0
    AWAITING = 1
    OTHER_SESSION = 3


class ApproveReply(IntEnum):
    IN_USE = 0
    QUEUED = 1
    SESSION_EXPIRED = 2
    OTHER_SESSION = 3
    QUEUED_SUBSCRIBED = 4
    RATE_LIMITED = 5
    NOT_AWAITING = 10
    EXPIRED = 11
    UNKNOWN = 12


class DecideApprovalReply(IntEnum):
    NOT_DUE = -1
    NOT_AWAITING = 0


#: Each script's reply enum, by the script's file name.
REPLIES: dict[str, type[IntEnum] | type[StrEnum]] = {
    "create": CreateReply,
    "create_and_enqueue": CreateAndEnqueueReply,
    "claim": ClaimAction,
    "emit": EmitReply,
    "finish": FinishReply,
    "renew_many": RenewReply,
    "start_fence": StartFenceReply,
    "cancel": CancelReply,
    "fail_queued": FailQueuedReply,
    "refused": RefusedReply,
    "requeue": RequeueOutcome,
    "fail_lost": FailLostReply,
    "sweep_unclaimed": SweepReply,
    "reenqueue": ReenqueueReply,
    "touch_reserved": TouchReply,
    "answer": AnswerReply,
    "remove_unacked": RemoveUnackedReply,
    "remember_remote_task": RememberReply,
    "await_approval": AwaitApprovalReply,
    "approve": ApproveReply,
    "decide_approval": DecideApprovalReply,
}
