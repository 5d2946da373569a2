"""The sandbox a worker gives every command: on by default, and never silently off.

A worker is shared by every session of the fleet, and every command a model writes runs on it,
so its default is the confined ``workspace_write`` mode (``TOOLHUB_SANDBOX``): writes only in
the session's workspace and private tmp, toolhub's state, the fleet's credentials and
(``TOOLHUB_WORKSPACE_ROOT``) the other sessions' workspaces hidden, no network unless
``TOOLHUB_SANDBOX_NETWORK``, a scrubbed environment. A session's config may choose another mode
for its own commands (the ``bash`` tool's ``sandbox`` param, covered by the config hash).

The check runs when the worker process starts: a worker that cannot enforce its sandbox refuses
to start (exit 2, the reason on stderr) instead of taking calls it would run unconfined; so does
a worker started as root without ``TOOLHUB_ALLOW_ROOT=1`` (``toolhub.sandbox.root_guard``).
``TOOLHUB_SANDBOX=full`` is the explicit opt-out; it is logged.
"""

from __future__ import annotations

import logging
import sys
from enum import StrEnum
from typing import TypeVar

from toolhub.distributed.settings import Settings
from toolhub.sandbox import (
    Mechanism,
    SandboxMode,
    SandboxSettings,
    SandboxUnavailable,
    use_by_default,
)
from toolhub.sandbox.root_guard import RootRefused, refuse_root

logger = logging.getLogger("toolhub.worker")

#: Exit code of a worker that refuses to start because its sandbox cannot be enforced.
EXIT_NO_SANDBOX = 2


class BadSandboxSetting(ValueError):
    """``TOOLHUB_SANDBOX`` or ``TOOLHUB_SANDBOX_MECHANISM`` names no choice."""


E = TypeVar("E", bound=StrEnum)


def _choice(kind: type[E], name: str, value: str) -> E:
    try:
        return kind(value)
    except ValueError:
        choices = ", ".join(member.value for member in kind)
        raise BadSandboxSetting(f"{name}={value!r} is not one of {choices}") from None


def worker_sandbox(settings: Settings) -> SandboxSettings:
    """The sandbox settings of sessions whose config names none."""
    mode = _choice(SandboxMode, "TOOLHUB_SANDBOX", settings.sandbox)
    mechanism = _choice(Mechanism, "TOOLHUB_SANDBOX_MECHANISM", settings.sandbox_mechanism)
    hide = [settings.workspace_root] if settings.workspace_root else []
    return SandboxSettings(
        mode=mode,
        network=settings.sandbox_network,
        hide=hide,
        mechanism=mechanism,
        require=True,
    )


def install_worker_sandbox(settings: Settings) -> SandboxSettings:
    """Make ``worker_sandbox`` the process default, checking now that it can be enforced and
    that the worker is not root (unless allowed); exits the process (``EXIT_NO_SANDBOX``) with
    the reason when not."""
    try:
        refuse_root("a toolhub worker")
        chosen = worker_sandbox(settings)
        mechanism = use_by_default(chosen, require=True)
    except (BadSandboxSetting, SandboxUnavailable, RootRefused) as exc:
        sys.stderr.write(f"toolhub worker: refusing to start: {exc}\n")
        sys.stderr.flush()
        raise SystemExit(EXIT_NO_SANDBOX) from None
    if chosen.confined:
        logger.info(
            "commands run sandboxed (%s by %s, network %s)",
            chosen.mode.value,
            mechanism.value if mechanism is not None else "?",
            "on" if chosen.network else "off",
        )
    else:
        logger.warning("commands run UNSANDBOXED: TOOLHUB_SANDBOX=full")
    return chosen
