"""How a config's stdio MCP server is started: inside its session's sandbox, like a command.

Threat: a stdio server is a program a config names, started by the process that attaches the
config's sources. Started as a plain child it would run with that process's rights and
environment: read the fleet key, the Redis URL and password, toolhub's state and every other
session's workspace, write anywhere the process may, and reach any host. So it is started the
way the session's commands are (``ProcessRunner.confine``): under the same ``SandboxPolicy``
(bubblewrap or Landlock, the workspace and the session's private tmp the only writable places,
toolhub's state and the credential directories hidden, network only as the policy allows), with
the allowlisted environment and the config's ``env`` on top, and its installation readable
(``install_roots``). A sandbox that cannot be enforced is decided before any server starts, by
the rule the commands follow (``toolhub.assembly.configure_sandbox``: a worker refuses, an
embedded session warns once and runs unconfined); unconfined, a server still gets the
allowlisted environment only.

Whatever the config expanded into the command line or environment, a value of one of toolhub's
own secrets (``TOOLHUB_SECRETS``) never reaches the server: such a launch is refused
(``StdioRefused``), naming the variable, never its value.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from toolhub.backends.confinement import unconfined_env
from toolhub.backends.process import ProcessRunner
from toolhub.sandbox.environment import TOOLHUB_SECRETS
from toolhub.sandbox.installs import install_roots

logger = logging.getLogger("toolhub.sources.mcp_client")

#: Secret values shorter than this are not looked for (they would match by accident).
MIN_SECRET_LEN = 8


class StdioRefused(RuntimeError):
    """A stdio MCP server that must not be started as configured; never retried."""


def stdio_launch(
    server: str,
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    runner: ProcessRunner | None,
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that start ``argv`` (the server's command, expanded) under the
    sandbox of ``runner`` (the session's process runner; None or an unconfined one: no
    sandbox), with ``env`` (the config's, expanded) on top of the allowlisted environment.
    ``StdioRefused`` when the command line or ``env`` carries one of toolhub's secrets."""
    carried = secrets_carried([*argv, *env.values()])
    if carried:
        raise StdioRefused(
            f"MCP server {server!r} not started: its command line or environment would carry "
            f"toolhub's own secret {', '.join(carried)}"
        )
    policy = runner.sandbox if runner is not None else None
    base = unconfined_env(policy, {}, root=cwd, scrub=True, overrides=env)
    program = shutil.which(argv[0], path=base.get("PATH")) or argv[0]
    command = [program, *argv[1:]]
    if runner is not None and policy is not None and policy.confined:
        readable = install_roots(program) if os.path.isabs(program) else ()
        command, base = runner.confine(command, cwd, readable=readable, env=env)
    return [*_parent_death_guard(), *command], base


def secrets_carried(parts: Sequence[str]) -> list[str]:
    """The names of toolhub's secrets whose value (as set in this process) appears in
    ``parts``."""
    found = []
    for name in TOOLHUB_SECRETS:
        value = os.environ.get(name, "")
        if len(value) >= MIN_SECRET_LEN and any(value in part for part in parts):
            found.append(name)
    return found


def _parent_death_guard() -> list[str]:
    """``setpriv --pdeathsig KILL``: the server dies with the process that started it (a
    SIGKILLed worker included), whatever confines it; nothing without setpriv (bubblewrap's
    ``--die-with-parent`` still holds there)."""
    setpriv = shutil.which("setpriv")
    return [setpriv, "--pdeathsig", "KILL"] if setpriv else []
