"""The tool taxonomy: what each kind of tool is, whether it only reads, and which capability
modes admit it.

The three uses of a kind (seed section 5): template rendering (``tools.by_kind.<kind>``),
read-only inference, and capability filtering. One table drives all three so they cannot drift.
"""

from __future__ import annotations

from enum import StrEnum


class ToolKind(StrEnum):
    READ = "read"
    EDIT = "edit"
    WRITE = "write"
    DELETE = "delete"
    MOVE = "move"
    LIST_DIR = "list_dir"
    SEARCH = "search"
    LSP = "lsp"
    EXECUTE = "execute"
    WEB_SEARCH = "web_search"
    WEB_FETCH = "web_fetch"
    BACKGROUND_TASK_ACTION = "background_task_action"
    WAIT_TASKS_ACTION = "wait_tasks_action"
    KILL_TASK_ACTION = "kill_task_action"
    TASK = "task"
    IMAGE_GEN = "image_gen"
    VIDEO_GEN = "video_gen"
    IMAGE_TO_VIDEO = "image_to_video"
    ASK_USER = "ask_user"
    PLAN = "plan"
    MEMORY_SEARCH = "memory_search"
    SKILL = "skill"
    MONITOR = "monitor"
    USE_TOOL = "use_tool"
    SEARCH_TOOL = "search_tool"
    OTHER = "other"

    @classmethod
    def parse(cls, value: str) -> ToolKind:
        """Unknown kind strings sink to ``other`` rather than failing a whole config."""
        try:
            return cls(value)
        except ValueError:
            return cls.OTHER

    @property
    def is_read_only(self) -> bool:
        return self in _READ_ONLY


class CapabilityMode(StrEnum):
    """``read_only`` < ``read_write`` < ``all`` and ``read_only`` < ``execute`` < ``all``."""

    READ_ONLY = "read_only"
    READ_WRITE = "read_write"
    EXECUTE = "execute"
    ALL = "all"

    def allows(self, kind: ToolKind | None, *, external: bool = False) -> bool:
        """Whether a tool of ``kind`` survives this mode's filter.

        A tool without a kind is kept everywhere when it is part of the baseline, but an external
        one (MCP or hub) only under ``all``: nothing is known about what it does.
        """
        if kind is None:
            return self is CapabilityMode.ALL or not external
        return self in _MODES_BY_KIND[kind]


_READ_ONLY = frozenset(
    {
        ToolKind.READ,
        ToolKind.LIST_DIR,
        ToolKind.SEARCH,
        ToolKind.LSP,
        ToolKind.WEB_SEARCH,
        ToolKind.WEB_FETCH,
        ToolKind.BACKGROUND_TASK_ACTION,
        ToolKind.WAIT_TASKS_ACTION,
        ToolKind.ASK_USER,
        ToolKind.MEMORY_SEARCH,
        ToolKind.SKILL,
        ToolKind.SEARCH_TOOL,
    }
)

_EVERY = frozenset(CapabilityMode)
_WRITE = frozenset({CapabilityMode.READ_WRITE, CapabilityMode.ALL})
_EXEC = frozenset({CapabilityMode.EXECUTE, CapabilityMode.ALL})
#: ``use_tool`` may call any tool, a writing or executing one too: not in ``read_only``.
_CALLS_OTHERS = frozenset({CapabilityMode.READ_WRITE, CapabilityMode.EXECUTE, CapabilityMode.ALL})

_MODES_BY_KIND: dict[ToolKind, frozenset[CapabilityMode]] = {
    ToolKind.PLAN: _EVERY,
    ToolKind.ASK_USER: _EVERY,
    ToolKind.SKILL: _EVERY,
    ToolKind.READ: _EVERY,
    ToolKind.MEMORY_SEARCH: _EVERY,
    ToolKind.SEARCH: _EVERY,
    ToolKind.WEB_SEARCH: _EVERY,
    ToolKind.WEB_FETCH: _EVERY,
    ToolKind.LSP: _EVERY,
    ToolKind.LIST_DIR: _EVERY,
    ToolKind.EDIT: _WRITE,
    ToolKind.WRITE: _WRITE,
    ToolKind.DELETE: _WRITE,
    ToolKind.MOVE: _WRITE,
    ToolKind.IMAGE_GEN: _WRITE,
    ToolKind.VIDEO_GEN: _WRITE,
    ToolKind.IMAGE_TO_VIDEO: _WRITE,
    ToolKind.EXECUTE: _EXEC,
    ToolKind.BACKGROUND_TASK_ACTION: _EXEC,
    ToolKind.WAIT_TASKS_ACTION: _EXEC,
    ToolKind.KILL_TASK_ACTION: _EXEC,
    ToolKind.TASK: _EXEC,
    ToolKind.MONITOR: _EXEC,
    ToolKind.USE_TOOL: _CALLS_OTHERS,
    # Finding deferred tools helps only the tool that calls them: where that one is gone,
    # a search_tool would be a dangling requirement (``search_tool requires use_tool``).
    ToolKind.SEARCH_TOOL: _CALLS_OTHERS,
    ToolKind.OTHER: frozenset({CapabilityMode.ALL}),
}
