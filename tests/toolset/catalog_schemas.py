"""Every catalog tool's definition as toolhub lists it, and the walk that checks an SDK's
conversion of one keeps every description, bound and required field: shared by the tests that
run SDK converters (``test_definitions_survive_converters.py``) and validators
(``test_definitions_validate.py``) over the definitions."""

from __future__ import annotations

import functools
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from toolhub import Session
from toolhub.tools import CATALOG

#: Keywords a converter may not drop, and google-genai's names for them.
BOUNDS = {
    "minimum": "minimum",
    "maximum": "maximum",
    "minLength": "min_length",
    "maxLength": "max_length",
    "minItems": "min_items",
    "maxItems": "max_items",
}


def families() -> list[dict[str, Any]]:
    """One config per tool family (``Main``, ``Codex``, ...): a family's tools need each
    other, so each is listed in a session of its own family."""
    ids: dict[str, list[str]] = defaultdict(list)
    for tool in CATALOG.tools:
        ids[tool.fq_id().split(":")[0]].append(tool.fq_id())
    return [{"tools": [{"id": fq} for fq in family]} for family in ids.values()]


@functools.cache
def catalog_definitions(strict: bool) -> dict[str, dict[str, Any]]:
    """Every catalog tool's parameters (by tool id); shared, so callers copy before changing."""
    found: dict[str, dict[str, Any]] = {}
    for config in families():
        ids = [tool["id"] for tool in config["tools"]]
        with Session.embedded(config, tempfile.mkdtemp()) as session:
            for fq, definition in zip(
                ids, session.definitions("openai", strict=strict), strict=True
            ):
                found[fq] = definition["function"]["parameters"]
    assert len(found) == len(CATALOG.tools)
    return found


def properties(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    """Each property schema, nested objects' and array items' included, by its path."""
    for name, prop in (schema.get("properties") or {}).items():
        where = f"{path}{name}"
        yield where, prop
        for inner in (prop, prop.get("items") or {}):
            if isinstance(inner, dict) and inner.get("properties"):
                yield from properties(inner, where + ".")


def at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    node = schema
    for part in path.split("."):
        props = node.get("properties") or (node.get("items") or {}).get("properties")
        assert props is not None and part in props, f"{path}: lost"
        node = props[part]
    return node


def assert_kept(tool: str, before: dict[str, Any], after: dict[str, Any], names=None) -> None:
    """``after`` (a converter's output) keeps ``before``'s required fields, and each property's
    description and bounds, a bound either as its keyword (``names``: the converter's name for
    it) or spelled out in the description."""
    names = names or {key: key for key in BOUNDS}
    assert sorted(after.get("required", [])) == sorted(before.get("required", [])), tool
    for path, prop in properties(before):
        got = at(after, path)
        if "description" in prop:
            assert prop["description"] in (got.get("description") or ""), f"{tool}.{path}"
        for key, name in names.items():
            if key in prop:
                assert got.get(name) == prop[key] or f"{key}" in (got.get("description") or ""), (
                    f"{tool}.{path}: {key} lost"
                )
