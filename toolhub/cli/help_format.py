"""The ``toolhub`` command tree as a person reads it in ``--help`` and in a usage error.

typer's defaults read oddly at a terminal, so the click command built from the app is tidied
once before it runs:

* a flag (``--strict``, ``--json``) shows no ``<bool>`` value: it takes none, and a person who
  reads ``<bool>`` types ``--strict true``, which then fails;
* an argument is ``NAME`` in the usage line (``[ARGS]`` when optional), the convention of
  every Unix command, not ``{name}``;
* a help text's paragraphs are reflowed: a line break inside a paragraph of a docstring is
  a space, so the terminal wraps the text at its own width instead of at the source's.

``usage_message`` words a usage error: without pydantic's ``Value error,`` prefix, and with a
hint when a flag was given a value.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

from typer.core import TyperArgument, TyperOption

#: A line break inside a paragraph (not a blank line, not before a list item or an indent).
_SOFT_BREAK = re.compile(r"(?<!\n)\n(?![\n\s*-])")
_VALUE_ERROR = "Value error, "
_EXTRA_ARGUMENT = re.compile(r"Got unexpected extra argument(?:s|\(s\))? \(([^) ]+)")
_FLAG_VALUES = {"true", "false", "yes", "no", "on", "off", "1", "0"}


def tidy(command: Any) -> None:
    """Tidy ``command`` (a click command or group built by typer) and every command under it."""
    for each in _commands(command):
        if each.help:
            each.help = _SOFT_BREAK.sub(" ", each.help.strip())
        # ``--help`` is made on first use and kept: made here, it is tidied with the rest.
        help_option = each.get_help_option(each.context_class(each))
        for param in [*each.params, *([help_option] if help_option is not None else [])]:
            if isinstance(param, TyperOption) and param.is_flag:
                param.metavar = ""
            elif isinstance(param, TyperArgument):
                name = (param.metavar or param.name or "arg").upper()
                piece = name if param.required else f"[{name}]"
                # click's documented hook for a parameter's part of the usage line.
                param.get_usage_pieces = partial(_usage_pieces, piece)  # type: ignore[method-assign]


def _usage_pieces(piece: str, ctx: Any) -> list[str]:
    return [piece]


def _commands(command: Any) -> Iterator[Any]:
    yield command
    for sub in getattr(command, "commands", {}).values():
        yield from _commands(sub)


def usage_message(message: str, argv: Sequence[str]) -> str:
    """``message`` of a usage error as a person should read it (``argv``: the arguments)."""
    message = message.replace(_VALUE_ERROR, "")
    extra = _EXTRA_ARGUMENT.search(message)
    if extra is not None and extra.group(1).lower() in _FLAG_VALUES:
        value = extra.group(1)
        flags = [a for a, b in itertools.pairwise(argv) if b == value]
        flag = next((f for f in flags if f.startswith("--")), None)
        if flag is not None:
            message += f". {flag} is a flag: give it alone to turn it on, without a value"
    return message
