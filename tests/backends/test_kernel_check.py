"""The start-up probe of a process that runs commands: on this host's real cgroups it finds
memory and pids; where no cgroup can be made (a base the kernel refuses a directory in)
``require`` refuses with the reason and ``best_effort`` warns, naming what is missing and the
weaker limits that hold instead."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from toolhub.backends.cgroup_fs import CgroupFs, Hierarchy
from toolhub.backends.cgroups import CommandCgroups
from toolhub.backends.kernel_check import (
    KERNEL_LIMITS_ENV,
    KernelLimitsMode,
    KernelLimitsUnavailable,
    check,
    mode_from_env,
)

#: A "hierarchy" in which the kernel makes no directory: every cgroup made there fails.
REFUSED = CommandCgroups(
    CgroupFs([Hierarchy(Path("/proc/self"), frozenset({"memory", "pids"}), unified=False)])
)


@pytest.mark.skipif(
    not {"memory", "pids"} <= CommandCgroups.detect().controllers, reason="needs cgroups"
)
def test_this_host_holds_commands(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "toolhub.kernel")
    found = check("the test", CommandCgroups.detect(), KernelLimitsMode.REQUIRE)
    assert found.missing == () and found.version in (1, 2)
    assert "commands are held by the kernel: cgroup v" in caplog.text


def test_require_refuses_and_best_effort_warns(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(KernelLimitsUnavailable, match="no memory cgroups and pids cgroups"):
        check("the test", REFUSED, KernelLimitsMode.REQUIRE)
    caplog.set_level(logging.WARNING, "toolhub.kernel")
    found = check("the test", REFUSED, KernelLimitsMode.BEST_EFFORT)
    assert found.missing == ("memory", "pids")
    assert "RLIMIT_AS per process" in caplog.text and "RLIMIT_NPROC" in caplog.text
    nothing = check("the test", CommandCgroups(CgroupFs([])), KernelLimitsMode.BEST_EFFORT)
    assert "no writable cgroup" in nothing.describe()


def test_the_mode_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KERNEL_LIMITS_ENV, raising=False)
    assert mode_from_env() is KernelLimitsMode.BEST_EFFORT
    monkeypatch.setenv(KERNEL_LIMITS_ENV, "require")
    assert mode_from_env() is KernelLimitsMode.REQUIRE
    monkeypatch.setenv(KERNEL_LIMITS_ENV, "sometimes")
    with pytest.raises(KernelLimitsUnavailable, match="is not one of require, best_effort"):
        mode_from_env()
