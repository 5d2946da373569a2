"""``beneath`` and the ``Workspace`` I/O built on it: paths opened strictly below the root, no
symlink followed, with ``openat2`` and with the ``O_NOFOLLOW`` walk that replaces it (every
test runs both); FIFOs never block; malformed paths are short ``invalid_arguments``."""

from __future__ import annotations

import errno
import os
import platform
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolhub.backends import beneath
from toolhub.backends.beneath import DIR_FLAGS, EscapeError, open_beneath, open_dir
from toolhub.backends.workspace import SpecialFileError, Workspace
from toolhub.core import ErrorKind, ToolError


@pytest.fixture(params=["openat2", "walk"])
def resolver(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "openat2" and beneath.openat2 is None:
        pytest.skip("this kernel has no openat2")
    if request.param == "walk":
        monkeypatch.setattr(beneath, "openat2", None)
    return str(request.param)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """``ws/`` with a file, a subdirectory, links inside (relative and absolute) and out."""
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d/f.txt").write_text("inside")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside/f.txt").write_text("outside")
    (ws / "rel").symlink_to("d")
    (ws / "abs").symlink_to(ws / "d")
    (ws / "out").symlink_to("../outside")
    return ws


@pytest.fixture
def root_fd(tree: Path) -> Iterator[int]:
    fd = os.open(tree, DIR_FLAGS)
    yield fd
    os.close(fd)


def read(fd: int) -> bytes:
    try:
        return os.read(fd, 100)
    finally:
        os.close(fd)


def test_openat2_is_used_where_the_kernel_has_it() -> None:
    release = tuple(int(n) for n in platform.release().split(".")[:2] if n.isdigit())
    if platform.system() != "Linux" or platform.machine() not in ("x86_64", "aarch64"):
        pytest.skip("openat2 is only called on Linux x86_64 and aarch64")
    if release < (5, 6):
        pytest.skip("openat2 came with Linux 5.6")
    assert beneath.openat2 is not None


def test_an_unknown_system_call_falls_back_to_the_walk(monkeypatch: pytest.MonkeyPatch) -> None:
    """ENOSYS (here: a call number no kernel has) at the probe means the walk is used."""
    monkeypatch.setattr(beneath, "_SYS_OPENAT2", {platform.machine(): 100_000})
    assert beneath._load_openat2() is None
    monkeypatch.setattr(beneath, "_SYS_OPENAT2", {})
    assert beneath._load_openat2() is None


@pytest.mark.usefixtures("resolver")
def test_plain_paths_open(root_fd: int) -> None:
    assert read(open_beneath(root_fd, ("d", "f.txt"), os.O_RDONLY)) == b"inside"
    fd = open_dir(root_fd, ("d",))
    assert sorted(os.listdir(fd)) == ["f.txt"]
    os.close(fd)
    fd = open_dir(root_fd, ())
    assert "d" in os.listdir(fd)
    os.close(fd)


@pytest.mark.usefixtures("resolver")
@pytest.mark.parametrize(
    "parts",
    [("out", "f.txt"), ("rel", "f.txt"), ("abs", "f.txt"), ("..", "outside", "f.txt"), ("out",)],
)
def test_no_symlink_and_no_dotdot_is_followed(root_fd: int, parts: tuple[str, ...]) -> None:
    """Even a link that stays inside is refused: callers pass paths with links resolved, so a
    link met here is one swapped in after the check."""
    with pytest.raises(EscapeError):
        os.close(open_beneath(root_fd, parts, os.O_RDONLY))
    with pytest.raises(EscapeError):
        os.close(open_dir(root_fd, parts))


@pytest.mark.usefixtures("resolver")
def test_open_dir_creates_missing_directories_but_never_through_a_link(
    root_fd: int, tree: Path
) -> None:
    os.close(open_dir(root_fd, ("new", "deeper"), create=True))
    assert (tree / "new/deeper").is_dir()
    with pytest.raises(EscapeError):
        open_dir(root_fd, ("out", "made"), create=True)
    assert not (tree.parent / "outside/made").exists()
    (tree / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        open_dir(root_fd, ("file", "sub"), create=True)


@pytest.mark.usefixtures("resolver")
def test_workspace_io_refuses_a_link_that_appeared_after_the_check(tree: Path) -> None:
    ws = Workspace(tree)
    checked = ws.resolve("d/f.txt")
    os.rename(tree / "d", tree / "d.away")
    (tree / "d").symlink_to("../outside")  # the swap, between resolve and use
    for use in (
        lambda: ws.open_read(checked),
        lambda: ws.write(checked, b"pwned"),
        lambda: ws.remove(checked),
        lambda: ws.move(checked, tree / "moved.txt"),
        lambda: ws.entries(checked.parent, limit=10),
    ):
        with pytest.raises(ToolError) as err:
            use()
        assert err.value.kind is ErrorKind.PERMISSION_DENIED
        assert "appeared on its way" in err.value.detail
    assert (tree.parent / "outside/f.txt").read_text() == "outside"
    assert sorted(p.name for p in (tree.parent / "outside").iterdir()) == ["f.txt"]


@pytest.mark.usefixtures("resolver")
def test_a_fifo_is_refused_without_blocking(tree: Path) -> None:
    ws = Workspace(tree)
    os.mkfifo(tree / "pipe")
    started = time.monotonic()
    with pytest.raises(SpecialFileError) as err:
        ws.open_read(ws.resolve("pipe"))
    assert "FIFO" in str(err.value)
    with pytest.raises(SpecialFileError):
        ws.read_bytes(ws.resolve("pipe"), limit=100)
    assert time.monotonic() - started < 1
    assert ws.kind(ws.resolve("pipe")) == "other"
    with pytest.raises(IsADirectoryError):
        ws.open_read(ws.resolve("d"))
    with pytest.raises(FileNotFoundError):
        ws.open_read(ws.resolve("d/f.txt/below"))


@pytest.mark.usefixtures("resolver")
def test_atomic_write_keeps_mode_and_leaves_no_temp_on_failure(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = Workspace(tree)
    script = tree / "d/run.sh"
    script.write_text("old")
    script.chmod(0o751)
    assert ws.write(script, b"new") is False
    assert script.read_text() == "new" and script.stat().st_mode & 0o777 == 0o751
    assert ws.write(tree / "a/b/c.txt", b"made") is True
    assert (tree / "a/b/c.txt").read_text() == "made"

    def full_disk(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError):
        ws.write(script, b"half")
    assert script.read_text() == "new"
    assert sorted(p.name for p in (tree / "d").iterdir()) == ["f.txt", "run.sh"]


@pytest.mark.usefixtures("resolver")
def test_entries_never_follow_and_stop_at_the_limit(tree: Path) -> None:
    ws = Workspace(tree)
    found, more = ws.entries(tree, limit=100)
    kinds = {e.name: (e.kind, e.target) for e in found}
    assert kinds["d"] == ("dir", None)
    assert kinds["out"] == ("link", "../outside")
    assert not more
    found, more = ws.entries(tree, limit=2)
    assert len(found) == 2 and more


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("a\0b", "NUL byte"),
        ("x" * 5000, "over the 4096-byte limit"),
        ("x" * 1_000_000, "over the 4096-byte limit"),
        ("d/" + "y" * 300, "over the 255-byte limit"),
        ("bad\udcff\ud800", "not valid Unicode"),
    ],
)
def test_malformed_paths_are_short_invalid_arguments(tree: Path, path: str, fragment: str) -> None:
    ws = Workspace(tree)
    for resolve in (ws.resolve, ws.resolve_entry):
        with pytest.raises(ToolError) as err:
            resolve(path)
        assert err.value.kind is ErrorKind.INVALID_ARGUMENTS
        assert fragment in err.value.detail
        assert len(err.value.detail) < 300, err.value.detail
        assert "\0" not in err.value.detail


def test_an_escape_echoes_a_truncated_path(tree: Path) -> None:
    ws = Workspace(tree)
    with pytest.raises(ToolError) as err:
        ws.resolve("../" + "z" * 250 + "/" + "q" * 250)
    assert err.value.kind is ErrorKind.PERMISSION_DENIED
    assert len(err.value.detail) < 300 + len(str(tree))
    assert err.value.details is not None and len(err.value.details["path"]) < 200
