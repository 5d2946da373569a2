"""The start-up check of a process that runs commands: can it hold them to their limits?

The threat: a worker that cannot make memory and pids cgroups runs commands the kernel does not
bound as a whole; one command's memory then gets toolhub's own processes OOM-killed, and a
fork bomb run by root has no cap (``RLIMIT_NPROC`` does not bind root). The operator decides
what happens then, with ``TOOLHUB_KERNEL_LIMITS``:

* ``require``: refuse to start, naming what is missing;
* ``best_effort`` (the default, so a laptop or an unprivileged container still runs): start,
  with a WARNING naming what is missing and the weaker limits that hold instead
  (``RLIMIT_AS`` per process for memory, ``RLIMIT_NPROC`` per user for processes).

The probe makes a real cgroup with a memory and a pids limit, as a command's would be made,
and removes it again.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from enum import StrEnum

from .cgroups import CommandCgroups

logger = logging.getLogger("toolhub.kernel")

KERNEL_LIMITS_ENV = "TOOLHUB_KERNEL_LIMITS"
#: What a command's cgroup must hold for the kernel to bound it; CPU weight is wanted too,
#: but a host without it only loses fairness, not containment.
REQUIRED = ("memory", "pids")
_PROBE_MEMORY = 64 << 20
_PROBE_PIDS = 64


class KernelLimitsMode(StrEnum):
    REQUIRE = "require"
    BEST_EFFORT = "best_effort"


class KernelLimitsUnavailable(RuntimeError):
    """``require`` mode, and a command's memory or pids cgroup cannot be made here."""


@dataclass(frozen=True, slots=True)
class KernelSupport:
    """What the probe found: the cgroup version (None: no writable cgroup), the controllers a
    command's cgroup gets, and the required ones it does not."""

    version: int | None
    controllers: frozenset[str]
    missing: tuple[str, ...]

    def describe(self) -> str:
        if self.version is None:
            return "no writable cgroup (neither v1 controllers nor delegated v2)"
        held = ", ".join(sorted(self.controllers)) or "none"
        return f"cgroup v{self.version} with {held}"


def mode_from_env() -> KernelLimitsMode:
    raw = os.environ.get(KERNEL_LIMITS_ENV, "").strip().lower() or KernelLimitsMode.BEST_EFFORT
    try:
        return KernelLimitsMode(raw)
    except ValueError:
        choices = ", ".join(m.value for m in KernelLimitsMode)
        raise KernelLimitsUnavailable(
            f"{KERNEL_LIMITS_ENV}={raw!r} is not one of {choices}"
        ) from None


def probe(cgroups: CommandCgroups) -> KernelSupport:
    """Make (and remove) a cgroup as a command's would be: which required controllers hold."""
    controllers = cgroups.controllers
    made = cgroups.create(memory_bytes=_PROBE_MEMORY, pids=_PROBE_PIDS)
    if made is None:
        return KernelSupport(cgroups.fs.version, frozenset(), REQUIRED)
    cgroups.remove(made, timeout_s=1.0)
    missing = tuple(c for c in REQUIRED if c not in controllers)
    return KernelSupport(cgroups.fs.version, controllers, missing)


def check(what: str, cgroups: CommandCgroups, mode: KernelLimitsMode) -> KernelSupport:
    """Probe and act on ``mode``: ``KernelLimitsUnavailable`` (require) or a WARNING
    (best effort) when a required controller is missing; an INFO line naming what holds."""
    found = probe(cgroups)
    if not found.missing:
        logger.info("%s: commands are held by the kernel: %s", what, found.describe())
        return found
    missing = " and ".join(f"{c} cgroups" for c in found.missing)
    if mode is KernelLimitsMode.REQUIRE:
        raise KernelLimitsUnavailable(
            f"{what} cannot bound commands here: no {missing} can be made ({found.describe()}); "
            f"give it a writable cgroup (v1 controllers, or v2 with memory and pids delegated) "
            f"or set {KERNEL_LIMITS_ENV}=best_effort to run with the weaker limits"
        )
    logger.warning(
        "%s runs without %s (%s): commands are bounded only by the weaker limits, memory by "
        "RLIMIT_AS per process and processes by RLIMIT_NPROC per user (not for root), with no "
        "per-session ceiling; set %s=require to refuse to start instead (docs/sandbox.md)",
        what,
        missing,
        found.describe(),
        KERNEL_LIMITS_ENV,
    )
    return found
