"""The Codex file tools (namespace ``Codex``): ``apply_patch``, ``read_file``, ``list_dir`` and
``grep_files``, with Codex's argument names and output shapes, for models trained on them.

They share ``variant_family = "file_tools"`` with the Main file tools: a tool set uses one family
or the other, never both (the validator reports ``variant_conflict``).

``apply_patch`` is atomic across files: every hunk of every file is applied in memory first, and
only a patch that fits completely is written. If a write fails midway, the files already written
are restored, so a failed patch leaves the workspace as it was.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from toolhub.backends.ignore import IgnoreRules
from toolhub.backends.locks import PathLocks
from toolhub.backends.ripgrep import Ripgrep
from toolhub.backends.workspace import SpecialFileError, Workspace
from toolhub.core import Tool, ToolContext, ToolError, ToolKind

from .codex_patch import FileOp, HunkError, PatchError, apply_hunks, parse
from .plan import ensure_not_planning
from .text import (
    MAX_EDIT_BYTES,
    SCAN_LIMIT,
    SNIFF_BYTES,
    clip,
    decode_line,
    iter_lines,
    looks_binary,
)

CODEX = "Codex"
FAMILY = "file_tools"
LINE_CHARS = 500


class ApplyPatchArgs(BaseModel):
    patch: str = Field(
        description="The patch: `*** Begin Patch`, then `*** Add File: p` (+lines), `*** Delete "
        "File: p`, or `*** Update File: p` (optional `*** Move to: q`) with `@@` hunks of ' ', "
        "'-' and '+' lines, then `*** End Patch`."
    )


class FileChange(BaseModel):
    path: str
    action: Literal["added", "deleted", "updated", "moved"]
    from_path: str | None = None


class ApplyPatchOutput(BaseModel):
    status: Literal["applied", "failed"]
    changes: list[FileChange] = Field(default_factory=list)
    message: str = ""

    def model_text(self) -> str:
        if self.status == "failed":
            return f"Patch not applied; no file was changed. {self.message}"
        marks = {"added": "A", "deleted": "D", "updated": "M", "moved": "M"}
        lines = [
            f"{marks[c.action]} {c.path}" + (f" (from {c.from_path})" if c.from_path else "")
            for c in self.changes
        ]
        return "Success. Updated the following files:\n" + "\n".join(lines)


class _View:
    """The workspace as the patch sees it: disk contents overlaid with the patch's changes."""

    def __init__(self, ws: Workspace) -> None:
        self.ws = ws
        self.original: dict[Path, bytes | None] = {}
        self.current: dict[Path, bytes | None] = {}

    def read(self, path: Path) -> bytes | None:
        if path not in self.current:
            try:
                data: bytes | None = self.ws.read_bytes(path, limit=MAX_EDIT_BYTES)
            except FileNotFoundError:
                data = None
            except IsADirectoryError:
                raise HunkError(f"{self.ws.display(path)} is a directory") from None
            except SpecialFileError as exc:
                raise HunkError(f"{self.ws.display(path)} is {exc.strerror}") from None
            self.original[path] = data
            self.current[path] = data
        return self.current[path]

    def write(self, path: Path, data: bytes | None) -> None:
        self.read(path)
        self.current[path] = data

    def changed(self) -> list[Path]:
        return [p for p, data in self.current.items() if data != self.original[p]]


class ApplyPatch(Tool[ApplyPatchArgs, ApplyPatchOutput]):
    id = "apply_patch"
    namespace = CODEX
    kind = ToolKind.EDIT
    description_template = (
        "Edit files with a patch in the `*** Begin Patch` format: add, delete, update (with `@@` "
        "hunks of context, removed and added lines) and move files. All files change together or "
        "none does."
    )
    variant_family = FAMILY

    def run(self, ctx: ToolContext, args: ApplyPatchArgs) -> ApplyPatchOutput:
        ensure_not_planning(ctx, "applying patches")
        try:
            ops = parse(args.patch)
        except PatchError as exc:
            raise ToolError.invalid_arguments(f"invalid patch: {exc}") from None
        ws = ctx.container.require(Workspace)
        targets = [
            (op, ws.resolve(op.path), ws.resolve(op.move_to) if op.move_to else None) for op in ops
        ]
        paths = [p for _, src, dst in targets for p in (src, dst) if p is not None]
        with ctx.container.get_or_default(PathLocks).hold(*paths):
            view = _View(ws)
            try:
                changes = [_stage(ws, view, op, src, dst) for op, src, dst in targets]
            except HunkError as exc:
                return ApplyPatchOutput(status="failed", message=str(exc))
            _commit(ws, view)
        return ApplyPatchOutput(status="applied", changes=changes)


def _stage(ws: Workspace, view: _View, op: FileOp, src: Path, dst: Path | None) -> FileChange:
    shown = ws.display(src)
    if op.action == "add":
        if ws.kind(src) == "dir":
            raise HunkError(f"{shown} is a directory")
        view.write(src, op.content.encode("utf-8"))
        return FileChange(path=shown, action="added")
    current = view.read(src)
    if current is None:
        raise HunkError(f"{shown} does not exist, so it cannot be {op.action}d")
    if op.action == "delete":
        view.write(src, None)
        return FileChange(path=shown, action="deleted")
    text = current.decode("utf-8", "surrogateescape")
    crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
    updated = apply_hunks(text.replace("\r\n", "\n") if crlf else text, op.hunks, shown)
    data = (updated.replace("\n", "\r\n") if crlf else updated).encode("utf-8", "surrogateescape")
    if dst is None or dst == src:
        view.write(src, data)
        return FileChange(path=shown, action="updated")
    view.write(src, None)
    view.write(dst, data)
    return FileChange(path=ws.display(dst), action="moved", from_path=shown)


def _commit(ws: Workspace, view: _View) -> None:
    """Write every change; on a failure restore what was already written, then report it."""
    done: list[Path] = []
    try:
        for path in view.changed():
            data = view.current[path]
            if data is None:
                ws.remove(path)
            else:
                ws.write(path, data)
            done.append(path)
    except (OSError, ToolError) as exc:
        failed = ws.display(path)
        for written in reversed(done):
            original = view.original[written]
            if original is None:
                with contextlib.suppress(FileNotFoundError):
                    ws.remove(written)
            else:
                ws.write(written, original)
        raise ToolError.execution(
            f"writing {failed} failed ({exc}); the files already written were restored"
        ) from None


class CodexReadArgs(BaseModel):
    file_path: str = Field(description="Path of the file (absolute, or relative to the workspace).")
    offset: int = Field(1, ge=1, description="1-based line number to start from.")
    limit: int = Field(2000, ge=1, le=10_000, description="Maximum number of lines to return.")


class CodexReadOutput(BaseModel):
    path: str
    text: str

    def model_text(self) -> str:
        return self.text


class CodexReadFile(Tool[CodexReadArgs, CodexReadOutput]):
    id = "read_file"
    namespace = CODEX
    kind = ToolKind.READ
    description_template = "Read lines of a file; each line comes back as `L<number>: <text>`."
    variant_family = FAMILY

    def run(self, ctx: ToolContext, args: CodexReadArgs) -> CodexReadOutput:
        ws = ctx.container.require(Workspace)
        path = ws.resolve(args.file_path)
        shown = ws.display(path)
        try:
            handle = ws.open_read(path)
        except FileNotFoundError:
            return CodexReadOutput(path=shown, text=f"{shown} does not exist.")
        except IsADirectoryError:
            return CodexReadOutput(path=shown, text=f"{shown} is a directory.")
        except SpecialFileError as exc:
            return CodexReadOutput(path=shown, text=f"{shown} is {exc.strerror}; not read.")
        out: list[str] = []
        with handle:
            if looks_binary(handle.read(SNIFF_BYTES)):
                return CodexReadOutput(path=shown, text=f"{shown} is a binary file.")
            handle.seek(0)
            number = 0
            for number, (raw, length) in enumerate(iter_lines(handle, LINE_CHARS * 4), start=1):
                if number >= args.offset + args.limit:
                    break
                if number >= args.offset:
                    out.append(f"L{number}: {clip(decode_line(raw), LINE_CHARS, length)}")
        if not out:
            return CodexReadOutput(path=shown, text="offset exceeds file length")
        return CodexReadOutput(path=shown, text="\n".join(out))


class CodexListArgs(BaseModel):
    dir_path: str = Field(description="Directory to list (absolute, or relative).")
    offset: int = Field(1, ge=1, description="1-based entry number to start from.")
    limit: int = Field(25, ge=1, le=1000, description="Maximum number of entries to return.")
    depth: int = Field(2, ge=1, le=10, description="How many directory levels to descend.")


class CodexListDir(Tool[CodexListArgs, CodexReadOutput]):
    id = "list_dir"
    namespace = CODEX
    kind = ToolKind.LIST_DIR
    description_template = (
        "List a directory's entries (directories end in `/`, symlinks in `@`), indented by "
        "depth, one page at a time."
    )
    variant_family = FAMILY

    def run(self, ctx: ToolContext, args: CodexListArgs) -> CodexReadOutput:
        ws = ctx.container.require(Workspace)
        path = ws.resolve(args.dir_path)
        shown = ws.display(path)
        if ws.kind(path) != "dir":
            return CodexReadOutput(path=shown, text=f"{shown} is not a directory.")
        entries: list[str] = []
        wanted = args.offset + args.limit  # one past the page: enough to say there are more
        rules = IgnoreRules.for_directory(ws.root, path)
        _collect(ws, path, 0, args.depth, rules, entries, wanted)
        page = entries[args.offset - 1 : args.offset - 1 + args.limit]
        lines = [f"Absolute path: {path}", *page]
        if args.offset - 1 + args.limit < len(entries):
            lines.append(f"More than {args.limit} entries found")
        return CodexReadOutput(path=shown, text="\n".join(lines))


def _collect(
    ws: Workspace,
    path: Path,
    level: int,
    depth: int,
    rules: IgnoreRules,
    out: list[str],
    wanted: int,
) -> None:
    """Entries depth-first, in name order, until ``out`` holds ``wanted`` of them."""
    try:
        children, _ = ws.entries(path, limit=SCAN_LIMIT)
    except (OSError, ToolError):
        return
    for entry in sorted(children, key=lambda e: e.name):
        if len(out) >= wanted:
            return
        child = path / entry.name
        is_dir = entry.kind == "dir"
        if rules.ignored(child, is_dir=is_dir):
            continue
        suffix = "@" if entry.kind == "link" else "/" if is_dir else ""
        out.append(f"{'  ' * level}{entry.name}{suffix}")
        if is_dir and level + 1 < depth:
            _collect(ws, child, level + 1, depth, rules.descend(child), out, wanted)


class GrepFilesArgs(BaseModel):
    pattern: str = Field(description="Regular expression to search for.")
    include: str | None = Field(None, description="Glob of files to search, e.g. `*.rs`.")
    path: str | None = Field(None, description="Directory or file to search.")
    limit: int = Field(100, ge=1, le=2000, description="Maximum number of file paths.")


class GrepFiles(Tool[GrepFilesArgs, CodexReadOutput]):
    id = "grep_files"
    namespace = CODEX
    kind = ToolKind.SEARCH
    description_template = (
        "Find files whose contents match a regular expression; returns paths, most recently "
        "modified first."
    )
    variant_family = FAMILY

    def run(self, ctx: ToolContext, args: GrepFilesArgs) -> CodexReadOutput:
        ws = ctx.container.require(Workspace)
        target = ws.resolve(args.path)
        rg_args = ["--no-config", "--files-with-matches", "--hidden", "--glob=!.git"]
        rg_args += ["--no-require-git", "--color=never"]
        if args.include:
            rg_args += ["--glob", args.include]
        rg_args += ["--", args.pattern, *([] if target == ws.root else [ws.display(target)])]
        result = ctx.container.get_or_default(Ripgrep).run(
            rg_args, cwd=ws.root, max_lines=args.limit, cancel=ctx.cancel
        )
        if result.exit_code == 2 and not result.lines:
            raise ToolError.invalid_arguments(f"grep_files failed: {result.stderr.strip()}")
        if not result.lines:
            return CodexReadOutput(path=ws.display(target), text="No matches found.")

        def mtime(name: str) -> float:
            try:
                return (ws.root / name).stat().st_mtime
            except OSError:
                return 0.0

        files = sorted(result.lines, key=lambda n: (-mtime(n), n))
        return CodexReadOutput(path=ws.display(target), text="\n".join(files))


TOOLS: list[type[Tool[Any, Any]]] = [ApplyPatch, CodexReadFile, CodexListDir, GrepFiles]
