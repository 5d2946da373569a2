"""memory_search (BM25 over markdown memory) and memory_get, on a real workspace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from tests.tools.servers.drive import call, snapshot
from toolhub.backends.workspace import Workspace
from toolhub.core import Container, ErrorKind, Outcome, Params, ToolContext
from toolhub.tools.memory import (
    MemoryGet,
    MemoryGetOutput,
    MemoryParams,
    MemorySearch,
    MemorySearchOutput,
)

MEMORY = """# Project memory

The gateway listens on port 8000 by default.

## Deploy
We deploy with helm charts to the staging cluster.
Rollbacks use helm rollback.

## People
Alice owns the redis queue configuration.
"""

DECISIONS = """# Decisions

- 2024-03: msgpack instead of pickle for celery messages.
- 2024-04: ripgrep is vendored through the ripgrep wheel.
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory/archive").mkdir(parents=True)
    (root / "MEMORY.md").write_text(MEMORY)
    (root / "memory/decisions.md").write_text(DECISIONS)
    (root / "memory/archive/old.md").write_text("Old note about the legacy celery beat.\n")
    (root / "README.md").write_text("helm helm helm deploy deploy\n")
    return root


def ctx_for(root: Path, **params: Any) -> ToolContext:
    container = Container()
    container.insert(Workspace(root))
    if params:
        container.insert(MemoryParams(**params), Params[MemoryParams])
    return ToolContext(call_id="m1", container=container)


def search(ctx: ToolContext, **args: Any) -> tuple[MemorySearchOutput, Outcome]:
    out = call(MemorySearch(), ctx, args)[1]
    assert out.error is None and out.output is not None, out.error
    return out.output.parse(MemorySearchOutput), out


def get(ctx: ToolContext, **args: Any) -> Outcome:
    return call(MemoryGet(), ctx, args)[1]


def test_search_ranks_passages_with_line_ranges(workspace: Path) -> None:
    found, out = search(ctx_for(workspace), query="how do we deploy with helm?")
    top = found.results[0]
    assert (top.path, top.start_line, top.end_line) == ("MEMORY.md", 5, 7)
    assert "helm charts" in top.snippet and top.score > 0
    assert found.files_searched == 3
    assert all(h.path != "README.md" for h in found.results)
    assert out.text.startswith("MEMORY.md:5-7 (score ")


def test_nested_memory_files_and_max_results(workspace: Path) -> None:
    ctx = ctx_for(workspace)
    found, _ = search(ctx, query="celery", max_results=1)
    assert len(found.results) == 1
    assert found.results[0].path in ("memory/decisions.md", "memory/archive/old.md")
    found, _ = search(ctx, query="celery")
    assert {h.path for h in found.results} == {"memory/decisions.md", "memory/archive/old.md"}


def test_index_follows_file_changes(workspace: Path) -> None:
    ctx = ctx_for(workspace)
    assert search(ctx, query="kubernetes")[0].results == []
    note = workspace / "memory/infra.md"
    note.write_text("We moved to kubernetes in May.\n")
    (hit,) = search(ctx, query="kubernetes")[0].results
    assert hit.path == "memory/infra.md" and hit.start_line == 1


def test_no_memory_and_no_match(tmp_path: Path, workspace: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    found, out = search(ctx_for(empty), query="anything")
    assert found.files_searched == 0 and "no memory files" in out.text
    found, out = search(ctx_for(workspace), query="zebra")
    assert found.results == [] and out.text.startswith('No memory matches "zebra"')


def test_custom_globs(workspace: Path) -> None:
    found, _ = search(ctx_for(workspace, globs=["README.md"]), query="helm")
    assert [h.path for h in found.results] == ["README.md"]


def test_memory_get_reads_a_range(workspace: Path) -> None:
    out = get(ctx_for(workspace), path="MEMORY.md", **{"from": 5, "lines": 2})
    assert out.error is None and out.output is not None
    result = out.output.parse(MemoryGetOutput)
    assert (result.from_line, result.to_line, result.total_lines) == (5, 6, 10)
    assert (
        result.text
        == "     5\t## Deploy\n     6\tWe deploy with helm charts to the staging cluster."
    )
    whole = get(ctx_for(workspace), path="memory/decisions.md")
    assert whole.output is not None and whole.output.parse(MemoryGetOutput).to_line == 4
    past = get(ctx_for(workspace), path="MEMORY.md", **{"from": 50})
    assert past.text == "MEMORY.md has only 10 lines."


def test_bad_input_is_typed_and_harmless(workspace: Path, tmp_path: Path) -> None:
    (tmp_path / "outside.md").write_text("secret")
    (workspace / "memory/escape.md").symlink_to(tmp_path / "outside.md")
    before = snapshot(workspace)
    ctx = ctx_for(workspace)
    cases = [
        (call(MemorySearch(), ctx, {"query": ""})[1], ErrorKind.INVALID_ARGUMENTS),
        (
            call(MemorySearch(), ctx, {"query": "x", "max_results": 0})[1],
            ErrorKind.INVALID_ARGUMENTS,
        ),
        (get(ctx, path="README.md"), ErrorKind.INVALID_ARGUMENTS),
        (get(ctx, path="memory/missing.md"), ErrorKind.NOT_FOUND),
        (get(ctx, path="../outside.md"), ErrorKind.PERMISSION_DENIED),
        (get(ctx, path="memory/escape.md"), ErrorKind.PERMISSION_DENIED),
        (get(ctx, path="MEMORY.md", **{"from": 0}), ErrorKind.INVALID_ARGUMENTS),
    ]
    for out, kind in cases:
        assert out.error is not None and out.error.kind is kind, out.error
    assert all("secret" not in h.snippet for h in search(ctx, query="secret")[0].results)
    assert snapshot(workspace) == before


@pytest.mark.parametrize("pattern", ["/etc/*.md", "../*.md", "memory/../../x.md", "~/notes.md", ""])
def test_globs_must_stay_in_the_workspace(pattern: str) -> None:
    with pytest.raises(ValidationError):
        MemoryParams(globs=[pattern])
