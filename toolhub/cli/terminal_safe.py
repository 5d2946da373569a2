"""Text from commands and tools, made safe to print on an operator's terminal.

Threat: what a background command or a tool call printed is model-written, and the CLI shows
it on the operator's terminal (``toolhub tasks logs/show``, ``toolhub call``). Printed raw, a
terminal acts on the control sequences in it: OSC 52 writes the operator's clipboard, OSC 0/2
sets the window title, CSI sequences clear the screen, move the cursor and rewrite what was
shown above, DCS/APC strings reach terminal extensions. ``clean`` removes every escape
sequence whole (ECMA-48: CSI, OSC, DCS, SOS, PM, APC, and the two-byte ones, in their 7-bit
and 8-bit forms), then every C0 and C1 control left but newline and tab (a lone ESC or BEL,
a carriage return that would overwrite a line, DEL). Printable Unicode stays as it was.

Output arrives in chunks, and a sequence may be split between two: each chunk is cleaned on
its own, and since every ESC and C1 byte is removed even where no whole sequence matches, the
terminal never receives the start of one; at worst a split sequence's printable tail shows.
"""

from __future__ import annotations

import json
import re
from typing import Any

#: Whole escape sequences. Strings (OSC, DCS, SOS, PM, APC) end at BEL or ST, or, unended,
#: at the end of the line: a newline of ordinary output after one is kept.
_SEQUENCE = re.compile(
    r"""
    (?:\x1b[\]P^_X]|[\x90\x98\x9d\x9e\x9f]) [^\x07\x1b\x9c\n]* (?:\x07|\x1b\\|\x9c)?
  | (?:\x1b\[|\x9b) [\x30-\x3f]* [\x20-\x2f]* [\x40-\x7e]?
  | \x1b [\x20-\x2f]* [\x30-\x7e]?
    """,
    re.VERBOSE,
)
#: Every C0 and C1 control but tab and newline, and DEL.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: What ``json.dumps(ensure_ascii=False)`` leaves unescaped that a terminal may act on.
_JSON_UNSAFE = re.compile(r"[\x7f-\x9f]")


def clean(text: str) -> str:
    """``text`` without escape sequences and controls (newline and tab kept)."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub("", _SEQUENCE.sub("", text))


def safe_json(value: Any) -> str:
    """``value`` as indented JSON with every control escaped (``\\u001b``, ``\\u009b``): the
    same data, nothing a terminal acts on."""
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return _JSON_UNSAFE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
