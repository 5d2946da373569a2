"""OpenAI strict mode for tool definitions: the schema a model can be held to exactly.

Strict mode (``"strict": true`` on a function) makes the model's arguments always match the
schema, but accepts only a subset of JSON Schema: every object closed
(``additionalProperties: false``) and every property listed in ``required``; no ``default``,
no ``oneOf``/``allOf``/``not``, a typed ``items`` for every array, a short list of string
formats, no length or property-count keywords. The rewrite here keeps what a call means:

* an optional property becomes required and nullable (``type: [t, "null"]``, or
  ``anyOf: [..., {"type": "null"}]`` for a schema that is not one typed value); the
  model sends ``null`` for "leave it out", and the erasure layer takes ``null`` as absent
  wherever the parameter refuses it (``toolhub.core.schema.NullPlan``), so the default applies;
* keywords strict mode refuses move into the description (``(default: 2)``), where the model
  still reads them; ``oneOf`` becomes ``anyOf``; ``$ref``s are inlined, and a recursive one,
  which cannot be, is wrapped in ``anyOf`` when it has siblings (strict mode allows them
  there, not beside ``$ref``);
* a union variant strict mode cannot say (an object with any keys, an untyped value) is left
  out when another remains: an external tool's ``object | string`` is then the object's
  JSON text, and the description says so.

A schema that cannot be said at all (an open object or untyped value with no alternative,
``allOf``, tuples) has no strict form: ``strict_schema`` returns None and the tool is listed
non-strict, so one odd external tool does not take strict mode from the others.
"""

from __future__ import annotations

import json
from typing import Any

from toolhub.core.schema import accepts_null, nullable_as_type, one_typed_value, with_null

#: Refused in strict mode; their values go into the description instead.
_TO_DESCRIPTION = (
    "default",
    "minLength",
    "maxLength",
    "minProperties",
    "maxProperties",
    "uniqueItems",
    "contains",
    "minContains",
    "maxContains",
)
#: Refused in strict mode and not expressible another way: the schema has no strict form.
_NO_STRICT_FORM = (
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "prefixItems",
    "dependentRequired",
    "dependentSchemas",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
)
_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_TYPED = ("type", "$ref", "anyOf", "enum", "const")
_DEFS = ("$defs", "definitions")
_MAX_DEPTH = 32
#: Nodes one rewrite may produce: inlining ``$ref``s of a hostile external schema could
#: otherwise grow exponentially.
_MAX_NODES = 10_000


class _NoStrictForm(Exception):
    pass


class _TooLarge(_NoStrictForm):
    """Out of budget: the whole schema has no strict form, not just the variant at hand."""


def strict_schema(schema: dict[str, Any]) -> dict[str, Any] | None:
    """The strict form of a tool's parameter schema (a closed, non-nullable object), or None
    when the schema has none."""
    try:
        out = _Rewrite(schema).root()
    except _NoStrictForm:
        return None
    return out if out["type"] == "object" and "anyOf" not in out else None


class _Rewrite:
    """One schema's rewrite. ``$ref``s to its ``$defs`` are inlined (openai-agents refuses to
    convert an MCP schema with a ``$ref`` left); only a recursive one stays a reference, and
    then the definitions stay too."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.defs = {
            f"#/{key}/{name}": sub
            for key in _DEFS
            if isinstance(schema.get(key), dict)
            for name, sub in schema[key].items()
        }
        self.recursive = False
        self.budget = _MAX_NODES

    def root(self) -> dict[str, Any]:
        out = self.node(self.schema, 0, frozenset(), root=True)
        for key in _DEFS:
            if self.recursive and isinstance(self.schema.get(key), dict):
                out[key] = {
                    name: self.node(sub, 1, frozenset({f"#/{key}/{name}"}))
                    for name, sub in self.schema[key].items()
                }
        return out

    def node(
        self, node: Any, depth: int, expanding: frozenset[str], *, root: bool = False
    ) -> dict[str, Any]:
        self.budget -= 1
        if self.budget < 0:
            raise _TooLarge
        if not isinstance(node, dict) or depth > _MAX_DEPTH:
            raise _NoStrictForm
        if isinstance(node.get("$ref"), str):
            return self.ref(node, depth, expanding, root=root)
        if any(key in node for key in _NO_STRICT_FORM) or ("oneOf" in node and "anyOf" in node):
            raise _NoStrictForm
        out = {k: v for k, v in node.items() if k not in _DEFS}
        notes = [
            f"{key}: {json.dumps(out.pop(key), default=str)}"
            for key in _TO_DESCRIPTION
            if key in node and not (key == "default" and node[key] is None)
        ]
        out.pop("default", None)
        if "format" in out and out["format"] not in _FORMATS:
            notes.append(f"format: {out.pop('format')}")
        if "oneOf" in out:
            out["anyOf"] = out.pop("oneOf")
        if "anyOf" in out:
            out["anyOf"] = self.variants(out["anyOf"], depth, expanding, notes)
        kinds = out.get("type")
        kinds = kinds if isinstance(kinds, list) else [kinds]
        if (
            "object" in kinds
            or (root and "type" not in out)
            or isinstance(out.get("properties"), dict)
        ):
            self.object(out, depth, expanding, root=root)
        if "array" in kinds:
            items = out.get("items")
            if not isinstance(items, dict) or not any(key in items for key in _TYPED):
                raise _NoStrictForm
            out["items"] = self.node(items, depth + 1, expanding)
        if not any(key in out for key in _TYPED):
            raise _NoStrictForm
        if notes:
            text = "; ".join(notes)
            out["description"] = (
                f"{out['description']} ({text})" if out.get("description") else text
            )
        return nullable_as_type(out)  # a union narrowed to one value and null

    def ref(
        self, node: dict[str, Any], depth: int, expanding: frozenset[str], *, root: bool
    ) -> dict[str, Any]:
        """A ``$ref`` inlined (its siblings win), or kept when it recurses; siblings of a kept
        one move beside an ``anyOf``, where strict mode allows them."""
        ref: str = node["$ref"]
        siblings = {k: v for k, v in node.items() if k != "$ref" and k not in _DEFS}
        target = self.defs.get(ref)
        if isinstance(target, dict) and ref not in expanding:
            return self.node({**target, **siblings}, depth + 1, expanding | {ref}, root=root)
        if ref not in expanding and ref != "#":
            raise _NoStrictForm  # a pointer elsewhere: strict mode resolves definitions only
        self.recursive = True
        if not siblings:
            return {"$ref": ref}
        return self.node({**siblings, "anyOf": [{"$ref": ref}]}, depth + 1, expanding)

    def object(
        self, out: dict[str, Any], depth: int, expanding: frozenset[str], *, root: bool
    ) -> None:
        """Close the object and list every property as required, the optional ones nullable.
        An object open to any keys has nothing to close to, except the root: a tool without
        parameters takes an empty object."""
        properties = out.get("properties")
        properties = properties if isinstance(properties, dict) else {}
        is_open = "patternProperties" in out or out.get("additionalProperties", True) is not False
        if is_open and not properties and not root:
            raise _NoStrictForm
        out.pop("patternProperties", None)
        if root or "type" not in out:
            out["type"] = "object"
        listed = out.get("required")
        required = {r for r in listed if isinstance(r, str)} if isinstance(listed, list) else set()
        converted = {}
        for name, sub in properties.items():
            schema = self.node(sub, depth + 1, expanding)
            converted[name] = schema if name in required else _nullable(schema)
        out["properties"] = converted
        out["required"] = list(converted)
        out["additionalProperties"] = False

    def variants(
        self, variants: Any, depth: int, expanding: frozenset[str], notes: list[str]
    ) -> list[dict[str, Any]]:
        """The variants strict mode can say; an open-object variant beside a string one is
        the object's JSON text, and the description says so."""
        if not isinstance(variants, list):
            raise _NoStrictForm
        kept, dropped = [], []
        for variant in variants:
            try:
                kept.append(self.node(variant, depth + 1, expanding))
            except _TooLarge:
                raise
            except _NoStrictForm:
                dropped.append(variant)
        if not kept:
            raise _NoStrictForm
        if any(isinstance(v, dict) and v.get("type") == "object" for v in dropped) and any(
            v.get("type") == "string" for v in kept
        ):
            notes.append("send the object as its JSON text")
        return kept


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    if accepts_null(schema):
        return schema
    if one_typed_value(schema):
        return with_null(schema)  # ``type: [t, "null"]``: what every converter keeps whole
    if "anyOf" in schema:
        return {**schema, "anyOf": [*schema["anyOf"], {"type": "null"}]}
    outer: dict[str, Any] = {k: schema[k] for k in ("description", "title") if k in schema}
    inner = {k: v for k, v in schema.items() if k not in outer}
    return {**outer, "anyOf": [inner, {"type": "null"}]}
