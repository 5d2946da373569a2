"""``todo_write``: the model's own task list, persisted with the session, plus a reminder that
nudges it when open items go stale.

The list lives in ``State[TodoState]`` and changes only through ``container.update`` with a pure
function, so concurrent calls on different workers never lose an update. A rejected write
(duplicate ids, a new item without content) is an output the model reads; the list is unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from toolhub.core import Container, State, Tool, ToolContext, ToolKind, ToolOutput
from toolhub.core.requirements import Expr
from toolhub.core.requirements import Tool as NeedTool

TodoStatus = Literal["pending", "in_progress", "completed", "cancelled"]
TodoPriority = Literal["high", "medium", "low"]
OPEN: frozenset[str] = frozenset({"pending", "in_progress"})
REMIND_EVERY = 10
#: Every tool that writes ``State[TodoState]``: a call to one resets the reminder's count.
TODO_WRITERS = frozenset({"Main:todo_write", "OpenCode:todowrite"})
_MARK = {"pending": "[ ]", "in_progress": "[~]", "completed": "[x]", "cancelled": "[-]"}


class TodoItem(BaseModel):
    id: str
    content: str
    status: TodoStatus = "pending"
    #: Set by variants whose clients track it (OpenCode's ``todowrite``); Main leaves it unset.
    priority: TodoPriority | None = None


class TodoState(BaseModel):
    resource_id: ClassVar[str] = "main.todos"

    todos: list[TodoItem] = Field(default_factory=list)
    calls_since_update: int = 0

    @property
    def open(self) -> list[TodoItem]:
        return [t for t in self.todos if t.status in OPEN]


class TodoInput(BaseModel):
    id: str = Field(description="Stable id of the item (e.g. `1`, `tests`).")
    content: str | None = Field(None, description="What to do; required for a new item.")
    status: TodoStatus | None = Field(None, description="Default `pending` for new items.")


class TodoWriteArgs(BaseModel):
    todos: list[TodoInput] = Field(description="Items to write.")
    merge: bool = Field(
        False,
        description="True: update the listed items by id and add new ones, keeping the rest. "
        "False: replace the whole list.",
    )


class TodoWriteOutput(BaseModel):
    status: Literal["updated", "duplicate_id", "invalid"]
    todos: list[TodoItem] = Field(default_factory=list)
    message: str = ""

    def model_text(self) -> str:
        if self.status != "updated":
            return self.message
        return render(self.todos)


def render(todos: list[TodoItem]) -> str:
    if not todos:
        return "The todo list is empty."
    done = sum(t.status == "completed" for t in todos)
    open_count = sum(t.status in OPEN for t in todos)
    lines = [f"Todos ({open_count} open, {done} done):"]
    lines += [
        f"{_MARK[t.status]} {t.id}. {t.content}" + (f" ({t.priority})" if t.priority else "")
        for t in todos
    ]
    return "\n".join(lines)


def _apply(
    current: TodoState, args: TodoWriteArgs, priorities: Mapping[str, TodoPriority]
) -> tuple[TodoState, str | None]:
    """The new state, or the unchanged one and why the write was refused."""
    existing = {t.id: t for t in current.todos} if args.merge else {}
    missing = [i.id for i in args.todos if i.id not in existing and not i.content]
    if missing:
        return current, (
            f"New todo item(s) {', '.join(missing)} need `content`. Nothing was changed."
        )
    updated: list[TodoItem] = [] if not args.merge else list(current.todos)
    index = {t.id: n for n, t in enumerate(updated)}
    for item in args.todos:
        if item.id in index:
            old = updated[index[item.id]]
            updated[index[item.id]] = TodoItem(
                id=item.id,
                content=item.content or old.content,
                status=item.status or old.status,
                priority=priorities.get(item.id, old.priority),
            )
        else:
            index[item.id] = len(updated)
            updated.append(
                TodoItem(
                    id=item.id,
                    content=item.content or "",
                    status=item.status or "pending",
                    priority=priorities.get(item.id),
                )
            )
    return TodoState(todos=updated, calls_since_update=0), None


class TodoWrite(Tool[TodoWriteArgs, TodoWriteOutput]):
    id = "todo_write"
    kind = ToolKind.PLAN
    description_template = (
        "Keep a todo list for multi-step work: add items, mark one `in_progress` while you work "
        "on it and `completed` when done. Use `merge` to update items by id."
    )
    state_models = (TodoState,)

    def run(self, ctx: ToolContext, args: TodoWriteArgs) -> TodoWriteOutput:
        return write_todos(ctx, args)


def write_todos(
    ctx: ToolContext, args: TodoWriteArgs, priorities: Mapping[str, TodoPriority] | None = None
) -> TodoWriteOutput:
    """Apply one write to the session's list (``State[TodoState]``), as a pure update so
    concurrent writers never lose one. Shared by every todo tool, so all variants keep one list
    and refuse the same bad writes; ``priorities`` (by id) is for variants that have them."""
    ids = [item.id for item in args.todos]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        return TodoWriteOutput(
            status="duplicate_id",
            message=f"Duplicate todo id(s) in one call: {', '.join(dupes)}. Each id may "
            "appear once. Nothing was changed.",
        )
    problem: list[str | None] = [None]

    def update(current: TodoState) -> TodoState:
        new, problem[0] = _apply(current, args, priorities or {})
        return new

    state = ctx.container.update(State[TodoState], update)
    if problem[0] is not None:
        return TodoWriteOutput(status="invalid", todos=state.todos, message=problem[0])
    return TodoWriteOutput(status="updated", todos=state.todos)


class OpenTodosReminder:
    """Every ``REMIND_EVERY`` calls without a todo write while items are open: list them. Any
    tool writing the shared list counts (OpenCode's ``todowrite`` keeps the same state)."""

    requires: Expr = NeedTool("Main", "todo_write") | NeedTool("OpenCode", "todowrite")

    def collect(self, container: Container, output: ToolOutput) -> list[str]:
        if output.tool_id in TODO_WRITERS:
            return []
        current = container.get(State[TodoState])
        if current is None or not current.open:
            return []

        def tick(state: TodoState) -> TodoState:
            return state.model_copy(update={"calls_since_update": state.calls_since_update + 1})

        state = container.update(State[TodoState], tick)
        if not state.open or state.calls_since_update % REMIND_EVERY:
            return []
        items = "\n".join(f"{_MARK[t.status]} {t.id}. {t.content}" for t in state.open)
        return [
            f"You have {len(state.open)} open todo item(s) that have not been updated for a "
            f"while:\n{items}\nUpdate the list as you make progress, and mark finished items "
            "completed."
        ]


TOOLS: list[type[Tool[Any, Any]]] = [TodoWrite]
REMINDERS = [OpenTodosReminder()]
