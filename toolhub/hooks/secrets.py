"""The shipped ``after`` hook: secrets masked in every output before it is stored or streamed.

On by default (the operator policy's ``hooks.always`` lists ``secrets``). It masks the values
of the environment variables the operator marks (``hooks.secret_env``) as ``${NAME}``, the
values this process expanded from ``${VAR}`` references, and the shapes of common credentials
(``toolhub.redaction.redact_secrets``), in every string of a progress item or a result: text,
structured output, error and content blocks. A private key block cut across progress items
(its ``BEGIN`` line in one, its ``END`` in a later one) is masked whole: the hook remembers,
for the call, that it is inside one. Every call's output passes here, so an item with nothing to
mask costs one JSON write of it and one scan of that text (``may_change``); only an item where
that finds something is walked string by string.

The threat: a command that prints a credential it can read (``env``, ``cat
~/.aws/credentials``) into the record, the stream, a log or the model.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Sequence
from typing import Any

from pydantic_core import to_json

from toolhub.redaction import (
    PRIVATE_KEY_BEGIN,
    PRIVATE_KEY_END,
    may_change,
    redact_secrets,
    remember,
)

from .api import AfterItem

KEY_MASK = "[REDACTED:private_key]"
_IN_KEY = "in_private_key"
#: The end of a key block whose start is not in the text (a head-and-tail cut output), with
#: the key lines before it.
_ORPHAN_END = re.compile(r"(?:^[A-Za-z0-9+/=]{16,}\r?\n)*" + PRIVATE_KEY_END.pattern, re.M)


class SecretsRedaction:
    """Masks secrets in each output item (``after`` only)."""

    def __init__(self, secret_env: Sequence[str] = ()) -> None:
        for name, value in os.environ.items():
            if any(name == p or fnmatch.fnmatchcase(name, p) for p in secret_env):
                remember(name, value)

    def after(self, item: AfterItem) -> AfterItem:
        state = item.state
        if not state.get(_IN_KEY) and _nothing_to_mask(item):
            return item
        if item.text is not None:
            item.text = _mask(item.text, state)
        item.output = _walk(item.output, state)
        if item.error is not None:
            item.error = _walk(item.error, state)
        item.content = _walk(item.content, state)
        return item


def _nothing_to_mask(item: AfterItem) -> bool:
    """True when no string of ``item`` can hold anything to mask: its text, output, error and
    content written as one JSON text, scanned once."""
    try:
        written = to_json([item.text, item.output, item.error, item.content])
    except Exception:  # what JSON cannot write (a lone surrogate, an unknown type): walked
        return False
    return not may_change(written.decode())


def _walk(value: Any, state: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return _mask(value, state)
    if isinstance(value, dict):
        return {k: _walk(v, state) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_walk(v, state) for v in value]
    return value


def _mask(text: str, state: dict[str, Any]) -> str:
    if state.get(_IN_KEY):
        end = PRIVATE_KEY_END.search(text)
        if end is None:
            return ""  # the middle of a key block whose start was masked already
        state[_IN_KEY] = False
        text = text[end.end() :]
    text = redact_secrets(text)
    if "PRIVATE KEY-----" not in text:
        return text
    text = _ORPHAN_END.sub(KEY_MASK, text)
    begin = PRIVATE_KEY_BEGIN.search(text)
    if begin is not None:  # a block whose end is not in this text: masked to its end
        state[_IN_KEY] = True
        text = text[: begin.start()] + KEY_MASK
    return text
