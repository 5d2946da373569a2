"""``list_dir``: a directory tree, ``.gitignore`` respected, capped in size.

The walk is breadth-first, so when the cap is reached the model sees every level down to some
depth rather than one deep corner: directories whose contents did not fit are marked, and the
model can list them on their own. The directory asked for is cut too: it shows the entries that
fit and how many did not, so the tree never exceeds the cap. Symlinks are shown with their
target and never followed (no loops, and no way out of the workspace); every directory is read
through a descriptor opened beneath the workspace root, so one swapped for a link mid-walk is
skipped, not followed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from toolhub.backends.ignore import IgnoreRules
from toolhub.backends.workspace import Workspace
from toolhub.core import Params, Tool, ToolContext, ToolError, ToolKind

from .text import SCAN_LIMIT, kind_name

MAX_DEPTH = 10
INDENT = "  "
OMITTED_RESERVE = 40
"""Characters kept free for the line saying how many entries did not fit."""


class ListDirArgs(BaseModel):
    path: str = Field(".", description="The directory to list (default: the workspace root).")
    depth: int = Field(2, ge=1, le=MAX_DEPTH, description="How many levels to show.")


class ListDirParams(BaseModel):
    max_output_chars: int = Field(10_000, ge=200)


class ListDirOutput(BaseModel):
    path: str
    status: Literal["ok", "not_found", "not_a_directory"]
    tree: str = ""
    entries: int = 0
    truncated: bool = False
    hint: str = ""

    def model_text(self) -> str:
        if self.status != "ok":
            return self.hint
        body = self.tree or "(empty directory)"
        return f"{body}\n\n{self.hint}" if self.hint else body


@dataclass(slots=True)
class _Node:
    name: str
    is_dir: bool
    link: str | None = None
    children: list[_Node] = field(default_factory=list)
    listed: bool = False
    omitted: str = ""
    """The line saying what did not fit (only the directory asked for is shown in part)."""


class ListDir(Tool[ListDirArgs, ListDirOutput]):
    id = "list_dir"
    kind = ToolKind.LIST_DIR
    description_template = (
        "List a directory as a tree (directories end in `/`), down to `${{ params.list_dir.depth "
        "}}` levels. Files ignored by .gitignore and the .git directory are left out."
        "${% if tools.by_kind.search %} To find files by name pattern use "
        "`${{ tools.by_kind.search }}`.${% endif %}"
    )
    params_model = ListDirParams
    variant_family = "file_tools"

    def run(self, ctx: ToolContext, args: ListDirArgs) -> ListDirOutput:
        ws = ctx.container.require(Workspace)
        params = ctx.container.get_or_default(Params[ListDirParams])
        path = ws.resolve(args.path)
        shown = ws.display(path)
        kind = ws.kind(path)
        if kind is None:
            return ListDirOutput(
                path=shown, status="not_found", hint=f"Directory not found: {shown}"
            )
        if kind != "dir":
            reader = kind_name(ctx, ToolKind.READ, "read_file")
            return ListDirOutput(
                path=shown,
                status="not_a_directory",
                hint=f"{shown} is a file, not a directory. Read it with `{reader}`.",
            )
        header = f"{shown}/" if shown != "." else "./"
        root = _Node(shown, True)
        budget = max(0, params.max_output_chars - len(header))
        count, truncated = _walk(ws, path, root, args.depth, budget)
        lines = [header]
        _render(root, 1, lines)
        hint = ""
        if truncated:
            hint = (
                f"[Output capped at {params.max_output_chars} characters; directories marked "
                "`…` were not expanded. List them on their own to see inside.]"
            )
        return ListDirOutput(
            path=shown,
            status="ok",
            tree="\n".join(lines),
            entries=count,
            truncated=truncated,
            hint=hint,
        )


def _walk(ws: Workspace, top: Path, root: _Node, depth: int, budget: int) -> tuple[int, bool]:
    """Breadth-first: list each directory's entries while the character budget lasts.

    A directory whose entries do not all fit stops the walk (it stays marked unexpanded), except
    the one asked for: it shows the entries that fit, then how many more there are.
    """
    queue: deque[tuple[_Node, Path, int, IgnoreRules]] = deque(
        [(root, top, 1, IgnoreRules.for_directory(ws.root, top))]
    )
    used = 0
    count = 0
    while queue:
        node, path, level, rules = queue.popleft()
        try:
            found, more = ws.entries(path, limit=SCAN_LIMIT)
        except (OSError, ToolError):
            if node is root:
                raise
            node.listed = True  # unreadable, or swapped for a link since it was listed
            continue
        children: list[tuple[_Node, Path, int]] = []
        for entry in sorted(found, key=lambda e: (e.kind != "dir", e.name)):
            child_path = path / entry.name
            is_dir = entry.kind == "dir"
            if rules.ignored(child_path, is_dir=is_dir):
                continue
            child = _Node(entry.name, is_dir, entry.target)
            children.append((child, child_path, _cost(child, level)))
        fits = not more and used + sum(cost for *_, cost in children) <= budget
        if not fits and node is not root:
            return count, True
        node.listed = True
        for shown, (child, child_path, cost) in enumerate(children):
            if not fits and used + cost > budget - OMITTED_RESERVE:
                node.omitted = f"… {len(children) - shown}{'+' if more else ''} more entries"
                return count + shown, True
            used += cost
            node.children.append(child)
            if child.is_dir and child.link is None and level < depth:
                queue.append((child, child_path, level + 1, rules.descend(child_path)))
            elif child.is_dir and child.link is None:
                child.listed = True
        count += len(children)
        if not fits:
            node.omitted = f"… more than {SCAN_LIMIT} entries: not all were read"
            return count, True
    return count, False


def _cost(node: _Node, level: int) -> int:
    """Characters ``node``'s line takes in the tree, newline and a possible ``…`` mark included."""
    tail = f" -> {node.link}" if node.link is not None else "/ …" if node.is_dir else ""
    return len(INDENT) * level + len(node.name) + len(tail) + 1


def _render(node: _Node, level: int, lines: list[str]) -> None:
    pad = INDENT * level
    for child in node.children:
        if child.link is not None:
            lines.append(f"{pad}{child.name} -> {child.link}")
            continue
        if not child.is_dir:
            lines.append(f"{pad}{child.name}")
            continue
        mark = "" if child.listed else " …"
        lines.append(f"{pad}{child.name}/{mark}")
        _render(child, level + 1, lines)
    if node.omitted:
        lines.append(f"{pad}{node.omitted}")


TOOLS: list[type[Tool[Any, Any]]] = [ListDir]
