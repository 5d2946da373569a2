"""The ``disk`` fault scenario (``bench/chaos_fault_disk.py``), bounded: a real worker whose
``TOOLHUB_HOME`` is a 2 MiB tmpfs, a few calls printing 1 MB beside ordinary ones. Every call is
answered (right, or with a typed error saying what ran and what was lost), none wrongly; once
the logs are deleted the same worker answers new calls right. Skipped where a tmpfs cannot be
mounted."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.chaos_fault_disk import Load, run
from bench.chaos_faults import table


def test_a_full_disk_gets_typed_answers_and_the_worker_recovers(tmp_path: Path) -> None:
    load = Load(
        workers=1,
        disk="2m",
        big_calls=5,
        ordinary_calls=3,
        after_calls=4,
        after_bytes=50_000,
        hung_after_s=45.0,
    )
    verdict = run(tmp_path, print, load)
    if "skipped" in verdict.rows:
        pytest.skip(str(verdict.rows["skipped"]))
    assert not verdict.missed, table([verdict])
    assert verdict.rows["full disk: typed errors (what ran, what was lost)"] > 0
