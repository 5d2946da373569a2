"""The built-in tools, aggregated from one module per family.

Each module exports ``TOOLS`` (and, when it has cross-tool reminders, ``REMINDERS``); this file
only concatenates them, so families can be added without touching each other.
"""

from __future__ import annotations

from typing import Any

from toolhub.core import Reminder, Tool
from toolhub.toolset.catalog import Catalog

from .approvals_reminder import REMINDERS as _approvals_reminders
from .ask_user import TOOLS as _ask_user
from .background import REMINDERS as _background_reminders
from .background import TOOLS as _background
from .codex import TOOLS as _codex
from .edit_file import TOOLS as _edit_file
from .file_ops import TOOLS as _file_ops
from .hashline import TOOLS as _hashline
from .list_dir import TOOLS as _list_dir
from .lsp import TOOLS as _lsp
from .media import TOOLS as _media
from .memory import TOOLS as _memory
from .meta import TOOLS as _meta
from .monitor import REMINDERS as _monitor_reminders
from .monitor import TOOLS as _monitor
from .opencode import TOOLS as _opencode
from .opencode_session import TOOLS as _opencode_session
from .plan import TOOLS as _plan
from .presets import TOOLSET_PRESETS
from .read_file import TOOLS as _read_file
from .search import TOOLS as _search
from .shell import TOOLS as _shell
from .skill_reminder import REMINDERS as _skill_reminders
from .skills import TOOLS as _skills
from .task import TOOLS as _task
from .todo import REMINDERS as _todo_reminders
from .todo import TOOLS as _todo
from .web import TOOLS as _web

BUILTIN_TOOLS: list[type[Tool[Any, Any]]] = [
    *_read_file,
    *_file_ops,
    *_edit_file,
    *_list_dir,
    *_search,
    *_shell,
    *_background,
    *_todo,
    *_plan,
    *_ask_user,
    *_meta,
    *_codex,
    *_hashline,
    *_opencode,
    *_opencode_session,
    *_web,
    *_lsp,
    *_media,
    *_memory,
    *_skills,
    *_monitor,
    *_task,
]

BUILTIN_REMINDERS: list[Reminder] = [
    *_background_reminders,
    *_todo_reminders,
    *_skill_reminders,
    *_monitor_reminders,
    *_approvals_reminders,
]

PRESETS: dict[str, dict[str, str]] = {
    "current": {},
    "legacy-1": {
        "Main:read_file": "legacy-1",
        "Main:edit_file": "legacy-1",
        "Main:bash": "legacy-1",
    },
}

DEFAULT_TOOL_IDS: list[str] = [
    "Main:read_file",
    "Main:write_file",
    "Main:edit_file",
    "Main:delete_file",
    "Main:move_file",
    "Main:list_dir",
    "Main:grep",
    "Main:glob",
    "Main:bash",
    "Main:task_output",
    "Main:wait_tasks",
    "Main:kill_task",
    "Main:todo_write",
    "Main:enter_plan_mode",
    "Main:exit_plan_mode",
    "Main:ask_user",
    "Main:use_tool",
    "Main:search_tool",
    "Main:web_fetch",
    "Main:lsp",
    "Main:memory_search",
    "Main:memory_get",
    "Main:skill",
    "Main:monitor",
]

#: The built-in catalog: what ``ToolSetBuilder(CATALOG)`` starts from.
CATALOG = Catalog(
    tools=BUILTIN_TOOLS,
    reminders=BUILTIN_REMINDERS,
    presets=PRESETS,
    toolset_presets=TOOLSET_PRESETS,
    default_tool_ids=DEFAULT_TOOL_IDS,
)

__all__ = [
    "BUILTIN_REMINDERS",
    "BUILTIN_TOOLS",
    "CATALOG",
    "DEFAULT_TOOL_IDS",
    "PRESETS",
    "TOOLSET_PRESETS",
]
