"""``hashline_grep``: a regular-expression search over the workspace (the real ripgrep, as
``Main:grep`` and ``Codex:grep_files`` use it) whose matches come back anchored as
``N:hash|text``, so they can be edited without a read in between.

ripgrep only says which lines match; each matching file is then read whole (up to the edit
limit) and hashed like ``hashline_read`` does, because rg's printed text is cut and decoded
lossily while an anchor must cover every byte of its line. Files are read through the
``Workspace``, so a path rg reports can never lead outside it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from toolhub.backends.ripgrep import Ripgrep
from toolhub.backends.workspace import Workspace
from toolhub.core import Params, Tool, ToolContext, ToolError, ToolKind

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
from .text import MAX_EDIT_BYTES, SNIFF_BYTES, looks_binary

_NOTHING = "No files were searched"
"""rg's complaint when the scope holds nothing it may search (only links, only ignored files):
no match, not a mistake of the caller."""
_RG_ARGS = ["--no-config", "--color=never", "--hidden", "--glob=!.git", "--no-require-git"]


class HashlineGrepArgs(BaseModel):
    pattern: str = Field(description="Regular expression (Rust regex syntax, like ripgrep).")
    path: str = Field(".", description="File or directory to search (default: the workspace).")
    glob: str | None = Field(None, description="Only files matching this glob, e.g. `*.py`.")
    case_insensitive: bool = Field(False, description="Ignore case.")
    context: int = Field(
        0, ge=0, le=10, description="Lines shown (anchored too) before and after each match."
    )
    limit: int = Field(100, ge=1, le=1000, description="At most this many matching lines.")


class GrepLine(AnchoredLine):
    match: bool = True


class GrepFile(BaseModel):
    path: str
    lines: list[GrepLine] = Field(default_factory=list)
    note: str = ""

    def render(self) -> str:
        out: list[str] = [self.path]
        for prev, line in zip([None, *self.lines], self.lines, strict=False):
            if prev is not None and line.line != prev.line + 1:
                out.append("--")
            out.append(line.render())
        if self.note:
            out.append(self.note)
        return "\n".join(out)


class HashlineGrepOutput(BaseModel):
    pattern: str
    status: Literal["ok", "no_matches"]
    files: list[GrepFile] = Field(default_factory=list)
    matches: int = 0
    truncated: bool = False
    hint: str = ""

    def model_text(self) -> str:
        if self.status == "no_matches":
            return self.hint
        body = "\n\n".join(f.render() for f in self.files)
        return f"{body}\n\n{self.hint}" if self.hint else body


class HashlineGrep(HashlineFamily, Tool[HashlineGrepArgs, HashlineGrepOutput]):
    id = "hashline_grep"
    kind = ToolKind.SEARCH
    description_template = (
        "Search file contents with a regular expression (ripgrep; respects .gitignore) and show "
        "each matching line anchored as `${{ example }}|text`${% if tools.by_kind.edit %}, so "
        "`${{ tools.by_kind.edit }}` can change it directly${% endif %}. Narrow with "
        "`${{ params.search.glob }}`; `${{ params.search.context }}` adds lines around matches."
    )

    def run(self, ctx: ToolContext, args: HashlineGrepArgs) -> HashlineGrepOutput:
        ws = ctx.container.require(Workspace)
        params = ctx.container.get_or_default(Params[HashlineParams])
        target = ws.resolve(args.path)
        if ws.kind(target) is None:
            raise ToolError.invalid_arguments(f"path `{args.path}` does not exist")
        rg_args = [*_RG_ARGS, "--line-number", "--no-heading", "--with-filename", "--null"]
        rg_args.append("--max-columns=64")  # only the path and number are read
        if args.case_insensitive:
            rg_args.append("--ignore-case")
        if args.glob:
            rg_args += ["--glob", args.glob]
        rg_args += ["--", args.pattern, *([] if target == ws.root else [ws.display(target)])]
        result = ctx.container.get_or_default(Ripgrep).run(
            rg_args, cwd=ws.root, max_lines=args.limit, cancel=ctx.cancel
        )
        ctx.cancel.raise_if_cancelled()
        if result.exit_code == 2 and not result.lines and _NOTHING not in result.stderr:
            raise ToolError.invalid_arguments(
                f"hashline_grep failed: {result.stderr.strip() or 'ripgrep failed'}"
            )
        hits: dict[str, list[int]] = {}
        for raw in result.lines:
            name, sep, rest = raw.partition("\0")
            number = rest.partition(":")[0]
            if sep and number.isdigit():
                hits.setdefault(name, []).append(int(number))
        files: list[GrepFile] = []
        size = 0
        for name, numbers in hits.items():
            if size > MAX_OUTPUT_CHARS:
                files.append(GrepFile(path=name, note="[not shown: the output is long enough]"))
                continue
            found = _grep_file(ws, params, name, numbers, args.context)
            size += sum(len(line.text) + 12 for line in found.lines)
            files.append(found)
        if not files:
            where = "" if args.path in ("", ".") else f" in {args.path}"
            return HashlineGrepOutput(
                pattern=args.pattern,
                status="no_matches",
                hint=f"No matches for `{args.pattern}`{where}.",
            )
        notes: list[str] = []
        if result.stopped_early:
            notes.append(
                f"[Showing the first {args.limit} matching lines; there are more. Narrow "
                f"`{ctx.param_name('pattern')}`, `{ctx.param_name('path')}` or "
                f"`{ctx.param_name('glob')}`, or raise `{ctx.param_name('limit')}` (max 1000).]"
            )
        if result.timed_out:
            notes.append("[The search timed out; results are partial.]")
        return HashlineGrepOutput(
            pattern=args.pattern,
            status="ok",
            files=files,
            matches=sum(len(n) for n in hits.values()),
            truncated=result.stopped_early or result.timed_out,
            hint="\n".join(notes),
        )


def _grep_file(
    ws: Workspace, params: HashlineParams, name: str, numbers: list[int], context: int
) -> GrepFile:
    """The matched lines of one file with ``context`` lines around them, hashed from the file
    as read now (ripgrep's own text is cut and lossy; the anchors must be exact)."""
    try:
        path = ws.resolve(name)
        shown = ws.display(path)
        data = load(ws, path, MAX_EDIT_BYTES)
    except TooLargeError as exc:
        return GrepFile(path=name, note=f"[{exc.size} bytes: too large to anchor]")
    except (OSError, ToolError):
        return GrepFile(path=name, note="[could not be read to anchor its lines]")
    if looks_binary(data[:SNIFF_BYTES]):
        return GrepFile(path=shown, note="[binary file]")
    lines = FileLines.parse(data)
    total = len(lines)
    matched = {n for n in numbers if n <= total}
    wanted = sorted(
        {k for n in matched for k in range(max(1, n - context), min(total, n + context) + 1)}
    )
    hasher = Hasher(params, lines.bodies)
    return GrepFile(
        path=shown,
        lines=[
            GrepLine(line=n, hash=hasher(n), text=display(lines.bodies[n - 1]), match=n in matched)
            for n in wanted
        ],
    )
