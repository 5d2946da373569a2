"""Resources the built-in tools use, as protocols with local implementations.

Tools reach the outside world only through these, taken from the container
(``ctx.container.require(Workspace)``), so the same tool runs embedded or on a worker.
``install_local_resources`` puts the local implementations of all of them into a container.
"""

from __future__ import annotations

from pathlib import Path

from toolhub.core import Container

from .interaction import AnswerBox, Answers, LocalAnswerBox
from .limits import PidsCgroups, ResourceLimits
from .locks import PathLocks
from .process import CommandResult, ProcessRunner, RunningCommand
from .ripgrep import Ripgrep
from .session_info import SessionInfo
from .tasks import BackgroundTasks, TaskSnapshot
from .tasks_local import LocalBackgroundTasks
from .tool_index import EnabledToolNames, InMemoryToolIndex, ToolEntry, ToolIndex
from .workspace import Workspace, atomic_write


def install_local_resources(
    container: Container,
    *,
    workspace: Path,
    session_dir: Path,
    session_id: str,
    limits: ResourceLimits | None = None,
    tasks: BackgroundTasks | None = None,
) -> None:
    """Insert the embedded implementations: workspace, process runner (logs under
    ``session_dir/terminal``), background tasks, answer box, path locks and ripgrep.

    Pass ``tasks`` to share one background-task backend between sessions (each task remembers
    its owning session, and the tools only show a session its own tasks).
    """
    ws = Workspace(workspace)
    runner = ProcessRunner(ws.root, Path(session_dir) / "terminal", limits=limits)
    container.insert(ws)
    container.insert(SessionInfo(session_id, Path(session_dir)))
    container.insert(runner)
    container.insert(tasks if tasks is not None else LocalBackgroundTasks(runner), BackgroundTasks)
    container.insert(LocalAnswerBox(), AnswerBox)
    container.insert(PathLocks())
    container.insert(Ripgrep())


__all__ = [
    "AnswerBox",
    "Answers",
    "BackgroundTasks",
    "CommandResult",
    "EnabledToolNames",
    "InMemoryToolIndex",
    "LocalAnswerBox",
    "LocalBackgroundTasks",
    "PathLocks",
    "PidsCgroups",
    "ProcessRunner",
    "ResourceLimits",
    "Ripgrep",
    "RunningCommand",
    "SessionInfo",
    "TaskSnapshot",
    "ToolEntry",
    "ToolIndex",
    "Workspace",
    "atomic_write",
    "install_local_resources",
]
