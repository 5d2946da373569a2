"""``edit_file``: replace an exact string in a file.

Matching is exact, on text whose CRLF line endings are normalised to LF (models send LF); a
file that used CRLF throughout gets CRLF back. Bytes that are not UTF-8 survive untouched
(``surrogateescape``), so an edit never corrupts a Latin-1 file around the part it changes.

Domain outcomes are outputs the model reads and acts on: no match (with the nearest line as a
hint in ``current``), several matches without ``replace_all`` (naming the client's own name for
that flag), file not found. Misuse — identical strings, a directory, a FIFO or device, a file
over ``max_file_bytes`` (an edit holds a few copies of the file in memory, so a bound on the file
is a bound on the memory) — is ``invalid_arguments``. Edits of one file are serialized by a
per-path lock, and the write is atomic.

Versions: ``legacy-1`` reports a failed match without the nearest-line hint.
"""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from toolhub.backends.locks import PathLocks
from toolhub.backends.workspace import SpecialFileError, Workspace
from toolhub.core import BehaviorVersion, Params, Tool, ToolContext, ToolError, ToolKind
from toolhub.core.requirements import InputParam, Kind

from .plan import ensure_not_planning
from .text import MAX_EDIT_BYTES, gutter, kind_name

LEGACY = "legacy-1"
CONTEXT_LINES = 3
NEAREST_SCAN_LINES = 50_000
NEAREST_MIN_RATIO = 0.5
_GUTTER_PREFIX = re.compile(r"^\s*\d+→", re.MULTILINE)

EditStatus = Literal["applied", "created", "no_match", "multiple_matches", "not_found"]


class EditFileArgs(BaseModel):
    path: str = Field(description="The file to edit.")
    old_string: str = Field(
        description="The exact text to replace, copied from the file without the line-number "
        "gutter. Empty creates a file that does not exist yet."
    )
    new_string: str = Field(description="The text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of exactly one.")


class EditFileParams(BaseModel):
    max_file_bytes: int = Field(
        MAX_EDIT_BYTES,
        ge=1,
        description="Larger files are refused: an edit holds a few copies of the file in memory.",
    )


class EditFileOutput(BaseModel):
    path: str
    status: EditStatus
    replacements: int = 0
    snippet: str = ""
    hint: str = ""
    match_lines: list[int] = Field(default_factory=list)

    def model_text(self) -> str:
        if self.status in ("applied", "created"):
            what = "Created" if self.status == "created" else "Edited"
            count = "" if self.replacements <= 1 else f" ({self.replacements} replacements)"
            return f"{what} {self.path}{count}:\n{self.snippet}"
        return self.hint


class EditFile(Tool[EditFileArgs, EditFileOutput]):
    id = "edit_file"
    kind = ToolKind.EDIT
    description_template = (
        "Replace exact text in a file. `${{ params.edit.old_string }}` must match the file "
        "exactly (whitespace included, line-number gutter excluded) and be unique, unless "
        "`${{ params.edit.replace_all }}` is set.${% if tools.by_kind.read %} Read the file "
        "with `${{ tools.by_kind.read }}` first.${% endif %} An empty "
        "`${{ params.edit.old_string }}` creates a new file."
    )
    requires = (
        Kind(ToolKind.READ)
        & InputParam(ToolKind.EDIT, "old_string")
        & InputParam(ToolKind.EDIT, "new_string")
        & InputParam(ToolKind.EDIT, "replace_all")
    )
    versions = (
        BehaviorVersion("current", summary="a failed match names the nearest line"),
        BehaviorVersion(LEGACY, summary="a failed match says only that nothing matched"),
    )
    params_model = EditFileParams
    variant_family = "file_tools"

    def run(self, ctx: ToolContext, args: EditFileArgs) -> EditFileOutput:
        ensure_not_planning(ctx, "editing files")
        old_name, new_name = ctx.param_name("old_string"), ctx.param_name("new_string")
        if args.old_string == args.new_string:
            raise ToolError.invalid_arguments(
                f"`{old_name}` and `{new_name}` are identical: the edit would change nothing"
            )
        ws = ctx.container.require(Workspace)
        limit = ctx.container.get_or_default(Params[EditFileParams]).max_file_bytes
        path = ws.resolve(args.path)
        shown = ws.display(path)
        with ctx.container.get_or_default(PathLocks).hold(path):
            try:
                raw = ws.read_bytes(path, limit=limit)
            except FileNotFoundError:
                raw = None
            except (IsADirectoryError, SpecialFileError):
                raise ToolError.invalid_arguments(f"{shown} is not a regular file") from None
            if raw is None:
                if args.old_string:
                    return EditFileOutput(
                        path=shown,
                        status="not_found",
                        hint=f"File not found: {shown}. To create it, pass an empty `{old_name}`.",
                    )
                ws.write(path, args.new_string.encode("utf-8"))
                created = args.new_string.replace("\r\n", "\n")
                return EditFileOutput(
                    path=shown, status="created", replacements=1, snippet=_snippet(created, 0, "")
                )
            return self._edit(ctx, args, ws, path, raw)

    def _edit(
        self, ctx: ToolContext, args: EditFileArgs, ws: Workspace, path: Path, raw: bytes
    ) -> EditFileOutput:
        shown = ws.display(path)
        text = raw.decode("utf-8", "surrogateescape")
        crlf = "\r\n" in text and text.count("\r\n") == text.count("\n")
        work = text.replace("\r\n", "\n") if crlf else text
        old = args.old_string.replace("\r\n", "\n")
        new = args.new_string.replace("\r\n", "\n")
        if not old:
            if work:
                raise ToolError.invalid_arguments(
                    f"`{ctx.param_name('old_string')}` is empty but {shown} already has content; "
                    f"use `{kind_name(ctx, ToolKind.WRITE, 'write_file')}` to replace a whole file"
                )
            count, first = 1, 0
        else:
            count = work.count(old)
            first = work.find(old)
        if count == 0:
            hint = self._no_match(ctx, work, old, shown)
            return EditFileOutput(path=shown, status="no_match", hint=hint)
        if count > 1 and not args.replace_all:
            lines = _match_lines(work, old, limit=10)
            flag = ctx.param_name("replace_all")
            where = ", ".join(str(n) for n in lines) + (", ..." if count > len(lines) else "")
            return EditFileOutput(
                path=shown,
                status="multiple_matches",
                match_lines=lines,
                hint=f"Found {count} matches of `{ctx.param_name('old_string')}` in {shown} "
                f"(lines {where}). Include more surrounding lines to make it unique, or set "
                f"`{flag}` to true to replace all {count}.",
            )
        result = work.replace(old, new, -1 if args.replace_all else 1) if old else new
        out = result.replace("\n", "\r\n") if crlf else result
        ws.write(path, out.encode("utf-8", "surrogateescape"))
        return EditFileOutput(
            path=shown,
            status="applied",
            replacements=count if args.replace_all else 1,
            snippet=_snippet(result, first, new),
        )

    def _no_match(self, ctx: ToolContext, work: str, old: str, shown: str) -> str:
        reader = kind_name(ctx, ToolKind.READ, "read_file")
        text = (
            f"No match for `{ctx.param_name('old_string')}` in {shown}. It must match the file "
            f"exactly; read the file again with `{reader}` and copy the text."
        )
        if ctx.behavior_version == LEGACY:
            return text
        if _GUTTER_PREFIX.search(old):
            text += " It looks like it includes the line-number gutter (`   12→`): leave that out."
        elif _squash(old) and _squash(old) in _squash(work):
            text += " The text exists with different whitespace or indentation."
        nearest = _nearest_line(work, old)
        if nearest is not None:
            number, line = nearest
            text += f"\nNearest match: line {number}: {line[:200]}"
        return text


def _squash(text: str) -> str:
    return " ".join(text.split())


def _match_lines(work: str, old: str, limit: int) -> list[int]:
    lines: list[int] = []
    start = work.find(old)
    while start != -1 and len(lines) < limit:
        lines.append(work.count("\n", 0, start) + 1)
        start = work.find(old, start + len(old))
    return lines


def _nearest_line(work: str, old: str) -> tuple[int, str] | None:
    """The file line most like the first non-blank line of ``old`` (difflib ratio)."""
    probe = next((line.strip() for line in old.splitlines() if line.strip()), "")
    if not probe:
        return None
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(probe)
    best: tuple[float, int, str] | None = None
    for number, line in enumerate(work.splitlines()[:NEAREST_SCAN_LINES], start=1):
        candidate = line.strip()
        if not candidate:
            continue
        matcher.set_seq1(candidate)
        if matcher.real_quick_ratio() < NEAREST_MIN_RATIO:
            continue
        if matcher.quick_ratio() < NEAREST_MIN_RATIO:
            continue
        ratio = matcher.ratio()
        if ratio >= NEAREST_MIN_RATIO and (best is None or ratio > best[0]):
            best = (ratio, number, line)
    return None if best is None else (best[1], printable(best[2]))


def _snippet(result: str, start: int, new: str) -> str:
    """The edited region with a few lines of context, numbered like ``read_file`` output."""
    lines = result.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()
    first = result.count("\n", 0, start)
    last = first + max(0, new.count("\n") - new.endswith("\n"))
    lo, hi = max(0, first - CONTEXT_LINES), min(len(lines), last + CONTEXT_LINES + 1)
    return "\n".join(gutter(n + 1, printable(lines[n])) for n in range(lo, hi))


def printable(text: str) -> str:
    """Text read with ``surrogateescape`` made safe to send: undecodable bytes become U+FFFD."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


TOOLS: list[type[Tool[Any, Any]]] = [EditFile]
