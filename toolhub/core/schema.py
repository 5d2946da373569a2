"""JSON Schema clean-up for tool definitions: what providers accept and models read best.

``$ref``s are inlined (several providers reject or mishandle them), generated ``title``s and the
root description are dropped (noise the model pays tokens for), and every object schema carries
``properties`` and ``required`` (some providers reject an object without them). A nullable
value that pydantic spells ``anyOf: [X, {"type": "null"}]`` becomes X with ``type: [t, "null"]``
(``null`` joins its ``enum`` too): the same set of values, in the form every converter keeps
whole (google-genai collapses the ``anyOf`` and drops its sibling ``description``).

``null_plan`` reads the same schema the other way: which explicit ``null``s in a call's
arguments mean "absent" (see ``NullPlan``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_SCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONE = ("items", "additionalProperties", "not")


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    defs = schema.get("$defs", {})
    out: dict[str, Any] = _clean(schema, defs, depth=0)
    out.pop("title", None)
    out.pop("description", None)
    out.pop("$defs", None)
    out.setdefault("type", "object")
    out.setdefault("properties", {})
    out.setdefault("required", [])
    return out


def _clean(node: Any, defs: dict[str, Any], depth: int) -> Any:
    if not isinstance(node, dict):
        return node
    if "$ref" in node and depth < 32:
        name = node["$ref"].rsplit("/", 1)[-1]
        merged = {**defs.get(name, {}), **{k: v for k, v in node.items() if k != "$ref"}}
        return _clean(merged, defs, depth + 1)
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {k: _clean(v, defs, depth + 1) for k, v in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = [_clean(v, defs, depth + 1) for v in value]
        elif key in _SCHEMA_ONE and isinstance(value, dict):
            out[key] = _clean(value, defs, depth + 1)
        else:
            out[key] = value
    if out.get("type") == "object":
        out.setdefault("properties", {})
        out.setdefault("required", [])
    out.pop("$defs", None)
    return nullable_as_type(out)


#: Keys that make a schema more than one typed value: it keeps its ``anyOf`` form.
_COMPOSED = ("anyOf", "oneOf", "allOf", "$ref", "const", "not")
_NULL = {"type": "null"}


def nullable_as_type(node: dict[str, Any]) -> dict[str, Any]:
    """``anyOf: [X, {"type": "null"}]`` (either order) as X with ``"null"`` in its ``type``
    (and ``enum``), when X is one typed value; any other schema unchanged. Keys beside the
    ``anyOf`` (``description``, ``default``) win over X's own."""
    variants = node.get("anyOf")
    if not isinstance(variants, list) or len(variants) != 2 or _NULL not in variants:
        return node
    value = variants[1] if variants[0] == _NULL else variants[0]
    if not one_typed_value(value):
        return node
    return {**with_null(value), **{k: v for k, v in node.items() if k != "anyOf"}}


def one_typed_value(node: Any) -> bool:
    """A schema of one ``type`` (a string) other than an object, not composed of others. An
    object keeps the ``anyOf`` form: strict converters check an object's closure by its
    ``type`` being exactly ``"object"``."""
    return (
        isinstance(node, dict)
        and isinstance(node.get("type"), str)
        and node["type"] != "object"
        and not any(key in node for key in _COMPOSED)
    )


def with_null(value: dict[str, Any]) -> dict[str, Any]:
    """One typed value (a string ``type``) that also admits ``null``."""
    out = {**value, "type": [value["type"], "null"]}
    enum = value.get("enum")
    if isinstance(enum, list) and None not in enum:
        out["enum"] = [*enum, None]
    return out


def rename_properties(schema: dict[str, Any], mapping: dict[str, str]) -> dict[str, Any]:
    """The schema with top-level property keys and ``required`` entries renamed (canonical →
    client); nested schemas keep their names, as the reverse mapping is top-level only."""
    if not mapping:
        return schema
    out = dict(schema)
    out["properties"] = {mapping.get(k, k): v for k, v in schema.get("properties", {}).items()}
    out["required"] = [mapping.get(k, k) for k in schema.get("required", [])]
    return out


def accepts_null(node: Any) -> bool:
    """Whether a schema admits ``null``: a ``null`` type or variant, ``null`` among the enum or
    as the const, or no type constraint at all. A ``$ref`` left after clean-up is a recursive
    model, an object."""
    if not isinstance(node, dict):
        return node is True
    variants = _variants(node)
    if variants:
        return any(accepts_null(v) for v in variants)
    if "enum" in node:
        return isinstance(node["enum"], list) and None in node["enum"]
    if "const" in node:
        return node["const"] is None
    kind = node.get("type")
    if kind is None:
        return "$ref" not in node
    return kind == "null" or (isinstance(kind, list) and "null" in kind)


class NullPlan:
    """Where an explicit ``null`` means "absent": the optional properties whose schema refuses
    ``null``, at the top level and in nested objects (directly, in arrays, in ``anyOf``).

    A model in strict mode must send every property, and sends ``null`` for the ones it means
    to leave out (the strict form makes them nullable for that reason). Dropping those before
    validation lets the default apply, so ``bash.is_background: null`` is ``false``, not
    "Input should be a valid boolean" — without a ``| None`` on every optional field."""

    __slots__ = ("absent", "nested")

    def __init__(self, absent: frozenset[str], nested: dict[str, NullPlan]) -> None:
        self.absent = absent
        self.nested = nested

    def may_change(self, value: Mapping[str, Any]) -> bool:
        """False when ``apply`` would give ``value`` back as it is (no ``null`` at the top and
        nothing deeper to look at): the common case, which then needs no copy."""
        return bool(self.nested) or None in value.values()

    def apply(self, value: Mapping[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in value.items():
            if item is None and key in self.absent:
                continue
            plan = self.nested.get(key)
            out[key] = item if plan is None else plan._within(item)
        return out

    def _within(self, item: Any) -> Any:
        if isinstance(item, dict):
            return self.apply(item)
        if isinstance(item, list):
            return [self._within(x) for x in item]
        return item


def null_plan(schema: Mapping[str, Any], depth: int = 0) -> NullPlan | None:
    """The plan for an object schema, or None when no ``null`` there needs dropping. Schemas
    from elsewhere (external tools) may be malformed: what is not a schema is left alone."""
    properties = schema.get("properties")
    if not isinstance(properties, dict) or depth > 32:
        return None
    listed = schema.get("required")
    required = set(r for r in listed if isinstance(r, str)) if isinstance(listed, list) else set()
    absent = frozenset(
        name for name, sub in properties.items() if name not in required and not accepts_null(sub)
    )
    nested = {}
    for name, sub in properties.items():
        inner = _object_inside(sub, depth)
        plan = null_plan(inner, depth + 1) if inner is not None else None
        if plan is not None:
            nested[name] = plan
    return NullPlan(absent, nested) if absent or nested else None


def _object_inside(node: Any, depth: int) -> Mapping[str, Any] | None:
    """The one object schema a property holds (itself, its array items, one ``anyOf``
    variant); None when it holds none, or several (which one applies is the validator's
    call, so their nulls are left alone)."""
    if not isinstance(node, dict) or depth > 32:
        return None
    if isinstance(node.get("properties"), dict):
        return node
    found = [
        inner
        for sub in (node.get("items"), *_variants(node))
        if (inner := _object_inside(sub, depth + 1)) is not None
    ]
    return found[0] if len(found) == 1 else None


def _variants(node: Mapping[str, Any]) -> list[Any]:
    return [v for key in ("anyOf", "oneOf") if isinstance(node.get(key), list) for v in node[key]]
