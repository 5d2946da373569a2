"""Host-local secrets: made once, 0600 in a 0700 directory, the same for every process that
asks at once, and a file that holds no secret is never taken for one."""

from __future__ import annotations

import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from workers.holder.local_secrets import local_secret


def test_a_secret_is_made_once_private(tmp_path: Path) -> None:
    path = tmp_path / "holders" / "key.secret"
    first = local_secret(path)
    assert len(first) == 64 and int(first, 16) >= 0
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert local_secret(path) == first
    assert [p.name for p in path.parent.iterdir()] == ["key.secret"]  # no temp file left


def test_makers_racing_end_up_with_one_secret(tmp_path: Path) -> None:
    path = tmp_path / "race" / "key.secret"
    with ThreadPoolExecutor(8) as pool:
        secrets = set(pool.map(lambda _: local_secret(path), range(32)))
    assert secrets == {path.read_text()}


def test_a_file_without_a_secret_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "short.secret"
    path.write_text("tooshort")
    with pytest.raises(OSError, match="holds no secret"):
        local_secret(path)


def test_a_symlink_is_never_followed(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("x" * 64)
    link = tmp_path / "key.secret"
    link.symlink_to(target)
    with pytest.raises(OSError):
        local_secret(link)
