"""``PidsCgroups.reap_stale`` over a directory shaped like a cgroup base: the cgroups of a dead
creator go, a live creator's stay, and each creator's liveness is read once per sweep however
many commands it runs (a worker hosting hundreds of commands sweeps them every quarter lease)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolhub.backends import limits
from toolhub.backends.limits import PidsCgroups


def test_reap_stale_reads_each_owner_once_and_removes_only_the_dead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A pid above the kernel's limit: no process has it, and none can while the test runs.
    gone = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    live = [tmp_path / f"{limits._owner_tag(os.getpid())}-{n}" for n in range(300)]
    dead = [tmp_path / f"toolhub-{gone}-12345-{n}" for n in range(5)]
    older = tmp_path / f"toolhub-{gone}-7"  # the three-part name of earlier releases
    # Names of another shape are not judged, nor taken for an owner of the others.
    other, foreign = tmp_path / "not-ours", tmp_path / f"toolhub-{gone}"
    for path in [*live, *dead, older, other, foreign]:
        path.mkdir()
    reads: list[int] = []
    start_time = limits._start_time

    def counted(pid: int) -> str | None:
        reads.append(pid)
        return start_time(pid)

    monkeypatch.setattr(limits, "_start_time", counted)
    assert PidsCgroups(tmp_path).reap_stale() == 0  # none had processes left in it
    assert sorted(reads) == sorted([os.getpid(), gone, gone])
    assert all(p.is_dir() for p in [*live, other, foreign])
    assert not any(p.exists() for p in [*dead, older])
