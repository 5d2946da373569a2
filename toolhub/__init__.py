"""toolhub: one typed, extensible tool system for AI agents, run embedded or on Celery workers.

The public API is re-exported here; docs/contract.md ("Public API") lists these names, and
tests/test_exported_members.py keeps the two equal.

``Session`` is imported on first use (PEP 562): it brings in the whole tool catalog (numpy,
bs4, httpx, ...; about half a second here), which a process importing only a corner of toolhub
does not need. The background holder imports ``toolhub.backends`` and the store, and a
background command that finds no holder waits for that import while one is spawned.
"""

from typing import TYPE_CHECKING, Any

from toolhub.approvals import ApprovalRefused
from toolhub.core import (
    CallResult,
    CapabilityMode,
    ConfigError,
    ConfigViolation,
    Container,
    ContentBlock,
    ErrorKind,
    Params,
    Progress,
    Reminder,
    State,
    Tool,
    ToolContext,
    ToolError,
    ToolKind,
    ToolOutput,
    requirements,
)
from toolhub.errors import ErrorCode, RedisUnavailable, ToolhubError
from toolhub.toolset import ToolConfig, ToolSet, ToolSetBuilder, ToolSetConfig

if TYPE_CHECKING:
    from toolhub.session import Session

__version__ = "0.1.0"

__all__ = [
    "ApprovalRefused",
    "CallResult",
    "CapabilityMode",
    "ConfigError",
    "ConfigViolation",
    "Container",
    "ContentBlock",
    "ErrorCode",
    "ErrorKind",
    "Params",
    "Progress",
    "RedisUnavailable",
    "Reminder",
    "Session",
    "State",
    "Tool",
    "ToolConfig",
    "ToolContext",
    "ToolError",
    "ToolKind",
    "ToolOutput",
    "ToolSet",
    "ToolSetBuilder",
    "ToolSetConfig",
    "ToolhubError",
    "__version__",
    "requirements",
]


def __getattr__(name: str) -> Any:
    if name == "Session":
        from toolhub.session import Session

        globals()["Session"] = Session
        return Session
    raise AttributeError(f"module 'toolhub' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
