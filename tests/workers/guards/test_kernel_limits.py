"""The worker's start-up check of its commands' cgroups, in a real process whose cgroup
filesystem is hidden (a private mount namespace with an empty tmpfs over ``/sys/fs/cgroup``):
``TOOLHUB_KERNEL_LIMITS=require`` refuses to start (exit 2, the reason on stderr),
``best_effort`` starts with a WARNING naming what is missing; with the host's cgroups it
starts either way. On the suite's real workers: a memory hog is a typed ``memory_limit`` error
while its neighbour and its worker live."""

from __future__ import annotations

import asyncio
import os
import shlex
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.distributed.helpers import worker_pid
from toolhub import CallResult, Session
from toolhub.backends.cgroups import CommandCgroups
from toolhub.errors import ErrorCode
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


@pytest.mark.skipif(
    "memory" not in CommandCgroups.detect().controllers, reason="needs a memory cgroup"
)
def test_on_a_real_worker_a_memory_hog_is_a_typed_error_and_nothing_else_dies(
    live: Any, store: Any, tmp_path: Path
) -> None:
    """The command past its ``memory_mb`` is OOM-killed inside its cgroup: its caller gets a
    ``memory_limit`` error with the output so far (no hang), while a command of the same
    session running beside it on the fleet finishes and the worker that ran the hog lives."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    params = {"memory_mb": 64, "enabled_background": False}
    config = {"tools": [{"id": "Main:bash", "params": params}]}
    session = Session.connect(live.url, config, workspace)
    hold = "python3 -c 'import time; b = bytearray({mb} << 20); time.sleep({s}); print(\"ok\")'"

    async def go() -> tuple[CallResult, CallResult]:
        neighbour = asyncio.ensure_future(
            session.call(
                "bash", {"command": hold.format(mb=16, s=3), "description": "t"}, call_id=CALM
            )
        )
        hog = await session.call(
            "bash",
            {"command": f"echo before; {hold.format(mb=200, s=0)}", "description": "t"},
            call_id=HOG,
        )
        return hog, await neighbour

    try:
        hog, calm = asyncio.run(asyncio.wait_for(go(), 60))
    finally:
        session.close()
    assert hog.error is not None and hog.error.code == ErrorCode.MEMORY_LIMIT, hog
    assert "memory limit of 64 MiB" in hog.error.detail and "before" in hog.error.detail
    assert calm.error is None and "ok" in calm.prompt_text
    assert psutil.pid_exists(worker_pid(store.get_record(HOG)))


HOG, CALM = f"oom-hog-{uuid.uuid4().hex[:8]}", f"oom-calm-{uuid.uuid4().hex[:8]}"
