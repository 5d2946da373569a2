"""The Hashline file tools (namespace ``Hashline``): ``hashline_read``, ``hashline_edit`` and
``hashline_grep``. Lines are shown as ``N:hash|text``; edits name lines by that ``N:hash``
anchor, so an edit made against a stale view is refused instead of changing the wrong line.

The hash scheme (``chunk`` or ``content_only``, ``hash_len``, ``chunk_size``) is described in
``hashline_scheme``; the three tools share one ``HashlineParams`` value, and a config that gives
them different params is a violation (anchors from one setting never match another).

They share ``variant_family = "file_tools"`` with the Main and Codex file tools: a tool set uses
one family, never two (``variant_conflict``). A Hashline tool set creates files with
``insert_after`` anchor ``0`` and finds them with ``hashline_grep`` (or ``Main:glob``, which is
no file-tools variant).

Writes are atomic (``Workspace.write``: temp file, fsync, rename in the directory descriptor),
paths are confined to the workspace, edits of one file are serialized by ``PathLocks``, and an
edit in plan mode is refused.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from toolhub.backends.locks import PathLocks
from toolhub.backends.workspace import SpecialFileError, Workspace
from toolhub.core import Params, Tool, ToolContext, ToolError, ToolKind

from .hashline_edits import (
    LineEdit,
    Splice,
    Stale,
    apply,
    parse_edits,
    plan,
    render,
    stale_anchors,
    windows,
)
from .hashline_grep import HashlineGrep
from .hashline_scheme import (
    MAX_OUTPUT_CHARS,
    AnchoredLine,
    FileLines,
    Hasher,
    HashlineFamily,
    HashlineParams,
    TooLargeError,
    display,
    load,
)
from .plan import ensure_not_planning
from .text import MAX_EDIT_BYTES, SNIFF_BYTES, kind_name, looks_binary

STALE_CONTEXT = 3


class HashlineReadArgs(BaseModel):
    path: str = Field(description="The file to read: relative to the workspace, or absolute.")
    offset: int = Field(1, ge=1, description="1-based line to start at.")
    limit: int = Field(1000, ge=1, le=5000, description="How many lines to show at most.")


class HashlineReadOutput(BaseModel):
    path: str
    status: Literal["ok", "empty", "past_end", "not_found", "is_directory", "binary", "too_large"]
    lines: list[AnchoredLine] = Field(default_factory=list)
    total_lines: int = 0
    next_offset: int | None = None
    hint: str = ""

    def model_text(self) -> str:
        if self.status != "ok":
            return self.hint
        body = "\n".join(line.render() for line in self.lines)
        return f"{body}\n\n{self.hint}" if self.hint else body


class HashlineRead(HashlineFamily, Tool[HashlineReadArgs, HashlineReadOutput]):
    id = "hashline_read"
    kind = ToolKind.READ
    description_template = (
        "Read a text file as anchored lines `${{ example }}|text`: the line number, a "
        "${{ hash_len }}-character hash of the line, then its text.${% if tools.by_kind.edit %} "
        "Edit with `${{ tools.by_kind.edit }}` by quoting the `N:hash` anchors; an anchor whose "
        "line changed since it was read is refused.${% endif %} Long files come in pages: "
        "continue at `${{ params.read.offset }}`."
    )

    def run(self, ctx: ToolContext, args: HashlineReadArgs) -> HashlineReadOutput:
        ws = ctx.container.require(Workspace)
        params = ctx.container.get_or_default(Params[HashlineParams])
        path = ws.resolve(args.path)
        shown = ws.display(path)

        def outcome(status: Any, hint: str, total: int = 0) -> HashlineReadOutput:
            return HashlineReadOutput(path=shown, status=status, hint=hint, total_lines=total)

        try:
            data = load(ws, path, MAX_EDIT_BYTES)
        except FileNotFoundError:
            editor = ctx.renderer.by_kind.get(ToolKind.EDIT.value)
            create = f" Create it with `{editor}`: insert_after anchor `0`." if editor else ""
            return outcome("not_found", f"File not found: {shown}.{create}")
        except IsADirectoryError:
            return outcome("is_directory", f"{shown} is a directory, not a file.")
        except SpecialFileError as exc:
            return outcome("binary", f"{shown} is {exc.strerror}; not read.")
        except TooLargeError as exc:
            finder = kind_name(ctx, ToolKind.SEARCH, "hashline_grep")
            return outcome(
                "too_large",
                f"{shown} is {exc.size} bytes, over the {MAX_EDIT_BYTES}-byte limit of files "
                f"the hashline tools anchor. Search it with `{finder}` instead.",
            )
        if looks_binary(data[:SNIFF_BYTES]):
            return outcome("binary", f"{shown} is a binary file; the hashline tools show text.")
        lines = FileLines.parse(data)
        total = len(lines)
        if total == 0:
            return outcome("empty", f"{shown} is empty. Add its first lines after anchor `0`.")
        if args.offset > total:
            return outcome(
                "past_end",
                f"{shown} has {total} lines; `{ctx.param_name('offset')}` {args.offset} is past "
                "the end.",
                total,
            )
        hasher = Hasher(params, lines.bodies)
        shown_lines: list[AnchoredLine] = []
        size = 0
        for number in range(args.offset, min(total, args.offset + args.limit - 1) + 1):
            text = display(lines.bodies[number - 1])
            size += len(text) + 12
            if size > MAX_OUTPUT_CHARS and shown_lines:
                break
            shown_lines.append(AnchoredLine(line=number, hash=hasher(number), text=text))
        end = shown_lines[-1].line
        hint = ""
        if end < total:
            hint = (
                f"[Lines {args.offset}-{end} of {total}. Continue with "
                f"`{ctx.param_name('offset')}`: {end + 1}.]"
            )
        return HashlineReadOutput(
            path=shown,
            status="ok",
            lines=shown_lines,
            total_lines=total,
            next_offset=end + 1 if end < total else None,
            hint=hint,
        )


class HashlineEditArgs(BaseModel):
    path: str = Field(
        description="The file to edit. A file that does not exist is created when every edit "
        "is an insert_after anchor `0` or `EOF`."
    )
    edits: list[LineEdit] = Field(
        min_length=1,
        max_length=200,
        description="The edits. Anchors are all checked against the file as it is now, then the "
        "edits are applied together (line numbers are those before this call); one stale "
        "anchor and nothing is written.",
    )

    @field_validator("edits", mode="before")
    @classmethod
    def _lenient(cls, value: Any) -> Any:
        """Models send the list as a JSON string, or one edit bare: both are what they meant."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                return value
        return [value] if isinstance(value, dict) else value


class HashlineEditOutput(BaseModel):
    path: str
    status: Literal["applied", "created", "unchanged", "stale", "not_found"]
    lines_before: int = 0
    lines_after: int = 0
    snippet: str = ""
    hint: str = ""

    def model_text(self) -> str:
        if self.status in ("stale", "not_found"):
            return self.hint
        what = {"applied": "Edited", "created": "Created", "unchanged": "No change to"}
        text = f"{what[self.status]} {self.path} ({self.lines_before} -> {self.lines_after} lines)"
        text += f":\n{self.snippet}" if self.snippet else "."
        return f"{text}\n\n{self.hint}" if self.hint else text


class HashlineEdit(HashlineFamily, Tool[HashlineEditArgs, HashlineEditOutput]):
    id = "hashline_edit"
    kind = ToolKind.EDIT
    description_template = (
        "Edit a text file by line anchors `N:hash`${% if tools.by_kind.read %} as "
        "`${{ tools.by_kind.read }}` shows them${% endif %}. Each of `${{ params.edit.edits }}` "
        "is `replace` (lines `anchor`..`end_anchor` become `content`), `insert_after` (`anchor` "
        "`0` is the top of the file, `EOF` the end) or `delete` (lines `anchor`..`end_anchor`). "
        "All anchors are checked first; if any line changed since it was shown, nothing is "
        "written and the current lines are returned. insert_after `0` creates a new file."
    )

    def run(self, ctx: ToolContext, args: HashlineEditArgs) -> HashlineEditOutput:
        ensure_not_planning(ctx, "editing files")
        params = ctx.container.get_or_default(Params[HashlineParams])
        field = ctx.param_name("edits")
        parsed = parse_edits(args.edits, params.hash_len, field)
        ws = ctx.container.require(Workspace)
        path = ws.resolve(args.path)
        shown = ws.display(path)
        with ctx.container.get_or_default(PathLocks).hold(path):
            try:
                data: bytes | None = load(ws, path, MAX_EDIT_BYTES)
            except FileNotFoundError:
                data = None
            except (IsADirectoryError, SpecialFileError):
                raise ToolError.invalid_arguments(f"{shown} is not a regular file") from None
            except TooLargeError as exc:
                raise ToolError.invalid_arguments(
                    f"{shown} is {exc.size} bytes, over the {MAX_EDIT_BYTES}-byte limit of "
                    "files the hashline tools edit"
                ) from None
            created = data is None
            if data is None:
                if not all(p.op == "insert_after" and p.first.hash is None for p in parsed):
                    return HashlineEditOutput(
                        path=shown,
                        status="not_found",
                        hint=f"File not found: {shown}. Nothing was written. To create it, use "
                        "a single insert_after with anchor `0`.",
                    )
                data = b""
            elif looks_binary(data[:SNIFF_BYTES]):
                raise ToolError.invalid_arguments(f"{shown} is a binary file, not text")
            lines = FileLines.parse(data)
            hasher = Hasher(params, lines.bodies)
            stale = stale_anchors(parsed, hasher, len(lines), field)
            if stale:
                return _stale(ctx, shown, stale, hasher, len(lines))
            splices = plan(parsed, len(lines), field)
            result = apply(lines, splices)
            new = result.lines.to_bytes()
            if created or new != data:
                ws.write(path, new)
        after = Hasher(params, result.lines.bodies)
        chunk = params.chunk_size if params.scheme == "chunk" else None
        ranges = windows(result.regions, len(result.lines), chunk)
        status = "created" if created else "applied" if new != data else "unchanged"
        return HashlineEditOutput(
            path=shown,
            status=status,
            lines_before=len(lines),
            lines_after=len(result.lines),
            snippet=render(after, ranges),
            hint=_after_note(splices, len(lines), len(result.lines), chunk, created),
        )


def _stale(
    ctx: ToolContext, shown: str, stale: list[Stale], hasher: Hasher, total: int
) -> HashlineEditOutput:
    """Which anchors no longer match, what those lines are now, and the lines around them."""
    count = (
        f"{len(stale)} anchors no longer match" if len(stale) > 1 else "an anchor no longer matches"
    )
    parts = [f"Nothing was written to {shown}: {count} the file."]
    for item in stale:
        now = (
            f"line {item.line} is now `{item.current}`"
            if item.current is not None
            else f"line {item.line} does not exist, the file has {total} lines"
        )
        parts.append(f"- {item.where} `{item.anchor}`: {now}")
    spans = [(min(item.line, total) - 1, 1) for item in stale if total]
    current = render(hasher, windows(spans, total, None, STALE_CONTEXT))
    parts.append(f"Current lines:\n{current}" if current else "The file is empty now.")
    reader = kind_name(ctx, ToolKind.READ, "hashline_read")
    parts.append(f"Retry with these anchors, or read the file again with `{reader}`.")
    return HashlineEditOutput(
        path=shown, status="stale", lines_before=total, lines_after=total, hint="\n".join(parts)
    )


def _after_note(
    splices: list[Splice], before: int, after: int, chunk: int | None, created: bool
) -> str:
    """What the edit did to anchors the model still holds."""
    if created:
        return ""
    moved = [s for s in splices if len(s.new) != s.stop - s.start]
    if moved:
        line = moved[0].start + 1
        return (
            f"Lines from {line} on moved ({after - before:+d} lines): older anchors from there "
            "on are stale; use the lines shown here or read again."
        )
    if chunk:
        return (
            f"An edit re-hashes its whole chunk of {chunk} lines: older anchors in the lines "
            "shown are stale, the ones shown here are current."
        )
    return ""


TOOLS: list[type[Tool[Any, Any]]] = [HashlineRead, HashlineEdit, HashlineGrep]
