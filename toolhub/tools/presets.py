"""Tool-set presets: named tool lists a client config can pick with ``preset: <name>`` instead of
listing tools. Plain data, one entry per tool in the config's own ``tools:`` form (``id``,
``name``, ``rename``, ``params``), so a preset is validated exactly like a list the client wrote
and nothing about it is code. docs/contract.md, "Presets", documents each; an explicit ``tools:``
list in the same config overrides entries by id (the fields it sets) or adds tools.

The renames follow what the reference ships to production: the terminal tool is
``run_terminal_command`` with ``background``, and its task tools say "command".
"""

from __future__ import annotations

from typing import Any

_TERMINAL: list[dict[str, Any]] = [
    {
        "id": "Main:bash",
        "name": "run_terminal_command",
        "rename": {"is_background": "background"},
    },
    {"id": "Main:task_output", "name": "get_command_output"},
    {"id": "Main:wait_tasks", "name": "wait_commands"},
    {"id": "Main:kill_task", "name": "kill_command"},
]

_EXPLORE: list[dict[str, Any]] = [
    {"id": "Main:read_file"},
    {"id": "Main:list_dir"},
    {"id": "Main:grep"},
    {"id": "Main:glob"},
    {"id": "Main:web_fetch"},
    {"id": "Main:skill"},
]

_PLANNING: list[dict[str, Any]] = [
    {"id": "Main:todo_write"},
    {"id": "Main:enter_plan_mode"},
    {"id": "Main:exit_plan_mode"},
    {"id": "Main:ask_user"},
]

TOOLSET_PRESETS: dict[str, dict[str, Any]] = {
    "coding": {
        "description": "Main file, search and shell tools with background commands, todos, "
        "plan mode, questions, web fetch and skills; the terminal renamed for production.",
        "tools": [
            {"id": "Main:read_file"},
            {"id": "Main:write_file"},
            {"id": "Main:edit_file"},
            {"id": "Main:delete_file"},
            {"id": "Main:move_file"},
            {"id": "Main:list_dir"},
            {"id": "Main:grep"},
            {"id": "Main:glob"},
            *_TERMINAL,
            *_PLANNING,
            {"id": "Main:web_fetch"},
            {"id": "Main:skill"},
        ],
    },
    "explore": {
        "description": "Read-only exploration: read, list, grep, glob, web fetch and skills.",
        "tools": _EXPLORE,
    },
    "plan": {
        "description": "The explore tools plus todos, plan mode and questions: planning "
        "without changing anything.",
        "tools": [*_EXPLORE, *_PLANNING],
    },
    "codex": {
        "description": "Codex's file tools (apply_patch, read_file, list_dir, grep_files), "
        "Main glob and todos, and a foreground-only terminal named `shell`.",
        "tools": [
            {"id": "Codex:apply_patch"},
            {"id": "Codex:read_file"},
            {"id": "Codex:list_dir"},
            {"id": "Codex:grep_files"},
            {"id": "Main:glob"},
            {"id": "Main:bash", "name": "shell", "params": {"enabled_background": False}},
            {"id": "Main:todo_write"},
        ],
    },
    "opencode": {
        "description": "OpenCode's eight tools under their own names: bash, read, edit, write, "
        "grep, glob, todowrite, skill.",
        "tools": [
            {"id": "OpenCode:bash"},
            {"id": "OpenCode:read"},
            {"id": "OpenCode:edit"},
            {"id": "OpenCode:write"},
            {"id": "OpenCode:grep"},
            {"id": "OpenCode:glob"},
            {"id": "OpenCode:todowrite"},
            {"id": "OpenCode:skill"},
        ],
    },
    "hashline": {
        "description": "Hashline file tools (anchored reads, edits and grep) with Main glob, "
        "the renamed terminal and its task tools, todos and skills.",
        "tools": [
            {"id": "Hashline:hashline_read"},
            {"id": "Hashline:hashline_edit"},
            {"id": "Hashline:hashline_grep"},
            {"id": "Main:glob"},
            *_TERMINAL,
            {"id": "Main:todo_write"},
            {"id": "Main:skill"},
        ],
    },
}
