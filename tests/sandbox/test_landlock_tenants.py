"""Escape 5 and ``/dev/shm``. Landlock cannot hide other processes' command lines and
environments, so it runs commands only for sessions of the default tenant: a named tenant's
session under Landlock is refused (``sandbox_unavailable``, one line, logged with the tenant) and
nothing runs, while under bwrap (own pid namespace) it runs. ``/dev/shm`` is never shared
between sessions: bwrap gives each sandbox its own, Landlock grants none."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from toolhub import Session
from toolhub.errors import ErrorCode
from toolhub.sandbox.landlock_syscalls import abi_version

from .conftest import Layout, requires_bwrap

requires_landlock = pytest.mark.skipif(abi_version() < 1, reason="the kernel has no Landlock")


def _config(mechanism: str) -> dict[str, object]:
    sandbox = {"mode": "workspace_write", "mechanism": mechanism}
    return {
        "tools": [{"id": "Main:bash", "params": {"enabled_background": False, "sandbox": sandbox}}]
    }


def _run(layout: Layout, sid: str, mechanism: str, command: str, ws: Path | None = None):  # type: ignore[no-untyped-def]
    workspace = ws or layout.ws
    state = layout.base / "state" / sid.replace("~", "_")
    with Session.embedded(
        _config(mechanism), workspace=workspace, session_id=sid, state_dir=state
    ) as session:
        return session.call_sync("bash", {"command": command, "description": "t"})


@requires_landlock
def test_a_named_tenants_session_is_refused_under_landlock(
    layout: Layout, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    res = _run(layout, "acme~s1", "landlock", "echo ran > ran.txt")
    assert res.is_error and res.error is not None
    assert res.error.code == ErrorCode.SANDBOX_UNAVAILABLE
    assert "tenant 'acme'" in res.error.detail and "need bwrap" in res.error.detail
    assert "\n" not in res.error.detail
    assert not (layout.ws / "ran.txt").exists()
    assert any(r.levelname == "WARNING" and "acme" in r.getMessage() for r in caplog.records)


@requires_landlock
def test_the_default_tenants_session_runs_under_landlock(layout: Layout) -> None:
    res = _run(layout, "s1", "landlock", "echo ran > ran.txt; ls; python3 -c 'print(6*7)'")
    assert not res.is_error, res.prompt_text
    assert "ran.txt" in res.prompt_text and "42" in res.prompt_text


@requires_bwrap
def test_a_named_tenants_session_runs_under_bwrap(layout: Layout) -> None:
    res = _run(layout, "acme~s1", "bwrap", "echo ran > ran.txt; cat ran.txt")
    assert not res.is_error, res.prompt_text
    assert (layout.ws / "ran.txt").read_text() == "ran\n"


@requires_landlock
def test_landlock_grants_no_dev_shm(layout: Layout) -> None:
    res = _run(
        layout,
        "s1",
        "landlock",
        "echo x > /dev/shm/toolhub-probe 2>/dev/null && echo SHM-WRITTEN; "
        "ls /dev/shm >/dev/null 2>&1 && echo SHM-LISTED; "
        "echo ok > /dev/null && head -c 4 /dev/urandom | wc -c",
    )
    assert "SHM-" not in res.prompt_text and "4" in res.prompt_text, res.prompt_text
    assert not Path("/dev/shm/toolhub-probe").exists()


@requires_bwrap
def test_each_bwrap_sandbox_has_its_own_dev_shm(layout: Layout) -> None:
    other = layout.base / "ws-b"
    other.mkdir()
    wrote = _run(layout, "a", "bwrap", "echo a-secret > /dev/shm/shared && cat /dev/shm/shared")
    assert "a-secret" in wrote.prompt_text
    read = _run(layout, "b", "bwrap", "cat /dev/shm/shared 2>&1 || echo NOT-THERE", ws=other)
    assert "a-secret" not in read.prompt_text and "NOT-THERE" in read.prompt_text
    assert not Path("/dev/shm/shared").exists()
