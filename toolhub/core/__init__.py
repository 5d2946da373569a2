"""The runtime contract of toolhub: tools, the container, streaming, errors, erasure,
requirements, templates, reminders and behavior versions. No I/O, nothing from the rest of
toolhub."""

from . import requirements
from .container import Container, Params, ResourceKey, State, StateSync
from .erasure import ErasedTool, Outcome, parse_arguments
from .errors import ConfigError, ConfigViolation, ErrorKind, ToolError
from .kinds import CapabilityMode, ToolKind
from .reminders import DEFAULT_REMINDER_TAG, Reminder, RemindersEnabled, wrap_reminders
from .result import CallResult, ToolOutput, closing, drain, new_call_id
from .stream import ContentBlock, OutputDeltas, Progress
from .templates import TemplateRenderer, TemplateRenderError
from .tool import CancelToken, Capabilities, InternalDispatch, ListContext, Tool, ToolContext
from .versions import CURRENT, BehaviorVersion, Lifecycle, VersionWarning, resolve_version

__all__ = [
    "CURRENT",
    "DEFAULT_REMINDER_TAG",
    "BehaviorVersion",
    "CallResult",
    "CancelToken",
    "Capabilities",
    "CapabilityMode",
    "ConfigError",
    "ConfigViolation",
    "Container",
    "ContentBlock",
    "ErasedTool",
    "ErrorKind",
    "InternalDispatch",
    "Lifecycle",
    "ListContext",
    "Outcome",
    "OutputDeltas",
    "Params",
    "Progress",
    "Reminder",
    "RemindersEnabled",
    "ResourceKey",
    "State",
    "StateSync",
    "TemplateRenderError",
    "TemplateRenderer",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolKind",
    "ToolOutput",
    "VersionWarning",
    "closing",
    "drain",
    "new_call_id",
    "parse_arguments",
    "requirements",
    "resolve_version",
    "wrap_reminders",
]
