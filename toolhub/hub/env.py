"""``${VAR}`` references in config values (MCP headers, hub tokens), resolved from the
environment at connect time so secrets never have to be written into a config file. Every
value expanded is remembered by ``toolhub.redaction``, so no warning or log line shows it."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from toolhub.redaction import remember

_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: str, environ: Mapping[str, str] | None = None) -> str:
    """Replace each ``${NAME}`` with the variable's value; an unset variable becomes empty."""
    env = os.environ if environ is None else environ

    def resolve(match: re.Match[str]) -> str:
        found = env.get(match.group(1), "")
        remember(match.group(1), found)
        return found

    return _REF.sub(resolve, value)


def expand_all(values: Mapping[str, str]) -> dict[str, str]:
    return {key: expand_env(value) for key, value in values.items()}
