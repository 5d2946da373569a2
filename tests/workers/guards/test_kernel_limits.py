"""The worker's start-up check of its commands' cgroups, in a real process whose cgroup
filesystem is hidden (a private mount namespace with an empty tmpfs over ``/sys/fs/cgroup``):
``TOOLHUB_KERNEL_LIMITS=require`` refuses to start (exit 2, the reason on stderr),
``best_effort`` starts with a WARNING naming what is missing; with the host's cgroups it
starts either way."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from toolhub.backends.cgroups import CommandCgroups
from workers.guards.kernel_limits import EXIT_NO_KERNEL_LIMITS

REPO = Path(__file__).resolve().parents[3]
GUARD = (
    "import logging; logging.basicConfig(level=logging.INFO); "
    "from workers.guards.kernel_limits import install_kernel_limits; "
    "print('started', install_kernel_limits().missing)"
)


def _hidden_cgroups_work() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(_hidden(["true"]), capture_output=True, timeout=30)
    return probe.returncode == 0


def _hidden(argv: list[str]) -> list[str]:
    inner = " ".join(shlex.quote(a) for a in argv)
    return [
        "unshare",
        "-m",
        "sh",
        "-c",
        f"mount --make-rprivate / && mount -t tmpfs none /sys/fs/cgroup && exec {inner}",
    ]


def _guard(mode: str, *, hide: bool) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", GUARD]
    return subprocess.run(
        _hidden(argv) if hide else argv,
        cwd=REPO,
        env={**os.environ, "TOOLHUB_KERNEL_LIMITS": mode},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.skipif(not _hidden_cgroups_work(), reason="needs root and mount namespaces")
def test_without_cgroups_require_refuses_and_best_effort_warns() -> None:
    refused = _guard("require", hide=True)
    assert refused.returncode == EXIT_NO_KERNEL_LIMITS
    assert "toolhub worker: refusing to start" in refused.stderr
    assert "no memory cgroups and pids cgroups" in refused.stderr
    assert "started" not in refused.stdout
    warned = _guard("best_effort", hide=True)
    assert warned.returncode == 0 and "started ('memory', 'pids')" in warned.stdout
    assert "WARNING" in warned.stderr and "RLIMIT_NPROC" in warned.stderr


@pytest.mark.skipif(
    not {"memory", "pids"} <= CommandCgroups.detect().controllers, reason="needs cgroups"
)
def test_with_the_hosts_cgroups_require_starts() -> None:
    started = _guard("require", hide=False)
    assert started.returncode == 0 and "started ()" in started.stdout
    assert "commands are held by the kernel" in started.stderr
