"""Whole-file mutations: ``write_file``, ``delete_file`` and ``move_file``.

Writes are atomic (temp file, fsync, rename): a failure leaves the old file or the new one,
never half of either. Every path is confined to the workspace before anything is touched, and
touched only through ``Workspace`` methods that follow no symlink from the root down, so a
directory swapped for a link mid-call cannot redirect them; all three refuse while plan mode is
on. Delete and move act on a symlink itself, never on what it points to.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from toolhub.backends.locks import PathLocks
from toolhub.backends.workspace import Workspace
from toolhub.core import Tool, ToolContext, ToolError, ToolKind

from .plan import ensure_not_planning


class WriteFileArgs(BaseModel):
    path: str = Field(description="The file to write: relative to the workspace, or absolute.")
    content: str = Field(description="The complete new content of the file.")


class WriteFileOutput(BaseModel):
    path: str
    bytes_written: int
    lines: int
    created: bool

    def model_text(self) -> str:
        verb = "Created" if self.created else "Overwrote"
        return f"{verb} {self.path} ({self.lines} lines, {self.bytes_written} bytes)."


class WriteFile(Tool[WriteFileArgs, WriteFileOutput]):
    id = "write_file"
    kind = ToolKind.WRITE
    description_template = (
        "Create a file or replace its whole content; missing parent directories are created."
        "${% if tools.by_kind.edit %} For changes to part of an existing file prefer "
        "`${{ tools.by_kind.edit }}`.${% endif %}"
    )
    variant_family = "file_tools"

    def run(self, ctx: ToolContext, args: WriteFileArgs) -> WriteFileOutput:
        ensure_not_planning(ctx, "writing files")
        ws = ctx.container.require(Workspace)
        path = ws.resolve(args.path)
        data = args.content.encode("utf-8")
        with ctx.container.get_or_default(PathLocks).hold(path):
            try:
                created = ws.write(path, data)
            except IsADirectoryError:
                raise ToolError.invalid_arguments(
                    f"{ws.display(path)} is a directory, not a file"
                ) from None
            except NotADirectoryError:
                raise ToolError.invalid_arguments(
                    f"{ws.display(path)} cannot be written: part of its path is a file"
                ) from None
        lines = args.content.count("\n") + (bool(args.content) and not args.content.endswith("\n"))
        return WriteFileOutput(
            path=ws.display(path), bytes_written=len(data), lines=lines, created=created
        )


class DeleteFileArgs(BaseModel):
    path: str = Field(description="The file to delete.")


class DeleteFileOutput(BaseModel):
    path: str
    status: Literal["deleted", "not_found", "is_directory"]

    def model_text(self) -> str:
        if self.status == "deleted":
            return f"Deleted {self.path}."
        if self.status == "not_found":
            return f"Nothing deleted: {self.path} does not exist."
        return f"Nothing deleted: {self.path} is a directory (only files can be deleted)."


class DeleteFile(Tool[DeleteFileArgs, DeleteFileOutput]):
    id = "delete_file"
    kind = ToolKind.DELETE
    description_template = "Delete one file (or symlink) from the workspace."

    def run(self, ctx: ToolContext, args: DeleteFileArgs) -> DeleteFileOutput:
        ensure_not_planning(ctx, "deleting files")
        ws = ctx.container.require(Workspace)
        entry = ws.resolve_entry(args.path)
        shown = ws.display(entry)
        with ctx.container.get_or_default(PathLocks).hold(entry):
            try:
                ws.remove(entry)
            except (FileNotFoundError, NotADirectoryError):
                return DeleteFileOutput(path=shown, status="not_found")
            except IsADirectoryError:
                return DeleteFileOutput(path=shown, status="is_directory")
        return DeleteFileOutput(path=shown, status="deleted")


class MoveFileArgs(BaseModel):
    source: str = Field(description="The file or directory to move.")
    destination: str = Field(description="Its new path; must not exist yet.")


class MoveFileOutput(BaseModel):
    path: str
    source: str
    status: Literal["moved", "not_found", "destination_exists"]

    def model_text(self) -> str:
        if self.status == "moved":
            return f"Moved {self.source} to {self.path}."
        if self.status == "not_found":
            return f"Nothing moved: {self.source} does not exist."
        return f"Nothing moved: {self.path} already exists. Delete it first or pick another name."


class MoveFile(Tool[MoveFileArgs, MoveFileOutput]):
    id = "move_file"
    kind = ToolKind.MOVE
    description_template = (
        "Move or rename a file or directory inside the workspace. Missing parent directories of "
        "the destination are created; an existing destination is never overwritten."
    )

    def run(self, ctx: ToolContext, args: MoveFileArgs) -> MoveFileOutput:
        ensure_not_planning(ctx, "moving files")
        ws = ctx.container.require(Workspace)
        source = ws.resolve_entry(args.source, what="source")
        target = ws.resolve_entry(args.destination, what="destination")
        src_shown, dst_shown = ws.display(source), ws.display(target)
        if source == ws.root:
            raise ToolError.invalid_arguments("the workspace root cannot be moved")
        if source in target.parents and ws.kind(source) == "dir":
            raise ToolError.invalid_arguments(f"cannot move {src_shown} into itself ({dst_shown})")
        with ctx.container.get_or_default(PathLocks).hold(source, target):
            try:
                ws.move(source, target)
            except (FileNotFoundError, NotADirectoryError):
                return MoveFileOutput(path=dst_shown, source=src_shown, status="not_found")
            except FileExistsError:
                return MoveFileOutput(path=dst_shown, source=src_shown, status="destination_exists")
        return MoveFileOutput(path=dst_shown, source=src_shown, status="moved")


TOOLS: list[type[Tool[Any, Any]]] = [WriteFile, DeleteFile, MoveFile]
