"""Sub-agents for the ``task`` tool: the protocol a host implements, and the typed errors.

``base.SubagentRunner`` is what ``task`` takes from the container; the reference runner
(``toolhub.session_runner.SessionSubagentRunner``, a child toolhub ``Session`` driven by a
host callback) lives beside the session, since it builds sessions and sits above the tools.
"""

from .base import (
    HOW_TO_PROVIDE,
    SubagentDepth,
    SubagentRequest,
    SubagentResult,
    SubagentRun,
    SubagentRunner,
    SubagentStatus,
)

__all__ = [
    "HOW_TO_PROVIDE",
    "SubagentDepth",
    "SubagentRequest",
    "SubagentResult",
    "SubagentRun",
    "SubagentRunner",
    "SubagentStatus",
]
