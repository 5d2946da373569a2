"""A configuration's violations on stderr, as a person reads them at any terminal width.

One violation is one entry: where (the field's path, and the tool when the path does not say
it), what is wrong, then what was expected and what was found, each on a line of its own that
the terminal's width wraps between words. Identifiers and paths are never broken in the middle
(a table of six columns did that at 80 columns). One violation without a field (a file that
cannot be read, a YAML syntax error) is one ``error:`` line.
"""

from __future__ import annotations

import json
from typing import NoReturn

import typer
from rich.padding import Padding
from rich.text import Text

from toolhub.core import ConfigError, ConfigViolation

from .output import fail, stderr

#: Tool names that say "the config itself" rather than one tool.
_NO_TOOL = {"(config)", "(global)", ""}


def show_violations(err: ConfigError, *, title: str = "configuration violations") -> NoReturn:
    """Print every violation of ``err`` under ``title``, then exit 1."""
    violations = list(err.violations)
    if len(violations) == 1 and not violations[0].field_path and not violations[0].expected:
        only = violations[0]
        fail(only.message if only.tool in _NO_TOOL else f"{only.tool}: {only.message}")
    stderr.print(Text(f"{title} ({len(violations)}):", style="bold red"))
    for violation in violations:
        stderr.print(_entry(violation))
    raise typer.Exit(1)


def _entry(violation: ConfigViolation) -> Padding:
    where = violation.field_path or violation.tool
    text = Text("• ")
    text.append(where, style="bold")
    if violation.tool not in _NO_TOOL and violation.tool not in where:
        text.append(f" (tool {violation.tool})")
    text.append(f": {violation.message}")
    text.append(f" [{violation.category}]", style="dim")
    if violation.expected:
        text.append(f"\n  expected: {violation.expected}")
    if violation.actual is not None:
        text.append(f"\n  found: {json.dumps(violation.actual, default=str)}")
    return Padding(text, (0, 0, 0, 2))
