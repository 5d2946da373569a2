"""write_file, delete_file, move_file: atomic writes, parents created, symlinks handled as
links, domain outcomes as outputs, nothing half-written on failure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.tools.harness import Harness, snapshot
from toolhub.backends import workspace as workspace_module
from toolhub.core import ErrorKind
from toolhub.tools.file_ops import DeleteFile, MoveFile, WriteFile


def test_write_creates_parents_and_reports(harness: Harness, ws: Path) -> None:
    res = harness.call(WriteFile, {"path": "a/b/c.txt", "content": "x\ny"})
    assert (ws / "a/b/c.txt").read_text() == "x\ny"
    assert res.output.created and res.output.lines == 2
    res = harness.call(WriteFile, {"path": "a/b/c.txt", "content": "new\n"})
    assert not res.output.created
    assert "Overwrote a/b/c.txt" in res.text


def test_write_keeps_file_mode(harness: Harness, ws: Path) -> None:
    script = ws / "run.sh"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    harness.call(WriteFile, {"path": "run.sh", "content": "#!/bin/sh\necho hi\n"})
    assert os.stat(script).st_mode & 0o777 == 0o755


def test_failed_write_leaves_old_content(
    harness: Harness, ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = ws / "keep.txt"
    target.write_text("original\n")

    def broken_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(workspace_module.os, "fsync", broken_fsync)
    res = harness.call(WriteFile, {"path": "keep.txt", "content": "half" * 1000})
    assert res.error is not None
    assert target.read_text() == "original\n"
    assert sorted(p.name for p in ws.iterdir()) == ["keep.txt"]


def test_write_to_directory_is_invalid(harness: Harness, ws: Path) -> None:
    (ws / "d").mkdir()
    res = harness.call(WriteFile, {"path": "d", "content": "x"})
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS


def test_delete_outcomes(harness: Harness, ws: Path) -> None:
    (ws / "f.txt").write_text("x")
    (ws / "d").mkdir()
    assert harness.call(DeleteFile, {"path": "f.txt"}).output.status == "deleted"
    assert not (ws / "f.txt").exists()
    assert harness.call(DeleteFile, {"path": "f.txt"}).output.status == "not_found"
    assert harness.call(DeleteFile, {"path": "d"}).output.status == "is_directory"
    assert (ws / "d").is_dir()


def test_delete_removes_the_link_not_its_target(harness: Harness, ws: Path) -> None:
    (ws / "real.txt").write_text("keep me")
    (ws / "alias.txt").symlink_to("real.txt")
    res = harness.call(DeleteFile, {"path": "alias.txt"})
    assert res.output.status == "deleted"
    assert not (ws / "alias.txt").is_symlink()
    assert (ws / "real.txt").read_text() == "keep me"


def test_move_renames_and_creates_parents(harness: Harness, ws: Path) -> None:
    (ws / "a.txt").write_text("content")
    res = harness.call(MoveFile, {"source": "a.txt", "destination": "x/y/b.txt"})
    assert res.output.status == "moved"
    assert (ws / "x/y/b.txt").read_text() == "content" and not (ws / "a.txt").exists()


def test_move_never_overwrites(harness: Harness, ws: Path) -> None:
    (ws / "a.txt").write_text("A")
    (ws / "b.txt").write_text("B")
    res = harness.call(MoveFile, {"source": "a.txt", "destination": "b.txt"})
    assert res.output.status == "destination_exists"
    assert (ws / "a.txt").read_text() == "A" and (ws / "b.txt").read_text() == "B"
    res = harness.call(MoveFile, {"source": "nope.txt", "destination": "c.txt"})
    assert res.output.status == "not_found"


def test_move_directory_into_itself_is_invalid(harness: Harness, ws: Path) -> None:
    (ws / "d").mkdir()
    res = harness.call(MoveFile, {"source": "d", "destination": "d/sub"})
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert (ws / "d").is_dir()


def test_mutations_outside_workspace_touch_nothing(
    harness: Harness, ws: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("precious")
    (ws / "link.txt").symlink_to(outside)
    (ws / "inside.txt").write_text("in")
    before = snapshot(tmp_path)
    attempts = [
        (WriteFile, {"path": "../outside.txt", "content": "pwned"}),
        (WriteFile, {"path": str(outside), "content": "pwned"}),
        (WriteFile, {"path": "link.txt", "content": "pwned"}),
        (DeleteFile, {"path": "../outside.txt"}),
        (DeleteFile, {"path": "link.txt"}),
        (MoveFile, {"source": "inside.txt", "destination": "../moved.txt"}),
        (MoveFile, {"source": "link.txt", "destination": "elsewhere.txt"}),
        (MoveFile, {"source": "../outside.txt", "destination": "stolen.txt"}),
    ]
    for tool, args in attempts:
        res = harness.call(tool, args)
        assert res.error is not None, (tool, args)
        assert res.error.kind is ErrorKind.PERMISSION_DENIED, (tool, args, res.error)
    assert snapshot(tmp_path) == before
    assert (ws / "link.txt").is_symlink()
