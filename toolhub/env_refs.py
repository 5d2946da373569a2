"""``${VAR}`` references in config values (MCP headers, env, command and url, hub url and
token), resolved from the environment at connect time so secrets never have to be written into
a config file. Every value expanded is remembered by ``toolhub.redaction``, so no warning or
log line shows it.

The threat is a tenant's config naming the process's own secrets: ``${TOOLHUB_FLEET_KEY}`` in a
header sent to the tenant's host. toolhub's own variables (every ``TOOLHUB_*`` name) never
expand, in any process; a process serving tenants also restricts expansion to the names its
operator policy lists (``restrict``), so a config that bypassed admission expands nothing else
either. A refused reference raises ``ExpansionRefused``: the server or hub is not connected.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Collection, Mapping

from toolhub.redaction import remember

logger = logging.getLogger("toolhub.env_refs")

_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: Words that make a variable one of toolhub's secrets wherever ``TOOLHUB`` is in its name.
_SECRET_WORDS = ("PASSWORD", "SECRET", "TOKEN", "KEY", "REDIS_URL", "CREDENTIAL")
#: The names this process may expand (``restrict``); None: any but toolhub's own.
_allowed: frozenset[str] | None = None


class ExpansionRefused(ValueError):
    """A ``${VAR}`` the process may not expand."""


def is_toolhub_secret(name: str) -> bool:
    """Whether ``name`` is toolhub's own: every ``TOOLHUB_*`` variable (``TOOLHUB_FLEET_KEY``,
    ``TOOLHUB_FLEET_KEY_PREVIOUS``, ``TOOLHUB_API_TOKEN``, ``TOOLHUB_REDIS_URL`` with its
    password ...), and any other naming toolhub with a secret word in it."""
    upper = name.upper()
    return upper.startswith("TOOLHUB") or (
        "TOOLHUB" in upper and any(word in upper for word in _SECRET_WORDS)
    )


def references(value: str) -> list[str]:
    """The variable names ``value`` references."""
    return _REF.findall(value)


def restrict(names: Collection[str] | None) -> None:
    """Let this process expand only ``names`` (None: any name but toolhub's own). A gateway,
    worker or ``toolhub mcp`` sets its operator policy's ``env_vars`` here at start."""
    global _allowed
    _allowed = None if names is None else frozenset(names)


def restriction() -> frozenset[str] | None:
    """The names this process may expand (``restrict``'s), None when it is unrestricted: for
    code that narrows expansion for a while and puts the process's own back after."""
    return _allowed


def expand_env(
    value: str,
    environ: Mapping[str, str] | None = None,
    *,
    allowed: Collection[str] | None = None,
) -> str:
    """Replace each ``${NAME}`` with the variable's value; an unset variable becomes empty.
    ``allowed`` (default: the process's ``restrict``) bounds the names; a name outside it, or
    one of toolhub's own, raises ``ExpansionRefused``."""
    env = os.environ if environ is None else environ
    permitted = _allowed if allowed is None else frozenset(allowed)

    def resolve(match: re.Match[str]) -> str:
        name = match.group(1)
        if is_toolhub_secret(name) or (permitted is not None and name not in permitted):
            why = "toolhub's own" if is_toolhub_secret(name) else "not in the policy's env_vars"
            logger.warning("refused to expand ${%s}: %s", name, why)
            raise ExpansionRefused(f"${{{name}}} may not be expanded: it is {why}")
        found = env.get(name, "")
        remember(name, found)
        return found

    return _REF.sub(resolve, value)


def expand_all(values: Mapping[str, str]) -> dict[str, str]:
    return {key: expand_env(value) for key, value in values.items()}
