"""Resources the built-in tools use, as protocols with local implementations.

Tools reach the outside world only through these, taken from the container
(``ctx.container.require(Workspace)``), so the same tool runs embedded or on a worker.
``toolhub.assembly.install_local_resources`` puts the local implementations of all of them (and
of the local background tasks and answer box, ``toolhub.tasks``/``toolhub.answers``) into a
container.
"""

from __future__ import annotations

from .cgroups import CommandCgroups, SessionQuota
from .limits import ResourceLimits
from .locks import PathLocks
from .process import ProcessRunner
from .ripgrep import Ripgrep
from .running import CommandResult, RunningCommand
from .session_info import SessionInfo
from .tool_index import EnabledToolNames, InMemoryToolIndex, ToolEntry, ToolIndex
from .workspace import Workspace, atomic_write

__all__ = [
    "CommandCgroups",
    "CommandResult",
    "EnabledToolNames",
    "InMemoryToolIndex",
    "PathLocks",
    "ProcessRunner",
    "ResourceLimits",
    "Ripgrep",
    "RunningCommand",
    "SessionInfo",
    "SessionQuota",
    "ToolEntry",
    "ToolIndex",
    "Workspace",
    "atomic_write",
]
