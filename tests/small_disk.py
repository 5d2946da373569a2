"""A small real disk for tests of full-disk behaviour: a tmpfs mounted in the test's directory
(``mount -t tmpfs -o size=...``), filled or not by the test, unmounted at the end. Where mounting
is refused (not root, no mount namespace rights) the test is skipped, never faked."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk(path: Path, size: str = "256k", inodes: int | None = None) -> Iterator[Path]:
    """``path`` as a tmpfs of ``size`` (and at most ``inodes`` files and directories, the
    root included: a disk where nothing new can be created), for the block."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (f",nr_inodes={inodes}" if inodes else "")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(disk: Path) -> None:
    """Fill ``disk`` to its last byte."""
    with open(disk / "filler", "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 65536)
        except OSError:
            pass
    with open(disk / "filler-tail", "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0")
        except OSError:
            pass


def free_bytes(disk: Path) -> int:
    stat = os.statvfs(disk)
    return stat.f_bavail * stat.f_frsize
