"""Hostile input to the file tools (issue 13, item 8): NUL bytes and over-long paths are short
``invalid_arguments`` (no crash, the path echoed truncated), ``list_dir`` keeps its cap for the
directory asked for, and ``edit_file``/``apply_patch`` refuse files too big to hold in memory."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from tests.tools.harness import Harness
from toolhub.core import ErrorKind, Tool
from toolhub.tools.codex import ApplyPatch, CodexListDir, CodexReadFile
from toolhub.tools.edit_file import EditFile, EditFileParams
from toolhub.tools.file_ops import DeleteFile, MoveFile, WriteFile
from toolhub.tools.list_dir import ListDir, ListDirParams
from toolhub.tools.read_file import ReadFile
from toolhub.tools.search import Glob, GlobParams

HOSTILE = {
    "nul": "notes\0.txt",
    "5000 chars": "a/" * 2500,
    "1 MB": "x" * 1_000_000,
    "long name": "d/" + "n" * 300,
}


def calls(path: str) -> list[tuple[type[Tool[Any, Any]], dict[str, Any]]]:
    return [
        (ReadFile, {"path": path}),
        (WriteFile, {"path": path, "content": "x"}),
        (EditFile, {"path": path, "old_string": "a", "new_string": "b"}),
        (DeleteFile, {"path": path}),
        (MoveFile, {"source": path, "destination": "ok.txt"}),
        (MoveFile, {"source": "ok.txt", "destination": path}),
        (ListDir, {"path": path}),
        (CodexReadFile, {"file_path": path}),
        (CodexListDir, {"dir_path": path}),
        (ApplyPatch, {"patch": f"*** Begin Patch\n*** Add File: {path}\n+x\n*** End Patch"}),
    ]


@pytest.mark.parametrize("path", list(HOSTILE.values()), ids=list(HOSTILE))
def test_malformed_paths_are_short_invalid_arguments(harness: Harness, ws: Path, path: str) -> None:
    (ws / "ok.txt").write_text("a")
    for tool, args in calls(path):
        res = harness.call(tool, args)
        assert res.error is not None, (tool.id, res.outcome)
        assert res.error.kind is ErrorKind.INVALID_ARGUMENTS, (tool.id, res.error)
        assert len(res.error.detail) < 300, (tool.id, len(res.error.detail))
        assert "\0" not in res.error.detail and "Error" not in res.error.detail
    assert sorted(p.name for p in ws.iterdir()) == ["ok.txt"]


def test_list_dir_of_60000_files_stays_under_its_cap(harness: Harness, ws: Path) -> None:
    big = ws / "big"
    big.mkdir()
    for n in range(60_000):
        os.close(os.open(big / f"file_{n:05d}.txt", os.O_CREAT | os.O_WRONLY, 0o644))
    res = harness.call(ListDir, {"path": "big"})
    cap = ListDirParams().max_output_chars
    assert len(res.output.tree) <= cap, len(res.output.tree)
    assert res.output.truncated and "capped" in res.text
    shown = res.output.entries
    assert 100 < shown < 60_000
    assert res.output.tree.splitlines()[-1].strip() == f"… {60_000 - shown} more entries"
    assert "big/file_00000.txt" not in res.output.tree and "  file_00000.txt" in res.output.tree


@pytest.mark.parametrize("cap", [200, 1000, 5000])
def test_list_dir_cap_holds_for_any_budget(harness: Harness, ws: Path, cap: int) -> None:
    harness.set_params(ListDirParams(max_output_chars=cap))
    for n in range(400):
        (ws / f"entry-with-a-long-name-{n:04d}").mkdir()
    (ws / "link").symlink_to("x" * 200)
    res = harness.call(ListDir, {"path": ".", "depth": 3})
    assert len(res.output.tree) <= cap and res.output.truncated
    assert "more entries" in res.output.tree


def test_edit_file_refuses_a_file_over_its_limit_without_reading_it(
    harness: Harness, ws: Path
) -> None:
    big = ws / "big.txt"
    with open(big, "wb") as handle:
        handle.truncate(EditFileParams().max_file_bytes + 1)  # sparse: costs no disk
    before = big.stat()
    tracemalloc.start()
    try:
        res = harness.call(EditFile, {"path": "big.txt", "old_string": "a", "new_string": "b"})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert "byte limit" in res.error.detail and len(res.error.detail) < 300
    assert peak < 1_000_000, peak
    assert big.stat().st_size == before.st_size and big.stat().st_mtime == before.st_mtime


def test_edit_file_limit_is_a_parameter(harness: Harness, ws: Path) -> None:
    harness.set_params(EditFileParams(max_file_bytes=100))
    (ws / "small.txt").write_text("a" * 100)
    (ws / "large.txt").write_text("a" * 101)
    args = {"old_string": "a" * 100, "new_string": "b"}
    assert harness.call(EditFile, {"path": "small.txt", **args}).output.status == "applied"
    res = harness.call(EditFile, {"path": "large.txt", **args})
    assert res.error is not None and "101 bytes" in res.error.detail
    assert (ws / "large.txt").read_text() == "a" * 101


def test_apply_patch_refuses_a_file_over_the_limit(harness: Harness, ws: Path) -> None:
    big = ws / "big.txt"
    with open(big, "wb") as handle:
        handle.truncate(EditFileParams().max_file_bytes + 1)
    patch = "*** Begin Patch\n*** Update File: big.txt\n@@\n-a\n+b\n*** End Patch"
    res = harness.call(ApplyPatch, {"patch": patch})
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert big.stat().st_size == EditFileParams().max_file_bytes + 1


def test_a_fifo_named_gitignore_does_not_hang_the_listing_tools(harness: Harness, ws: Path) -> None:
    (ws / "sub").mkdir()
    (ws / "sub" / "kept.txt").write_text("x")
    os.mkfifo(ws / "sub" / ".gitignore")
    os.mkfifo(ws / ".gitignore")
    listed = harness.call(ListDir, {"path": ".", "depth": 3})
    assert "kept.txt" in listed.output.tree
    codex = harness.call(CodexListDir, {"dir_path": str(ws), "depth": 3})
    assert "kept.txt" in codex.text
    # ripgrep itself opens ignore files and blocks on a FIFO: glob is bounded by its timeout
    # and says its answer is partial instead of claiming that nothing matches.
    harness.set_params(GlobParams(timeout_s=1))
    globbed = harness.call(Glob, {"pattern": "**/*.txt"})
    assert globbed.output.truncated and "stopped after 1 s" in globbed.text, globbed.text
