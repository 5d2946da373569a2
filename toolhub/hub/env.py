"""``${VAR}`` references in config values (MCP headers, hub tokens), resolved from the
environment at connect time so secrets never have to be written into a config file."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand_env(value: str, environ: Mapping[str, str] | None = None) -> str:
    """Replace each ``${NAME}`` with the variable's value; an unset variable becomes empty."""
    env = os.environ if environ is None else environ
    return _REF.sub(lambda m: env.get(m.group(1), ""), value)


def expand_all(values: Mapping[str, str]) -> dict[str, str]:
    return {key: expand_env(value) for key, value in values.items()}
