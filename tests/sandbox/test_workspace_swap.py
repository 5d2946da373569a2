"""Escape 3: a session's workspace swapped after the session began (for a symlink to a host
directory, or for another directory) is refused on every use, under bwrap and under Landlock:
commands (``ProcessRunner.start``, the shared sandbox and a sandbox per command) and file tools
(``Workspace``) answer ``workspace_moved`` and nothing runs; the checked directory is what
gets bound or granted even when the swap lands between the check and the mount."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from toolhub.backends.process import ProcessRunner
from toolhub.backends.workspace import Workspace
from toolhub.backends.workspace_pin import WorkspacePin, require_real
from toolhub.core import ToolError
from toolhub.errors import ErrorCode
from toolhub.sandbox import Mechanism, SandboxMode, SandboxPolicy, bwrap_argv, landlock_argv
from toolhub.sandbox.landlock_syscalls import abi_version

from .conftest import Layout, requires_bwrap, text

MECHANISMS = [
    pytest.param(Mechanism.BWRAP, marks=requires_bwrap),
    pytest.param(
        Mechanism.LANDLOCK,
        marks=pytest.mark.skipif(abi_version() < 1, reason="the kernel has no Landlock"),
    ),
]


def _victim(layout: Layout) -> tuple[Path, Path]:
    """A session workspace inside another session's (the one that swaps it), and a host
    directory with something to steal."""
    inner = layout.ws / "inner"
    inner.mkdir()
    (inner / "mine.txt").write_text("mine\n")
    (layout.outside / "secret.txt").write_text("host-secret\n")
    return inner, layout.outside


def _runner(layout: Layout, ws: Path, mechanism: Mechanism, shared: bool) -> ProcessRunner:
    policy = SandboxPolicy(ws, SandboxMode.WORKSPACE_WRITE, tmp_dir=layout.tmp, mechanism=mechanism)
    return ProcessRunner(ws, layout.logs, sandbox=policy, shared_sandbox=shared)


def _refused(error: pytest.ExceptionInfo[ToolError]) -> None:
    assert error.value.code == ErrorCode.WORKSPACE_MOVED
    assert "nothing ran" in error.value.detail and "\n" not in error.value.detail


@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("shared", [True, False], ids=["shared", "per-command"])
def test_a_workspace_swapped_for_a_symlink_runs_nothing(
    layout: Layout, mechanism: Mechanism, shared: bool, caplog: pytest.LogCaptureFixture
) -> None:
    inner, outside = _victim(layout)
    runner = _runner(layout, inner, mechanism, shared)
    ok = runner.run("cat mine.txt; echo made > new.txt; python3 -c 'print(6*7)'", log_name="ok")
    assert text(ok).split() == ["mine", "42"] and (inner / "new.txt").exists()
    inner.rename(layout.ws / "inner-moved")
    inner.symlink_to(outside)
    with pytest.raises(ToolError) as error:
        runner.run(f"cat secret.txt; echo pwned > {inner}/planted.txt", log_name="swapped")
    _refused(error)
    assert not (outside / "planted.txt").exists()
    assert any(r.levelname == "WARNING" and "workspace" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_a_workspace_replaced_by_another_directory_runs_nothing(
    layout: Layout, mechanism: Mechanism
) -> None:
    inner, _ = _victim(layout)
    runner = _runner(layout, inner, mechanism, shared=False)
    assert text(runner.run("ls", log_name="ok")).split() == ["mine.txt"]
    inner.rename(layout.ws / "inner-moved")
    inner.mkdir()
    with pytest.raises(ToolError) as error:
        runner.run("ls", log_name="replaced")
    _refused(error)


def test_file_tools_refuse_a_swapped_workspace(layout: Layout) -> None:
    inner, outside = _victim(layout)
    ws = Workspace(inner)
    assert ws.read_bytes(ws.resolve("mine.txt"), limit=100) == b"mine\n"
    ws.write(ws.resolve("kept.txt"), b"kept")
    inner.rename(layout.ws / "inner-moved")
    inner.symlink_to(outside)
    for attempt in (
        lambda: ws.read_bytes(ws.resolve("secret.txt"), limit=100),
        lambda: ws.write(ws.root / "planted.txt", b"x"),
        lambda: ws.entries(ws.root, limit=10),
    ):
        with pytest.raises(ToolError) as error:
            attempt()
        _refused(error)
    assert not (outside / "planted.txt").exists()


def test_a_worker_refuses_a_recorded_workspace_that_now_has_a_symlink(layout: Layout) -> None:
    inner, outside = _victim(layout)
    assert require_real(str(inner)) == inner
    inner.rename(layout.ws / "inner-moved")
    inner.symlink_to(outside)
    with pytest.raises(ToolError) as error:
        require_real(str(inner))
    assert error.value.code == ErrorCode.WORKSPACE_MOVED


@requires_bwrap
def test_bwrap_binds_the_checked_directory_even_when_swapped_before_it_mounts(
    layout: Layout,
) -> None:
    """The race: the swap lands after the check, before bwrap mounts. bwrap binds the
    descriptor the pin opened, so the command still sees the checked directory."""
    inner, outside = _victim(layout)
    pin = WorkspacePin(inner)
    policy = SandboxPolicy(inner, SandboxMode.WORKSPACE_WRITE, tmp_dir=layout.tmp)
    with pin.opened() as fd:
        argv = bwrap_argv(
            policy,
            ["sh", "-c", "ls; echo w > w.txt"],
            env={"PATH": "/usr/bin:/bin"},
            workspace_fd=fd,
        )
        assert "--bind-fd" in argv
        inner.rename(layout.ws / "inner-moved")
        inner.symlink_to(outside)
        out = subprocess.run(argv, pass_fds=(fd,), capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["mine.txt"], out.stderr
    assert (layout.ws / "inner-moved" / "w.txt").exists()
    assert not (outside / "w.txt").exists()


@pytest.mark.skipif(abi_version() < 1, reason="the kernel has no Landlock")
def test_landlock_grants_the_workspace_only_while_it_is_the_checked_directory(
    layout: Layout,
) -> None:
    inner, outside = _victim(layout)
    identity = WorkspacePin(inner).check()
    policy = SandboxPolicy(
        inner, SandboxMode.WORKSPACE_WRITE, tmp_dir=layout.tmp, mechanism=Mechanism.LANDLOCK
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    argv, wrapper_env = landlock_argv(
        policy,
        ["sh", "-c", "echo w > w.txt"],
        env=env,
        cwd=layout.base,
        workspace_identity=identity,
    )
    inner.rename(layout.ws / "inner-moved")
    inner.symlink_to(outside)
    out = subprocess.run(argv, env=wrapper_env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 126 and "is not the directory checked" in out.stderr
    assert not (outside / "w.txt").exists()
