"""The worker's kernel limits at start: protected from the OOM killer, and commands bounded by
cgroups, or the operator's choice of what happens when they cannot be
(``toolhub.backends.kernel_check``: ``TOOLHUB_KERNEL_LIMITS=require`` refuses to start, exit 2
with the reason on stderr; ``best_effort``, the default, starts with a WARNING).

The threat: a worker killed by the OOM killer for a command's memory loses every call it runs;
a worker whose commands have no memory or pids cgroup lets one command take the host.
"""

from __future__ import annotations

import sys

from toolhub.backends.kernel_check import (
    KernelLimitsUnavailable,
    KernelSupport,
    check,
    mode_from_env,
)
from toolhub.backends.oom import protect
from toolhub.backends.process import shared_cgroups

#: Exit code of a worker that refuses to start because commands cannot be bounded.
EXIT_NO_KERNEL_LIMITS = 2


def install_kernel_limits() -> KernelSupport:
    """Protect this worker from the OOM killer and check its commands' cgroups; exits the
    process (``EXIT_NO_KERNEL_LIMITS``) with the reason when ``require`` cannot be met."""
    protect("the toolhub worker")
    try:
        return check("the toolhub worker", shared_cgroups(), mode_from_env())
    except KernelLimitsUnavailable as exc:
        sys.stderr.write(f"toolhub worker: refusing to start: {exc}\n")
        sys.stderr.flush()
        raise SystemExit(EXIT_NO_KERNEL_LIMITS) from None
