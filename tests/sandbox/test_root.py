"""Escape 8: root. A process that runs commands for remote clients (``toolhub worker``,
``toolhub up``, embedded ``toolhub serve``) refuses to start as root without
``TOOLHUB_ALLOW_ROOT=1``; allowed, its sandbox still keeps the kernel's settings read-only
(``/proc/sys``, ``/sys``: opened for append, never written) and the host's password hashes
hidden, under bwrap and under Landlock, while the command's own work runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from toolhub.sandbox import Mechanism, SandboxMode
from toolhub.sandbox.landlock_syscalls import abi_version
from toolhub.sandbox.root_guard import ALLOW_ROOT_ENV, RootRefused, refuse_root

from .conftest import Layout, requires_bwrap, text

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root")

MECHANISMS = [
    pytest.param(Mechanism.BWRAP, marks=requires_bwrap),
    pytest.param(
        Mechanism.LANDLOCK,
        marks=pytest.mark.skipif(abi_version() < 1, reason="the kernel has no Landlock"),
    ),
]
#: Opened for appending and closed again (``: >>``): nothing is written if it opens.
KERNEL_FILES = (
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/vm/drop_caches",
    "/sys/kernel/profiling",
)


def _without_flag(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != ALLOW_ROOT_ENV}
    return {**env, "TOOLHUB_HOME": str(tmp_path / "home")}


@as_root
@pytest.mark.parametrize(
    ("args", "what"),
    [
        (["worker", "--redis", "redis://127.0.0.1:1"], "a toolhub worker"),
        (["serve", "--port", "1"], "an embedded toolhub gateway"),
        (["up", "--workers", "1"], "the toolhub stack"),
    ],
    ids=["worker", "serve", "up"],
)
def test_a_process_running_client_commands_refuses_root_without_the_flag(
    tmp_path: Path, args: list[str], what: str
) -> None:
    out = subprocess.run(
        [TOOLHUB, *args],
        env={**_without_flag(tmp_path), "COLUMNS": "500"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode in (1, 2)
    refusal = [line for line in out.stderr.splitlines() if "as root" in line]
    assert len(refusal) == 1 and f"refusing to start {what} as root" in refusal[0]
    assert ALLOW_ROOT_ENV in refusal[0]


def test_the_guard_lets_non_root_and_allowed_root_through(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ALLOW_ROOT_ENV, "1")
    refuse_root("x")
    monkeypatch.delenv(ALLOW_ROOT_ENV)
    if os.geteuid() == 0:
        with pytest.raises(RootRefused, match="refusing to start x as root"):
            refuse_root("x")
    else:
        refuse_root("x")


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_kernel_settings_stay_read_only_and_password_hashes_hidden(
    layout: Layout, mechanism: Mechanism
) -> None:
    probes = "; ".join(
        f"( : >> {path} ) 2>/dev/null && echo WRITABLE:{path}" for path in KERNEL_FILES
    )
    res = layout.runner(layout.policy(SandboxMode.WORKSPACE_WRITE, mechanism=mechanism)).run(
        f"{probes}; cat /etc/shadow /etc/gshadow 2>/dev/null | head -c 200; echo; "
        "ls /dev/loop0 >/dev/null 2>&1 && ( : >> /dev/loop0 ) 2>/dev/null && echo WRITABLE:loop; "
        "cat /proc/sys/kernel/ostype; echo made > made.txt && cat made.txt; "
        "python3 -c 'print(7*6)'",
        log_name=f"root-{mechanism.value}",
    )
    out = text(res)
    assert "WRITABLE" not in out, out
    assert "root:" not in out, out  # /etc/shadow's first line
    assert out.split()[-3:] == ["Linux", "made", "42"], out
