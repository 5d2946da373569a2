"""``list_dir``: a directory tree, ``.gitignore`` respected, capped in size.

The walk is breadth-first, so when the cap is reached the model sees every level down to some
depth rather than one deep corner: directories whose contents did not fit are marked, and the
model can list them on their own. Symlinks are shown with their target and never followed (no
loops, and no way out of the workspace).
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from toolhub.backends.ignore import IgnoreRules
from toolhub.backends.workspace import Workspace
from toolhub.core import Params, Tool, ToolContext, ToolKind

from .text import kind_name

MAX_DEPTH = 10
INDENT = "  "


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


class ListDir(Tool[ListDirArgs, ListDirOutput]):
    id = "list_dir"
    kind = ToolKind.LIST_DIR
    description_template = (
        "List a directory as a tree (directories end in `/`), down to `${{ params.list_dir.depth "
        "}}` levels. Files ignored by .gitignore and the .git directory are left out. To find "
        "files by name pattern use `${{ tools.by_kind.search }}`."
    )
    params_model = ListDirParams
    variant_family = "file_tools"

    def run(self, ctx: ToolContext, args: ListDirArgs) -> ListDirOutput:
        ws = ctx.container.require(Workspace)
        params = ctx.container.get_or_default(Params[ListDirParams])
        path = ws.resolve(args.path)
        shown = ws.display(path)
        if not path.exists():
            return ListDirOutput(
                path=shown, status="not_found", hint=f"Directory not found: {shown}"
            )
        if not path.is_dir():
            reader = kind_name(ctx, ToolKind.READ, "read_file")
            return ListDirOutput(
                path=shown,
                status="not_a_directory",
                hint=f"{shown} is a file, not a directory. Read it with `{reader}`.",
            )
        root = _Node(shown, True)
        count, truncated = _walk(ws.root, path, root, args.depth, params.max_output_chars)
        lines: list[str] = [f"{shown}/" if shown != "." else "./"]
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


def _walk(ws_root: Path, top: Path, root: _Node, depth: int, budget: int) -> tuple[int, bool]:
    """Breadth-first: list each directory's entries while the character budget lasts."""
    queue: deque[tuple[_Node, Path, int, IgnoreRules]] = deque(
        [(root, top, 1, IgnoreRules.for_directory(ws_root, top))]
    )
    used = 0
    count = 0
    while queue:
        node, path, level, rules = queue.popleft()
        try:
            with os.scandir(path) as scan:
                entries = sorted(scan, key=lambda e: (not _is_dir(e), e.name))
        except OSError:
            node.listed = True
            continue
        cost = sum(len(e.name) + len(INDENT) * level + 2 for e in entries)
        if used + cost > budget and used > 0:
            return count, True
        used += cost
        node.listed = True
        for entry in entries:
            is_dir = _is_dir(entry)
            entry_path = Path(entry.path)
            if rules.ignored(entry_path, is_dir=is_dir):
                continue
            link = os.readlink(entry.path) if entry.is_symlink() else None
            child = _Node(entry.name, is_dir, link)
            node.children.append(child)
            count += 1
            if is_dir and link is None and level < depth:
                queue.append((child, entry_path, level + 1, rules.descend(entry_path)))
            elif is_dir and link is None:
                child.listed = True
    return count, False


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


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


TOOLS: list[type[Tool[Any, Any]]] = [ListDir]
