"""The holder warmer backs off while no holder can start: a host with an unwritable
``TOOLHUB_HOME`` must not spawn a doomed process every few seconds. (Keeping a live holder is
``test_server.py::test_a_worker_keeps_its_host_holder_started_and_lets_it_go_when_it_dies``.)"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from toolhub.distributed.settings import Settings
from workers.holder.warmer import MAX_BACKOFF_S, HolderWarmer


def test_failed_keeps_double_the_wait_up_to_the_cap_and_warn_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLHUB_HOLDER_IDLE_SECONDS", "30")
    home = tmp_path / "home"
    home.write_text("a file where the holder's directory should be")
    warmer = HolderWarmer(Settings.from_env("redis://127.0.0.1:9/0"), home=home)
    with caplog.at_level(logging.WARNING, logger="toolhub.worker.holder"):
        waits = [warmer.tick() for _ in range(7)]
    assert waits == [20.0, 40.0, 80.0, 160.0, MAX_BACKOFF_S, MAX_BACKOFF_S, MAX_BACKOFF_S]
    said = [r.getMessage() for r in caplog.records if "no background holder" in r.getMessage()]
    assert len(said) == 1, caplog.text
