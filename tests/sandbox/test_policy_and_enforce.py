"""The pieces around the mounts: the bwrap argv's order and omissions, the probe's cached
answer, refusing or warning once when a sandbox cannot be enforced, and the config switch
(the ``bash`` tool's ``sandbox`` param, and the process default a worker turns on)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from toolhub import Session
from toolhub.backends.process import ProcessRunner
from toolhub.sandbox import (
    Mechanism,
    SandboxMode,
    SandboxPolicy,
    SandboxSettings,
    SandboxUnavailable,
    bwrap_argv,
    enforce,
    probe,
    use_by_default,
)
from toolhub.sandbox import enforcement as enforce_module
from toolhub.sandbox.landlock_syscalls import abi_version
from toolhub.sandbox.probe import SandboxSupport

from .conftest import SECRETS, Layout, requires_bwrap


def _mounts(argv: list[str]) -> list[tuple[str, str]]:
    out = []
    for i, arg in enumerate(argv):
        if arg in ("--bind", "--ro-bind"):
            out.append((arg, argv[i + 2]))
        elif arg == "--tmpfs":
            out.append((arg, argv[i + 1]))
    return out


def test_argv_mounts_parents_first_and_skips_missing_paths(tmp_path: Path) -> None:
    home = Path("/var/tmp") / tmp_path.name  # outside /tmp, which is private anyway
    state = home / "state"
    ws = state / "workspaces" / "s1"
    (ws / ".git" / "hooks").mkdir(parents=True)
    try:
        policy = SandboxPolicy(
            ws,
            hidden=(state, home / "missing"),
            tmp_dir=state / "s1-tmp",
            network=True,
            readable=(home,),
        )
        argv = bwrap_argv(policy, ["bash", "-c"], env={"PATH": "/bin"}, bwrap="bwrap")
        mounts = _mounts(argv)
        # No root bind: only the readable roots exist, each read-only, parents first.
        assert ("--ro-bind", "/") not in mounts and ("--ro-bind", "/usr") in mounts
        assert mounts.index(("--ro-bind", str(home))) < mounts.index(("--tmpfs", str(state)))
        assert mounts.index(("--tmpfs", str(state))) < mounts.index(("--bind", str(ws)))
        # The hidden dir is sealed read-only only after the workspace is bound inside it.
        assert argv.index("--remount-ro") > argv.index(str(ws))
        # Hidden but not under a readable root: absent already, nothing to mount.
        unread = bwrap_argv(
            SandboxPolicy(ws, hidden=(state,)), ["true"], env={"PATH": "/bin"}, bwrap="b"
        )
        assert ("--tmpfs", str(state)) not in _mounts(unread)
        assert mounts.index(("--bind", str(ws))) < mounts.index(
            ("--ro-bind", str(ws / ".git" / "hooks"))
        )
        assert ("--bind", "/tmp") in mounts and str(home / "missing") not in argv
        assert ("--ro-bind", str(ws / ".git" / "config")) not in mounts  # no such file
        assert "--unshare-net" not in argv and "--new-session" not in argv
        assert argv[argv.index("--clearenv") + 1 :] == [
            "--setenv",
            "PATH",
            "/bin",
            "--",
            "bash",
            "-c",
        ]
        ro = bwrap_argv(SandboxPolicy(ws, SandboxMode.READ_ONLY), ["true"], env={}, bwrap="b")
        assert ("--ro-bind", str(ws)) in _mounts(ro) and "--unshare-net" in ro
        with pytest.raises(ValueError):
            bwrap_argv(SandboxPolicy(ws, SandboxMode.FULL), ["true"], env={}, bwrap="b")
    finally:
        import shutil

        shutil.rmtree(home, ignore_errors=True)


@requires_bwrap
def test_probe_runs_bwrap_once_and_says_why_not() -> None:
    assert probe().available and probe() is probe()
    missing = probe("/nonexistent/bwrap")
    assert not missing.available and "cannot run" in missing.reason
    broken = probe("/bin/false")
    assert not broken.available and "cannot create a sandbox" in broken.reason


@pytest.fixture
def no_bwrap(monkeypatch: pytest.MonkeyPatch) -> Iterator[SandboxSupport]:
    support = SandboxSupport(False, "/bin/false", "no user namespaces")
    monkeypatch.setattr(enforce_module, "probe", lambda: support)
    enforce_module.reset_warnings()
    yield support
    enforce_module.reset_warnings()


@pytest.fixture
def unavailable(
    no_bwrap: SandboxSupport, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SandboxSupport]:
    """Neither bwrap nor Landlock can confine here."""
    monkeypatch.setattr(enforce_module, "abi_version", lambda: 0)
    yield no_bwrap


def test_an_unenforceable_sandbox_is_refused_when_required(
    tmp_path: Path, unavailable: SandboxSupport
) -> None:
    with pytest.raises(SandboxUnavailable, match="no user namespaces; the kernel has no Landlock"):
        enforce(SandboxPolicy(tmp_path), require=True)
    with pytest.raises(SandboxUnavailable):
        use_by_default(SandboxSettings(), require=True)


def test_an_unenforceable_sandbox_warns_loudly_once_and_runs_scrubbed(
    tmp_path: Path, unavailable: SandboxSupport, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "toolhub.sandbox"):
        first = enforce(SandboxPolicy(tmp_path), require=False)
        second = enforce(SandboxPolicy(tmp_path), require=False)
    warnings = [r for r in caplog.records if "UNSANDBOXED" in r.getMessage()]
    assert len(warnings) == 1 and "no user namespaces" in warnings[0].getMessage()
    assert first is not None and first.mode is SandboxMode.FULL and first.scrub_env
    assert second == first


@pytest.mark.skipif(abi_version() < 1, reason="the kernel has no Landlock")
def test_without_bwrap_auto_falls_back_to_landlock_and_says_so_once(
    tmp_path: Path, no_bwrap: SandboxSupport, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, "toolhub.sandbox"):
        first = enforce(SandboxPolicy(tmp_path), require=True)
        second = enforce(SandboxPolicy(tmp_path), require=True)
    said = [r.getMessage() for r in caplog.records if "confined with Landlock" in r.getMessage()]
    assert len(said) == 1 and "no user namespaces" in said[0]
    assert first is not None and first.mechanism is Mechanism.LANDLOCK and first.confined
    assert second == first
    # Asked for bwrap by name, there is no fallback.
    with pytest.raises(SandboxUnavailable, match="no user namespaces"):
        enforce(SandboxPolicy(tmp_path, mechanism=Mechanism.BWRAP), require=True)


def test_full_mode_is_logged_once_and_no_policy_is_no_sandbox(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    enforce_module.reset_warnings()
    with caplog.at_level(logging.INFO, "toolhub.sandbox"):
        for _ in range(2):
            policy = SandboxPolicy(tmp_path, SandboxMode.FULL)
            assert enforce(policy, require=True) is policy
    assert len([r for r in caplog.records if "mode=full" in r.getMessage()]) == 1
    assert enforce(None, require=True) is None


def _bash_config(sandbox: dict[str, object] | None) -> dict[str, object]:
    params: dict[str, object] = {"enabled_background": False}
    if sandbox is not None:
        params["sandbox"] = sandbox
    return {"tools": [{"id": "Main:bash", "params": params}]}


@requires_bwrap
def test_the_bash_tools_sandbox_param_confines_the_sessions_commands(
    layout: Layout, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    config = _bash_config({"mode": "workspace_write", "network": False, "env": ["MY_VAR"]})
    monkeypatch.setenv("MY_VAR", "passed")
    with Session.embedded(config, workspace=layout.ws, state_dir=layout.base / "state") as s:
        runner = s.toolset.container.require(ProcessRunner)
        assert runner.sandbox is not None and runner.sandbox.mode is SandboxMode.WORKSPACE_WRITE
        res = s.call_sync(
            "bash",
            {"command": f"env; echo x > {layout.outside}/e; echo ok > f", "description": "t"},
        )
        out = res.prompt_text
    assert "MY_VAR=passed" in out and "No such file or directory" in out
    assert (layout.ws / "f").read_text() == "ok\n" and not (layout.outside / "e").exists()
    for name in SECRETS:
        assert name not in out
    assert (layout.base / "state" / "tmp" / "home").is_dir()  # the session's private tmp


def test_no_sandbox_by_default_and_the_process_default_switch(layout: Layout) -> None:
    state = layout.base / "state"
    with Session.embedded(_bash_config(None), workspace=layout.ws, state_dir=state) as s:
        assert s.toolset.container.require(ProcessRunner).sandbox is None
    try:
        use_by_default(SandboxSettings(mode=SandboxMode.FULL), require=True)
        with Session.embedded(_bash_config(None), workspace=layout.ws, state_dir=state) as s:
            chosen = s.toolset.container.require(ProcessRunner).sandbox
            assert chosen is not None and chosen.mode is SandboxMode.FULL
        config = _bash_config({"mode": "read_only"})
        if probe().available:
            with Session.embedded(config, workspace=layout.ws, state_dir=state) as s:
                chosen = s.toolset.container.require(ProcessRunner).sandbox
                assert chosen is not None and chosen.mode is SandboxMode.READ_ONLY
    finally:
        use_by_default(None)
