"""Memory tools: ``memory_search`` (BM25 over the workspace's markdown memory files) and
``memory_get`` (read part of one of them).

Memory is plain markdown the agent and its user keep in the workspace (``MEMORY.md``,
``memory/**/*.md`` by default). Files are cut into paragraph-sized chunks (each carrying its
nearest heading, so a hit under "## Deploy" matches "deploy"), indexed with ``bm25s``, and the
index is rebuilt only when a file changed. Both tools only read, and only memory files.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolhub.backends.workspace import Workspace

if TYPE_CHECKING:
    import bm25s
from toolhub.core import Params, Tool, ToolContext, ToolError, ToolKind


class MemoryParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    globs: list[str] = Field(
        default_factory=lambda: ["MEMORY.md", "memory/**/*.md"],
        description="Workspace globs of the memory files.",
    )
    default_results: int = Field(5, ge=1, le=50)
    min_score: float = Field(0.0, ge=0, description="Hits scoring at or below this are dropped.")
    chunk_lines: int = Field(12, ge=1, description="Longest chunk, in lines.")
    snippet_chars: int = Field(700, ge=50)
    max_get_lines: int = Field(400, ge=1)

    @field_validator("globs")
    @classmethod
    def _relative(cls, globs: list[str]) -> list[str]:
        """Memory lives in the workspace: patterns are relative and never climb out of it."""
        for pattern in globs:
            if not pattern or pattern.startswith(("/", "~")) or ".." in pattern.split("/"):
                raise ValueError(f"`{pattern}` is not a workspace-relative glob")
        return globs


def memory_files(workspace: Workspace, globs: list[str]) -> list[Path]:
    """The memory files, sorted; matches that resolve outside the workspace are ignored."""
    found: set[Path] = set()
    for pattern in globs:
        for match in workspace.root.glob(pattern):
            real = match.resolve()
            if workspace.contains(real) and real.is_file():
                found.add(real)
    return sorted(found)


@dataclass(frozen=True, slots=True)
class Chunk:
    path: Path
    start: int
    end: int
    heading: str
    text: str


def chunks_of(path: Path, max_lines: int) -> list[Chunk]:
    """Paragraphs (runs of non-blank lines, a heading starts a new one), at most ``max_lines``
    long, 1-based line numbers."""
    out: list[Chunk] = []
    heading = ""
    block: list[tuple[int, str]] = []

    def flush() -> None:
        if block:
            text = "\n".join(line for _, line in block)
            out.append(Chunk(path, block[0][0], block[-1][0], heading, text))
            block.clear()

    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("#"):
            flush()
            heading = line.lstrip("# ").strip()
        if not line.strip():
            flush()
            continue
        block.append((number, line))
        if len(block) >= max_lines:
            flush()
    flush()
    return out


class MemoryIndex:
    """The BM25 index of the memory chunks, rebuilt when any file's size or mtime changed.
    A container resource shared by the session's calls (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._signature: tuple[tuple[str, int, int], ...] | None = None
        self._chunks: list[Chunk] = []
        self._bm25: bm25s.BM25 | None = None

    def search(
        self, files: list[Path], query: str, k: int, chunk_lines: int
    ) -> list[tuple[Chunk, float]]:
        with self._lock:
            self._refresh(files, chunk_lines)
            if self._bm25 is None or not self._chunks:
                return []
            import bm25s  # numpy and bm25s load at the first search, not at every process start

            tokens = bm25s.tokenize([query], stopwords="en", return_ids=False, show_progress=False)
            if not tokens[0]:
                return []
            docs, scores = self._bm25.retrieve(
                tokens, k=min(k, len(self._chunks)), show_progress=False
            )
            return [
                (self._chunks[int(d)], float(s)) for d, s in zip(docs[0], scores[0], strict=True)
            ]

    def _refresh(self, files: list[Path], chunk_lines: int) -> None:
        stats = [(str(p), (st := p.stat()).st_mtime_ns, st.st_size) for p in files]
        signature = (*stats, ("", chunk_lines, 0))
        if signature == self._signature:
            return
        self._chunks = [c for path in files for c in chunks_of(path, chunk_lines)]
        corpus = [f"{c.heading}\n{c.text}" for c in self._chunks]
        self._bm25 = None
        if corpus:
            import bm25s

            bm25 = bm25s.BM25()
            bm25.index(
                bm25s.tokenize(corpus, stopwords="en", show_progress=False), show_progress=False
            )
            self._bm25 = bm25
        self._signature = signature


# -- memory_search ---------------------------------------------------------------------------------


class MemorySearchArgs(BaseModel):
    query: str = Field(min_length=1, description="What to look for in memory.")
    max_results: int | None = Field(None, ge=1, le=50)


class MemoryHit(BaseModel):
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str


class MemorySearchOutput(BaseModel):
    query: str
    results: list[MemoryHit]
    files_searched: int

    def model_text(self) -> str:
        if self.files_searched == 0:
            return "There are no memory files in this workspace yet."
        if not self.results:
            return f'No memory matches "{self.query}" ({self.files_searched} file(s) searched).'
        parts = [
            f"{h.path}:{h.start_line}-{h.end_line} (score {h.score:.2f})\n{h.snippet}"
            for h in self.results
        ]
        return "\n\n".join(parts)


class MemorySearch(Tool[MemorySearchArgs, MemorySearchOutput]):
    id = "memory_search"
    kind = ToolKind.MEMORY_SEARCH
    params_model = MemoryParams
    description_template = (
        "Search the project's memory notes (MEMORY.md and memory/*.md) for what was learned or "
        "decided before. Returns ranked passages with their file and line range; `memory_get` "
        "reads more around a hit."
    )

    def run(self, ctx: ToolContext, args: MemorySearchArgs) -> MemorySearchOutput:
        params = ctx.container.get_or_default(Params[MemoryParams])
        workspace = ctx.container.require(Workspace)
        files = memory_files(workspace, params.globs)
        index = ctx.container.get_or_default(MemoryIndex)
        wanted = args.max_results or params.default_results
        hits = index.search(files, args.query, wanted, params.chunk_lines)
        return MemorySearchOutput(
            query=args.query,
            files_searched=len(files),
            results=[
                MemoryHit(
                    path=workspace.display(chunk.path),
                    start_line=chunk.start,
                    end_line=chunk.end,
                    score=round(score, 4),
                    snippet=chunk.text[: params.snippet_chars],
                )
                for chunk, score in hits
                if score > params.min_score
            ],
        )


# -- memory_get ------------------------------------------------------------------------------------


class MemoryGetArgs(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    path: str = Field(description="A memory file, e.g. MEMORY.md or memory/decisions.md.")
    from_line: int | None = Field(None, alias="from", ge=1, description="First line (1-based).")
    lines: int | None = Field(None, ge=1, description="How many lines to read.")


class MemoryGetOutput(BaseModel):
    path: str
    from_line: int
    to_line: int
    total_lines: int
    text: str

    def model_text(self) -> str:
        if self.total_lines == 0:
            return f"{self.path} is empty."
        if self.from_line > self.total_lines:
            return f"{self.path} has only {self.total_lines} lines."
        head = f"{self.path} lines {self.from_line}-{self.to_line} of {self.total_lines}:"
        return f"{head}\n{self.text}"


class MemoryGet(Tool[MemoryGetArgs, MemoryGetOutput]):
    id = "memory_get"
    kind = ToolKind.MEMORY_SEARCH
    params_model = MemoryParams
    description_template = (
        "Read lines of one memory file, e.g. around a memory search hit: "
        "`${{ params.memory_search.path }}`, optional `${{ params.memory_search.from }}` "
        "(1-based line) and `${{ params.memory_search.lines }}`."
    )

    def run(self, ctx: ToolContext, args: MemoryGetArgs) -> MemoryGetOutput:
        params = ctx.container.get_or_default(Params[MemoryParams])
        workspace = ctx.container.require(Workspace)
        path = workspace.resolve(args.path)
        if path not in memory_files(workspace, params.globs):
            if not path.is_file():
                raise ToolError.not_found(f"memory file `{args.path}` does not exist")
            raise ToolError.invalid_arguments(
                f"`{args.path}` is not a memory file "
                f"(memory files match: {', '.join(params.globs)})"
            )
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        start = args.from_line or 1
        count = min(args.lines or params.max_get_lines, params.max_get_lines)
        shown = lines[start - 1 : start - 1 + count]
        return MemoryGetOutput(
            path=workspace.display(path),
            from_line=start,
            to_line=start + len(shown) - 1,
            total_lines=len(lines),
            text="\n".join(f"{n:>6}\t{line}" for n, line in enumerate(shown, start)),
        )


TOOLS: list[type[Tool[Any, Any]]] = [MemorySearch, MemoryGet]
