"""``workers/lifecycle/healthcheck.py`` (with ``heartbeat.py``): the probe the chart and compose
file rely on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.deploy.deploy_helpers import REPO
from workers.lifecycle import healthcheck, heartbeat


def age(path: Path, seconds: float) -> None:
    """Make ``path`` look ``seconds`` old."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_fresh_ready_heartbeat_is_healthy_and_ready(tmp_path: Path) -> None:
    hb = tmp_path / "hb"
    heartbeat.beat(str(hb))
    assert hb.read_text() == "ready"
    assert healthcheck.main(["--file", str(hb)]) == 0
    assert healthcheck.main(["--file", str(hb), "--ready"]) == 0


def test_stale_heartbeat_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hb = tmp_path / "hb"
    heartbeat.beat(str(hb))
    age(hb, 120)
    assert healthcheck.main(["--file", str(hb), "--max-age", "60"]) == 1
    assert "stale" in capsys.readouterr().err
    assert healthcheck.main(["--file", str(hb), "--max-age", "300"]) == 0


def test_missing_heartbeat_fails(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert healthcheck.main(["--file", str(tmp_path / "nope")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_starting_worker_is_alive_but_not_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hb = tmp_path / "hb"
    heartbeat.beat(str(hb), state="starting")
    assert healthcheck.main(["--file", str(hb)]) == 0
    assert healthcheck.main(["--file", str(hb), "--ready"]) == 1
    assert "'starting'" in capsys.readouterr().err
    heartbeat.beat(str(hb), state="stopping")
    assert healthcheck.main(["--file", str(hb), "--ready"]) == 1


def test_beat_refreshes_mtime_atomically_and_leaves_no_temp_files(tmp_path: Path) -> None:
    hb = tmp_path / "sub" / "hb"
    heartbeat.beat(str(hb), state="starting")
    age(hb, 500)
    heartbeat.beat(str(hb))
    assert time.time() - hb.stat().st_mtime < 5
    assert hb.read_text() == "ready"
    assert sorted(p.name for p in hb.parent.iterdir()) == ["hb"]


def test_beat_rejects_unknown_states(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown heartbeat state"):
        heartbeat.beat(str(tmp_path / "hb"), state="Ready")
    assert not (tmp_path / "hb").exists()


def test_default_path_comes_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(heartbeat.ENV_VAR, raising=False)
    assert heartbeat.default_path() == "/tmp/toolhub-worker.heartbeat"
    hb = tmp_path / "env-hb"
    monkeypatch.setenv(heartbeat.ENV_VAR, str(hb))
    assert healthcheck.main([]) == 1
    heartbeat.beat()
    assert hb.read_text() == "ready"
    assert healthcheck.main(["--ready"]) == 0


def test_bad_max_age_is_refused(tmp_path: Path) -> None:
    hb = tmp_path / "hb"
    heartbeat.beat(str(hb))
    assert healthcheck.main(["--file", str(hb), "--max-age", "0"]) == 1


def test_module_runs_as_a_cheap_probe(tmp_path: Path) -> None:
    """`python -m workers.lifecycle.healthcheck` works and imports neither Celery nor toolhub."""
    hb = tmp_path / "hb"
    heartbeat.beat(str(hb), state="starting")
    env = {**os.environ, "PYTHONPATH": str(REPO), heartbeat.ENV_VAR: str(hb)}
    probe = [sys.executable, "-m", "workers.lifecycle.healthcheck", "--max-age", "60"]
    assert subprocess.run(probe, env=env, cwd=tmp_path, timeout=30).returncode == 0
    not_ready = subprocess.run(
        [*probe, "--ready"], env=env, cwd=tmp_path, timeout=30, capture_output=True, text=True
    )
    assert not_ready.returncode == 1 and "not ready" in not_ready.stderr
    code = (
        "import sys, runpy; sys.argv = ['x', '--max-age', '60']\n"
        "try:\n    runpy.run_module('workers.lifecycle.healthcheck', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'celery', 'kombu', "
        "'toolhub', 'redis', 'pydantic'})\nprint(heavy)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tmp_path,
        timeout=30,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "[]", f"the probe imports heavy modules: {out.stdout}"
