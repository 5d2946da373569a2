"""The OpenCode file tools (namespace ``OpenCode``): ``read``, ``edit``, ``write``, ``grep`` and
``glob``, with OpenCode's camelCase argument names (``filePath``, ``oldString``, ``replaceAll``)
for models trained on them.

They are names, not new behavior: each maps its arguments onto the Main tool's and runs the Main
tool's own code, so confinement (``Workspace``), ``PathLocks``, atomic writes, plan mode and
every refusal stay the same. The context handed down renames the Main tool's parameters to the
client's names of OpenCode's, so a hint such as "set `replaceAll`" names what the model can set.
Like the Codex and Hashline tools they share ``variant_family = "file_tools"``: a tool set uses
one family's file tools, never two (``variant_conflict``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from toolhub.core import Tool, ToolContext, ToolKind
from toolhub.core.requirements import EvalContext, Expr, Kind

from .edit_file import EditFile, EditFileArgs, EditFileOutput, EditFileParams
from .file_ops import WriteFile, WriteFileArgs, WriteFileOutput
from .read_file import ReadFile, ReadFileArgs, ReadFileOutput, ReadFileParams
from .search import Glob, GlobArgs, GlobOutput, GlobParams, Grep, GrepArgs, GrepOutput, GrepParams

NAMESPACE = "OpenCode"
FAMILY = "file_tools"


def delegated(ctx: ToolContext, names: Mapping[str, str]) -> ToolContext:
    """``ctx`` for running a Main tool on a variant's behalf: ``names`` maps the Main tool's
    canonical parameter names to the variant's, and each becomes the client's name for it, so
    the Main tool's hints name the arguments the model actually has."""
    return dataclasses.replace(
        ctx, param_names={main: ctx.param_name(own) for main, own in names.items()}
    )


@dataclass(frozen=True, slots=True)
class SameParamsAs(Expr):
    """Every enabled tool of ``tool_ids`` (``Namespace:id``) has this tool's params.

    A variant and the Main tool it runs share one params type, and the container holds one
    value per type: with both enabled, the last applied would silently win for both. Requiring
    equal params makes that a config violation instead."""

    tool_ids: tuple[str, ...]

    def evaluate(self, ctx: Any) -> bool:
        if not isinstance(ctx, EvalContext):
            return True
        return all(
            t.params == ctx.self_params
            for t in ctx.tools
            if f"{t.namespace}:{t.id}" in self.tool_ids
        )

    def explain(self) -> str:
        return f"the same params on {' and '.join(self.tool_ids)} (they share one value)"

    def to_json(self) -> Any:
        return {"same_params_as": list(self.tool_ids)}


class OpenCodeFamily:
    """What the OpenCode file tools share: namespace and variant family. Listed before ``Tool``
    in a tool's bases."""

    namespace = NAMESPACE
    variant_family: str | None = FAMILY


class ReadArgs(BaseModel):
    filePath: str = Field(description="The file to read: relative to the workspace, or absolute.")
    offset: int | None = Field(
        None, description="The line to start reading from (1-based; negative counts from the end)."
    )
    limit: int | None = Field(
        None, ge=1, description="How many lines to read (default ${{ max_lines }})."
    )


class ReadOutput(ReadFileOutput):
    """Main's read result, shown the OpenCode way: path, type and content in tags."""

    def model_text(self) -> str:
        if self.status != "ok":
            return super().model_text()
        return (
            f"<path>{self.path}</path>\n<type>file</type>\n<content>\n"
            f"{super().model_text()}\n</content>"
        )


class Read(OpenCodeFamily, Tool[ReadArgs, ReadOutput]):
    id = "read"
    kind = ToolKind.READ
    params_model = ReadFileParams
    description_template = (
        "Read a file from the local filesystem. By default it returns up to ${{ max_lines }} "
        "lines from the start, each prefixed with its line number; use "
        "`${{ params.read.offset }}` and `${{ params.read.limit }}` for other parts of a long "
        "file. Images are returned as images; other binary files are refused. Read a file "
        "before editing it."
    )

    def template_extra(self, params: BaseModel | None) -> dict[str, object]:
        p = params if isinstance(params, ReadFileParams) else ReadFileParams()
        return {"max_lines": p.max_lines}

    def run(self, ctx: ToolContext, args: ReadArgs) -> ReadOutput:
        main = ReadFileArgs(path=args.filePath, offset=args.offset, limit=args.limit)
        names = {"path": "filePath", "offset": "offset", "limit": "limit"}
        out = ReadFile().run(delegated(ctx, names), main)
        return ReadOutput.model_validate(out, from_attributes=True)


class EditArgs(BaseModel):
    filePath: str = Field(description="The file to modify: relative to the workspace, or absolute.")
    oldString: str = Field(description="The text to replace (empty creates a new file).")
    newString: str = Field(description="The text to replace it with (must differ from oldString).")
    replaceAll: bool = Field(False, description="Replace all occurrences of oldString.")


class Edit(OpenCodeFamily, Tool[EditArgs, EditFileOutput]):
    id = "edit"
    kind = ToolKind.EDIT
    params_model = EditFileParams
    requires = Kind(ToolKind.READ)
    description_template = (
        "Perform an exact string replacement in a file. `${{ params.edit.oldString }}` must "
        "match the file exactly, indentation included and without the line-number prefix, and "
        "be unique in the file unless `${{ params.edit.replaceAll }}` is set."
        "${% if tools.by_kind.read %} Use `${{ tools.by_kind.read }}` on the file first."
        "${% endif %}"
    )

    def run(self, ctx: ToolContext, args: EditArgs) -> EditFileOutput:
        main = EditFileArgs(
            path=args.filePath,
            old_string=args.oldString,
            new_string=args.newString,
            replace_all=args.replaceAll,
        )
        names = {
            "path": "filePath",
            "old_string": "oldString",
            "new_string": "newString",
            "replace_all": "replaceAll",
        }
        return EditFile().run(delegated(ctx, names), main)


class WriteArgs(BaseModel):
    filePath: str = Field(description="The file to write: relative to the workspace, or absolute.")
    content: str = Field(description="The content to write to the file.")


class Write(OpenCodeFamily, Tool[WriteArgs, WriteFileOutput]):
    id = "write"
    kind = ToolKind.WRITE
    description_template = (
        "Write a file, replacing it if it exists; missing directories are created."
        "${% if tools.by_kind.edit %} Prefer `${{ tools.by_kind.edit }}` for changes to an "
        "existing file.${% endif %}"
    )

    def run(self, ctx: ToolContext, args: WriteArgs) -> WriteFileOutput:
        main = WriteFileArgs(path=args.filePath, content=args.content)
        return WriteFile().run(delegated(ctx, {"path": "filePath"}), main)


class GrepArgsOC(BaseModel):
    pattern: str = Field(description="The regular expression to search file contents for.")
    path: str | None = Field(None, description="The directory to search (default: the workspace).")
    include: str | None = Field(
        None, description='File pattern to include in the search, e.g. "*.js" or "*.{ts,tsx}".'
    )


class GrepOC(OpenCodeFamily, Tool[GrepArgsOC, GrepOutput]):
    id = "grep"
    kind = ToolKind.SEARCH
    params_model = GrepParams
    description_template = (
        "Search file contents with a regular expression (ripgrep syntax); .gitignore is "
        "respected. Returns matching lines with their file and line number. Filter files with "
        "`${{ params.search.include }}`."
    )

    def run(self, ctx: ToolContext, args: GrepArgsOC) -> GrepOutput:
        main = GrepArgs(pattern=args.pattern, path=args.path or ".", glob=args.include)
        names = {"pattern": "pattern", "path": "path", "glob": "include"}
        out = Grep().run(delegated(ctx, names), main)
        if out.status == "ok" and out.truncated:
            # Main's note names `head_limit`, which OpenCode's grep does not have.
            shown = ctx.param_name("path"), ctx.param_name("include")
            out.hint = (
                f"[Showing the first {len(out.lines)} lines; there are more. Narrow the "
                f"pattern, `{shown[0]}` or `{shown[1]}`.]"
            )
        return out


class GlobOC(OpenCodeFamily, Tool[GlobArgs, GlobOutput]):
    id = "glob"
    kind = ToolKind.SEARCH
    params_model = GlobParams
    requires = SameParamsAs(("Main:glob", "OpenCode:glob"))
    description_template = (
        'Find files by name pattern, such as "**/*.js" or "src/**/*.ts"; .gitignore is '
        "respected. Returns matching paths, most recently modified first."
    )

    def run(self, ctx: ToolContext, args: GlobArgs) -> GlobOutput:
        return Glob().run(ctx, args)


TOOLS: list[type[Tool[Any, Any]]] = [Read, Edit, Write, GrepOC, GlobOC]
