"""toolhub: one typed, extensible tool system for AI agents, run embedded or on Celery workers.

The public API is re-exported here; docs/contract.md ("Public API") lists these names, and
tests/test_exported_members.py keeps the two equal.
"""

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
from toolhub.session import Session
from toolhub.toolset import ToolConfig, ToolSet, ToolSetBuilder, ToolSetConfig

__version__ = "0.1.0"

__all__ = [
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
