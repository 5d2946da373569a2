"""Disk per session (``disk_per_session``: workspace, tmp and logs together), on real files and
real commands through ``bash``: a command that would overrun the quota is stopped by the kernel
(``RLIMIT_FSIZE``), the model reads the typed error saying how full the session is, nothing
already stored is lost, removing files makes room again, and ending a session removes its
logs and tmp."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.helpers import TASK_TOOLS
from tests.tools.harness import Harness
from toolhub import Session
from toolhub.backends.disk_budget import DISK_QUOTA_FULL, DiskBudget, disk_usage
from toolhub.tenancy import POLICY_ENV
from toolhub.tools.shell import Bash

MIB = 1 << 20
QUOTA = 2 * MIB


@pytest.fixture
def full_soon(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(f"quotas:\n  default:\n    disk_per_session: {QUOTA}\n")
    monkeypatch.setenv(POLICY_ENV, str(policy))
    ws = tmp_path / "ws"
    ws.mkdir()
    h = Harness(ws, tmp_path / "session")
    yield h
    for value in h.container.values():
        close = getattr(value, "close", None)
        if callable(close):
            close()


def _bash(h: Harness, command: str):
    return h.call(Bash, {"command": command, "description": "disk"})


def test_usage_counts_allocated_blocks_once_per_inode(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * MIB)
    os.link(tmp_path / "a", tmp_path / "hard")
    with open(tmp_path / "sparse", "wb") as f:
        f.truncate(1 << 30)  # 1 GiB apparent, nothing allocated
    (tmp_path / "loop").symlink_to(tmp_path)
    used = disk_usage([tmp_path])
    assert MIB <= used < 2 * MIB
    budget = DiskBudget([tmp_path], 4 * MIB)
    assert budget.used() == used
    (tmp_path / "b").write_bytes(b"y" * MIB)
    assert budget.used() == used, "cached until invalidated"
    budget.invalidate()
    assert budget.used() >= used + MIB


def test_a_full_quota_gives_the_typed_error_and_loses_nothing(full_soon: Harness) -> None:
    ws = full_soon.root
    assert _bash(full_soon, "head -c 1200000 /dev/zero > keep.bin").error is None
    over = _bash(full_soon, "head -c 3000000 /dev/zero > big.bin")
    assert over.error is not None and over.error.details["code"] == DISK_QUOTA_FULL
    assert over.error.details["limit"] == QUOTA and over.error.details["used"] >= QUOTA
    assert over.error.detail.startswith("disk quota of this session is full: ")
    assert f"of {QUOTA} bytes used" in over.error.detail
    # The kernel stopped the file at what was left; what was stored before is whole.
    assert (ws / "big.bin").stat().st_size < 3000000
    assert (ws / "keep.bin").read_bytes() == b"\0" * 1200000
    # Full: a write fails with the same error, a command that writes nothing still runs.
    write = "head -c 8192 /dev/zero > small.bin"
    assert _bash(full_soon, write).error.details["code"] == DISK_QUOTA_FULL
    listing = _bash(full_soon, "ls")
    assert listing.error is None and "keep.bin" in listing.output.output
    # Removing files makes room again.
    assert _bash(full_soon, "rm big.bin").error is None
    assert _bash(full_soon, write).error is None
    assert (ws / "small.bin").stat().st_size == 8192


def test_a_background_command_is_refused_while_full(full_soon: Harness) -> None:
    _bash(full_soon, "head -c 3000000 /dev/zero > big.bin")
    refused = full_soon.call(
        Bash, {"command": "sleep 30", "description": "bg", "is_background": True}
    )
    assert refused.error is not None and refused.error.details["code"] == DISK_QUOTA_FULL


def test_ending_a_session_removes_its_logs_and_tmp(tmp_path: Path) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    ws.mkdir()
    session = Session.embedded(TASK_TOOLS, ws, state_dir=state)
    result = session.call_sync("bash", {"command": "echo logged", "description": "log"})
    assert not result.is_error, result.prompt_text
    log = Path(result.output.value["log_path"])
    assert log.is_file() and log.is_relative_to(state)
    (state / "tmp").mkdir(exist_ok=True)
    (state / "tmp" / "scratch").write_text("x")
    (ws / "kept.txt").write_text("mine")
    session.end()
    assert not (state / "terminal").exists() and not (state / "tmp").exists()
    assert (ws / "kept.txt").read_text() == "mine"
