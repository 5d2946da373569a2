"""Never silently unconfined: the check a runner's sandbox passes before any command runs.

A worker asked to sandbox commands on a machine that cannot (no user namespaces, no bwrap) has
two honest answers, and the deployment picks one: refuse to start (``require=True``, what a
multi-tenant fleet wants: a worker that would run every session's commands with the worker's
own rights must not take calls), or run unsandboxed and say so loudly, once per process (a
developer's laptop). ``full`` mode chosen by config is an explicit opt-out and is logged once
too, so the logs always say how commands ran.

The process-wide default is the switch the worker assembly turns: ``use_by_default`` makes every
session whose config does not choose a mode get the given settings.
"""

from __future__ import annotations

import logging
import threading

from .landlock_syscalls import abi_version
from .policy import Mechanism, SandboxPolicy
from .probe import SandboxSupport, probe
from .settings import SandboxSettings

log = logging.getLogger("toolhub.sandbox")


class SandboxUnavailable(RuntimeError):
    """The requested sandbox cannot be enforced on this machine."""

    def __init__(self, support: SandboxSupport) -> None:
        super().__init__(
            f"the command sandbox cannot be enforced here: {support.reason}. Run where bwrap "
            "works (root, or unprivileged user namespaces enabled) or the kernel has Landlock, "
            "or set sandbox mode `full` to run commands unconfined on purpose."
        )
        self.support = support


_warned: set[str] = set()
_warned_lock = threading.Lock()


def _once(key: str, message: str, level: int = logging.WARNING) -> bool:
    with _warned_lock:
        if key in _warned:
            return False
        _warned.add(key)
    log.log(level, message)
    return True


def choose(wanted: Mechanism) -> tuple[Mechanism | None, SandboxSupport]:
    """What can enforce a confined policy here: bwrap when it runs, else (for ``auto``)
    Landlock, said once at WARNING since it is weaker; None, with the reasons, when neither."""
    reasons = []
    support = SandboxSupport(False, None, "")
    if wanted in (Mechanism.AUTO, Mechanism.BWRAP):
        support = probe()
        if support.available:
            return Mechanism.BWRAP, support
        reasons.append(support.reason)
    if wanted in (Mechanism.AUTO, Mechanism.LANDLOCK):
        abi = abi_version()
        if abi >= 1:
            if wanted is Mechanism.AUTO:
                _once(
                    "landlock",
                    f"toolhub: bwrap cannot sandbox here ({support.reason}); commands are "
                    f"confined with Landlock (ABI {abi}) instead, which cannot make paths inside "
                    "the workspace read-only or confine UDP (docs/sandbox.md)",
                )
            return Mechanism.LANDLOCK, SandboxSupport(True, None)
        reasons.append("the kernel has no Landlock (or it is disabled)")
    return None, SandboxSupport(False, support.binary, "; ".join(reasons))


def enforce(policy: SandboxPolicy | None, *, require: bool) -> SandboxPolicy | None:
    """The policy commands actually run under: ``policy`` when it can be enforced; for an
    unenforceable one, ``SandboxUnavailable`` when ``require``, else the same policy in
    ``full`` mode (environment still scrubbed) after one loud warning per process."""
    if policy is None:
        return None
    if not policy.confined:
        _once("full", "toolhub: command sandbox disabled by config (mode=full): commands run "
              "unconfined with the worker's rights", logging.INFO)  # fmt: skip
        return policy
    mechanism, support = choose(policy.mechanism)
    if mechanism is not None:
        return policy.enforced_by(mechanism)
    if require:
        raise SandboxUnavailable(support)
    _once(
        "unavailable",
        f"toolhub: COMMANDS RUN UNSANDBOXED: sandbox mode {policy.mode.value} was asked for but "
        f"cannot be enforced here ({support.reason}); commands get a scrubbed environment only",
    )
    return policy.unconfined()


class _Default:
    settings: SandboxSettings | None = None
    require: bool = False


def use_by_default(settings: SandboxSettings | None, *, require: bool = True) -> Mechanism | None:
    """Give every session whose config names no sandbox ``settings`` (None: none), and check at
    once that it can be enforced: with ``require`` a worker that cannot sandbox fails here, at
    start-up, instead of at its first call. Returns what will confine commands (None: nothing)."""
    mechanism = None
    if settings is not None and settings.confined:
        mechanism, support = choose(settings.mechanism)
        if mechanism is None:
            if require:
                raise SandboxUnavailable(support)
            _once("unavailable", "toolhub: COMMANDS RUN UNSANDBOXED: the default sandbox "
                  f"cannot be enforced here ({support.reason})")  # fmt: skip
    _Default.settings, _Default.require = settings, require
    return mechanism


def default_settings() -> tuple[SandboxSettings | None, bool]:
    """What ``use_by_default`` set: the settings and whether they are required."""
    return _Default.settings, _Default.require


def reset_warnings() -> None:
    """Warn again (tests)."""
    with _warned_lock:
        _warned.clear()
