"""JSON Schema clean-up for tool definitions: what providers accept and models read best.

``$ref``s are inlined (several providers reject or mishandle them), generated ``title``s and the
root description are dropped (noise the model pays tokens for), and every object schema carries
``properties`` and ``required`` (some providers reject an object without them).
"""

from __future__ import annotations

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
