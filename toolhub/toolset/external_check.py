"""Arguments of an external tool checked against its ``input_schema`` before dispatch.

A bad call never enters a queue or reaches a server: the tool set refuses it with the same
``invalid_arguments`` a built-in tool gives, naming each problem. The schema comes from
outside (an MCP server, an HTTP registration), so it is checked structurally only: types,
``required``, ``properties``, ``additionalProperties``, ``enum``/``const``, ``items`` and numeric
and length bounds. Regular expressions (``pattern``, ``patternProperties``, regex ``format``s)
are left to the server: a hostile pattern could make the dispatcher backtrack for ever. A
schema that is not valid JSON Schema is not checked at all (the server still validates).

Checking a schema against the meta-schema is slow, so it is not paid at registration (a
server with hundreds of tools would take seconds to register) but at a tool's first call, and
compiled checks are shared by schema text (``for_schema``): every session of a fleet that
attaches the same MCP server compiles each of its schemas once per process.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from toolhub.core import ToolError

#: Keywords that run regular expressions or fetch things: never evaluated here.
_SKIPPED = frozenset({"pattern", "patternProperties", "format", "$ref", "$dynamicRef"})
MAX_PROBLEMS = 10
MAX_DEPTH = 32
#: Compiled checks kept per process, by schema text.
CACHED_SCHEMAS = 1024


def _structural(schema: Any, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        return {}
    if isinstance(schema, dict):
        return {k: _structural(v, depth + 1) for k, v in schema.items() if k not in _SKIPPED}
    if isinstance(schema, list):
        return [_structural(v, depth + 1) for v in schema]
    return schema


class ArgumentCheck:
    """The compiled check of one external tool's arguments (``None`` when its schema cannot
    be used)."""

    def __init__(self, validator: Draft202012Validator) -> None:
        self._validator = validator

    @classmethod
    def of(cls, schema: Mapping[str, Any]) -> ArgumentCheck | None:
        structural = _structural(dict(schema))
        try:
            Draft202012Validator.check_schema(structural)
        except (SchemaError, RecursionError):
            return None
        return cls(Draft202012Validator(structural))

    @staticmethod
    def for_schema(schema: Mapping[str, Any]) -> ArgumentCheck | None:
        """``of``, shared among equal schemas (by their canonical JSON text)."""
        try:
            text = json.dumps(schema, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            return ArgumentCheck.of(schema)
        return _compiled(text)

    def check(self, arguments: Mapping[str, Any], *, tool: str) -> None:
        """Raise ``invalid_arguments`` naming each problem (the first ten)."""
        try:
            errors = sorted(self._validator.iter_errors(dict(arguments)), key=lambda e: e.path)
        except RecursionError:
            raise ToolError.invalid_arguments(
                f"Failed to parse arguments for tool `{tool}`: nested too deeply"
            ) from None
        if not errors:
            return
        lines = []
        for error in errors[:MAX_PROBLEMS]:
            where = ".".join(str(p) for p in error.absolute_path) or "(arguments)"
            lines.append(f"`{where}`: {error.message[:300]}")
        more = f" (and {len(errors) - MAX_PROBLEMS} more)" if len(errors) > MAX_PROBLEMS else ""
        raise ToolError.invalid_arguments(
            f"Failed to parse arguments for tool `{tool}`: " + "; ".join(lines) + more
        )


@lru_cache(maxsize=CACHED_SCHEMAS)
def _compiled(text: str) -> ArgumentCheck | None:
    return ArgumentCheck.of(json.loads(text))
