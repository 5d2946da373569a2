"""``grep`` and ``glob``: content and name search on the real ripgrep.

Both respect ``.gitignore`` (also outside a git repository), include hidden files but never
``.git``, and stop ripgrep as soon as they have enough lines, so a pattern that matches the whole
tree costs no more than the lines shown. Paths in the output are relative to the workspace.
A bad regex is the caller's mistake (``invalid_arguments``); no match is an ordinary output.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from toolhub.backends.ignore import IgnoreRules
from toolhub.backends.ripgrep import RgResult, Ripgrep
from toolhub.backends.workspace import Workspace
from toolhub.core import Params, Tool, ToolContext, ToolError, ToolKind

OutputMode = Literal["content", "files_with_matches", "count"]
MTIME_SORT_LIMIT = 5000
MAX_GLOB_CANDIDATES = 5000
_GLOB_CHARS = frozenset("*?[{")
_GLOB_TYPE = "toolhubglob"
_BASE_ARGS = ["--no-config", "--color=never", "--hidden", "--glob=!.git", "--no-require-git"]


class GrepArgs(BaseModel):
    pattern: str = Field(description="Regular expression (Rust regex syntax, like ripgrep).")
    path: str = Field(".", description="File or directory to search (default: the workspace).")
    glob: str | None = Field(None, description="Only files matching this glob, e.g. `*.py`.")
    type: str | None = Field(
        None, description="Only files of this ripgrep type, e.g. `py`, `js`, `rust`."
    )
    output_mode: OutputMode = Field(
        "content",
        description="`content`: matching lines with line numbers; `files_with_matches`: only "
        "file paths; `count`: matches per file.",
    )
    context: int | None = Field(
        None, ge=0, le=20, description="Lines of context around each match (content mode)."
    )
    case_insensitive: bool = Field(False, description="Ignore case.")
    head_limit: int | None = Field(
        None, ge=1, description="Return at most this many lines (or files)."
    )


class GrepParams(BaseModel):
    default_lines: int = Field(200, ge=1, description="Content lines returned by default.")
    max_lines: int = Field(2000, ge=1)
    default_files: int = Field(500, ge=1, description="Files (or counts) returned by default.")
    max_files: int = Field(10_000, ge=1)
    max_chars_per_line: int = Field(1000, ge=80)
    timeout_s: float = Field(20.0, gt=0)


class GrepOutput(BaseModel):
    pattern: str
    output_mode: OutputMode
    status: Literal["ok", "no_matches"]
    lines: list[str] = Field(default_factory=list)
    truncated: bool = False
    total_matches: int | None = None
    hint: str = ""

    def model_text(self) -> str:
        if self.status == "no_matches":
            return self.hint
        body = "\n".join(self.lines)
        return f"{body}\n\n{self.hint}" if self.hint else body


class Grep(Tool[GrepArgs, GrepOutput]):
    id = "grep"
    kind = ToolKind.SEARCH
    description_template = (
        "Search file contents with a regular expression (ripgrep). Respects .gitignore. "
        "`${{ params.search.output_mode }}` picks matching lines (`content`, with line numbers), "
        "file paths (`files_with_matches`) or per-file counts (`count`). Filter files with "
        "`${{ params.search.glob }}` or `${{ params.search.type }}`; narrow big results with "
        "`${{ params.search.head_limit }}`."
    )
    params_model = GrepParams
    variant_family = "file_tools"

    def run(self, ctx: ToolContext, args: GrepArgs) -> GrepOutput:
        ws = ctx.container.require(Workspace)
        params = ctx.container.get_or_default(Params[GrepParams])
        target = ws.resolve(args.path)
        if not target.exists():
            raise ToolError.invalid_arguments(f"path `{args.path}` does not exist")
        content = args.output_mode == "content"
        default, cap = (
            (params.default_lines, params.max_lines)
            if content
            else (params.default_files, params.max_files)
        )
        limit = min(args.head_limit or default, cap)
        rg_args = [
            *_BASE_ARGS,
            f"--max-columns={params.max_chars_per_line}",
            "--max-columns-preview",
        ]
        if content:
            rg_args += ["--line-number", "--no-heading", "--with-filename"]
            if args.context:
                rg_args.append(f"--context={args.context}")
        else:
            rg_args.append("--files-with-matches" if args.output_mode != "count" else "--count")
            rg_args.append("--with-filename")
        if args.case_insensitive:
            rg_args.append("--ignore-case")
        if args.type:
            rg_args += ["--type", args.type]
        rg = ctx.container.get_or_default(Ripgrep)
        scope = [target]
        if args.glob:
            plan = plan_glob(args.glob)
            if plan.prefix:
                scope = [ws.resolve(target / plan.prefix)]
            if plan.overrides_ignores:
                scope = _glob_candidates(ctx, rg, ws, target, plan, params.timeout_s)
            else:
                rg_args += plan.rg_args
        scope = [p for p in scope if p.exists()]
        if not scope:
            where = "" if args.path in ("", ".") else f" in {args.path}"
            return GrepOutput(
                pattern=args.pattern,
                output_mode=args.output_mode,
                status="no_matches",
                hint=f"No files match `{args.glob}`{where}.",
            )
        rg_args += ["--", args.pattern, *(a for p in scope for a in _scope(ws, p))]
        result = rg.run(
            rg_args, cwd=ws.root, max_lines=limit, timeout_s=params.timeout_s, cancel=ctx.cancel
        )
        ctx.cancel.raise_if_cancelled()
        return _grep_output(ctx, args, result, limit, params)


def _grep_output(
    ctx: ToolContext, args: GrepArgs, result: RgResult, limit: int, params: GrepParams
) -> GrepOutput:
    if result.exit_code == 2 and not result.lines:
        problem = result.stderr.strip() or "ripgrep failed"
        raise ToolError.invalid_arguments(f"grep failed: {problem}")
    lines = result.lines if args.output_mode == "content" else sorted(result.lines)
    if not lines:
        where = "" if args.path in ("", ".") else f" in {args.path}"
        return GrepOutput(
            pattern=args.pattern,
            output_mode=args.output_mode,
            status="no_matches",
            hint=f"No matches for `{args.pattern}`{where}.",
        )
    total = None
    if args.output_mode == "count":
        counts = (line.rsplit(":", 1)[-1] for line in lines)
        total = sum(int(c) for c in counts if c.isdigit())
    notes: list[str] = []
    if result.stopped_early:
        what = "lines" if args.output_mode == "content" else "files"
        cap = params.max_lines if args.output_mode == "content" else params.max_files
        notes.append(
            f"[Showing the first {limit} {what}; there are more. Narrow the pattern, path or "
            f"`{ctx.param_name('glob')}`, or raise `{ctx.param_name('head_limit')}` (max {cap}).]"
        )
    if result.timed_out:
        notes.append(f"[Search stopped after {params.timeout_s:g} s; results are partial.]")
    if result.exit_code == 2:
        notes.append(f"[Some files could not be searched: {result.stderr.strip()[:500]}]")
    return GrepOutput(
        pattern=args.pattern,
        output_mode=args.output_mode,
        status="ok",
        lines=lines,
        truncated=result.stopped_early or result.timed_out,
        total_matches=total,
        hint="\n".join(notes),
    )


class GlobArgs(BaseModel):
    pattern: str = Field(
        description="Glob for file paths, e.g. `*.py` (any depth) or `src/**/*.ts`."
    )
    path: str = Field(".", description="Directory to search in (default: the workspace).")


class GlobParams(BaseModel):
    max_results: int = Field(200, ge=1)
    timeout_s: float = Field(20.0, gt=0)


class GlobOutput(BaseModel):
    pattern: str
    files: list[str] = Field(default_factory=list)
    truncated: bool = False
    hint: str = ""

    def model_text(self) -> str:
        if not self.files:
            return self.hint
        body = "\n".join(self.files)
        return f"{body}\n\n{self.hint}" if self.hint else body


class Glob(Tool[GlobArgs, GlobOutput]):
    id = "glob"
    kind = ToolKind.SEARCH
    description_template = (
        "Find files by name with a glob pattern (`*.py` matches at any depth, `src/**/*.ts` under "
        "src). Respects .gitignore. Most recently modified files come first."
    )
    params_model = GlobParams

    def run(self, ctx: ToolContext, args: GlobArgs) -> GlobOutput:
        ws = ctx.container.require(Workspace)
        params = ctx.container.get_or_default(Params[GlobParams])
        target = ws.resolve(args.path)
        if not target.is_dir():
            raise ToolError.invalid_arguments(f"`{args.path}` is not a directory")
        plan = plan_glob(args.pattern)
        root = ws.resolve(target / plan.prefix) if plan.prefix else target
        lines: list[str] = []
        stopped = timed_out = False
        if root.is_dir():
            result = ctx.container.get_or_default(Ripgrep).run(
                [*_BASE_ARGS, "--files", *plan.rg_args, "--", *_scope(ws, root)],
                cwd=ws.root,
                max_lines=MTIME_SORT_LIMIT,
                timeout_s=params.timeout_s,
                cancel=ctx.cancel,
            )
            ctx.cancel.raise_if_cancelled()
            if result.exit_code == 2 and not result.lines:
                raise ToolError.invalid_arguments(f"glob failed: {result.stderr.strip()}")
            lines, stopped = result.lines, result.stopped_early or result.timed_out
            timed_out = result.timed_out
            if plan.overrides_ignores:
                lines = _not_ignored(ws.root, lines)
        files = _newest_first(ws.root, lines)
        partial = (
            f"[The listing stopped after {params.timeout_s:g} s; results are partial.]"
            if timed_out
            else ""
        )
        if not files:
            empty = f"No files match `{args.pattern}`."
            return GlobOutput(
                pattern=args.pattern, truncated=timed_out, hint=f"{empty} {partial}".strip()
            )
        truncated = len(files) > params.max_results or stopped
        hint = partial
        if truncated and not timed_out:
            hint = (
                f"[Showing {params.max_results} of {'at least ' if stopped else ''}"
                f"{len(files)} files. Use a narrower pattern or path.]"
            )
        return GlobOutput(
            pattern=args.pattern, files=files[: params.max_results], truncated=truncated, hint=hint
        )


@dataclass(frozen=True, slots=True)
class GlobPlan:
    """How to ask rg for a glob without letting it override .gitignore.

    rg's ``--glob`` whitelists what it matches even when .gitignore excludes it (a ``*.py``
    glob would search a whole virtualenv). A file-name glob becomes a custom rg *type*, which
    ignore rules still filter; a glob with a literal directory part searches that directory.
    Only globs with wildcards in directory names fall back to ``--glob`` (and the caller
    re-applies the ignore rules where it can).
    """

    prefix: str
    rg_args: list[str]
    overrides_ignores: bool = False


def plan_glob(pattern: str) -> GlobPlan:
    pattern = pattern.strip().removeprefix("./")
    if pattern.startswith("!"):
        return GlobPlan("", ["--glob", pattern])
    segments = pattern.split("/")
    literal: list[str] = []
    while len(segments) > 1 and not _GLOB_CHARS.intersection(segments[0]):
        literal.append(segments.pop(0))
    rest = "/".join(segments)
    prefix = "/".join(literal)
    if "/" not in rest:
        depth = ["--max-depth", "1"] if literal else []
        return GlobPlan(prefix, [*_type_args(rest), *depth])
    if rest.startswith("**/") and "/" not in rest[3:]:
        return GlobPlan(prefix, _type_args(rest[3:]))
    return GlobPlan("", ["--glob", pattern], overrides_ignores=True)


def _glob_candidates(
    ctx: ToolContext, rg: Ripgrep, ws: Workspace, target: Path, plan: GlobPlan, timeout_s: float
) -> list[Path]:
    """The files a directory-wildcard glob selects, minus ignored ones: searched explicitly,
    since explicit paths are the one way to scope rg without ``--glob`` overriding ignores."""
    listed = rg.run(
        [*_BASE_ARGS, "--files", *plan.rg_args, "--", *_scope(ws, target)],
        cwd=ws.root,
        max_lines=MAX_GLOB_CANDIDATES,
        timeout_s=timeout_s,
        cancel=ctx.cancel,
    )
    return [ws.root / name for name in _not_ignored(ws.root, listed.lines)]


def _type_args(name_glob: str) -> list[str]:
    return [f"--type-add={_GLOB_TYPE}:{name_glob}", f"--type={_GLOB_TYPE}"]


def _not_ignored(root: Path, files: list[str]) -> list[str]:
    rules: dict[Path, IgnoreRules] = {}
    kept: list[str] = []
    for name in files:
        path = root / name
        folder = path.parent
        if folder not in rules:
            rules[folder] = IgnoreRules.for_directory(root, folder)
        if not rules[folder].ignored(path, is_dir=False):
            kept.append(name)
    return kept


def _scope(ws: Workspace, target: Path) -> list[str]:
    """The path argument for rg. None for the root: rg then prints paths without `./`."""
    return [] if target == ws.root else [ws.display(target)]


def _newest_first(root: Path, files: list[str]) -> list[str]:
    def mtime(name: str) -> float:
        try:
            return os.stat(root / name).st_mtime
        except OSError:
            return 0.0

    return sorted(files, key=lambda name: (-mtime(name), name))


TOOLS: list[type[Tool[Any, Any]]] = [Grep, Glob]
