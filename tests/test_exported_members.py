"""The declared public surface: ``toolhub.__all__`` is exactly the list in docs/contract.md
("Public API"), and every name in it is importable and is toolhub's own (after httpx's
``test_exported_members``); each framework adapter's ``__all__`` is its own and named in
docs/integrations.md."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

import toolhub

ROOT = Path(__file__).resolve().parent.parent
CONTRACT = ROOT / "docs" / "contract.md"


def documented_names() -> list[str]:
    text = CONTRACT.read_text()
    block = re.search(r"<!-- public-api:start -->(.*?)<!-- public-api:end -->", text, re.DOTALL)
    assert block is not None, "docs/contract.md lost its Public API list"
    return re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)`", block.group(1))


def test_exported_names_are_the_documented_ones() -> None:
    documented = documented_names()
    assert len(documented) == len(set(documented)), "a name is listed twice"
    assert len(toolhub.__all__) == len(set(toolhub.__all__)), "a name is exported twice"
    assert sorted(toolhub.__all__) == sorted(documented)


def test_every_exported_name_is_importable_and_defined_by_toolhub() -> None:
    namespace: dict[str, object] = {}
    exec("from toolhub import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(toolhub.__all__)
    for name in toolhub.__all__:
        value = getattr(toolhub, name)
        if name == "__version__":
            assert isinstance(value, str) and value
        elif isinstance(value, ModuleType):
            assert value.__name__.startswith("toolhub."), name
        else:
            module = inspect.getmodule(value)
            assert module is not None and module.__name__.startswith("toolhub."), name


@pytest.mark.parametrize("adapter", ["openai_agents", "pydantic_ai", "langchain"])
def test_each_framework_adapter_exports_its_own_documented_names(adapter: str) -> None:
    module = importlib.import_module(f"toolhub.integrations.{adapter}")
    documented = (ROOT / "docs" / "integrations.md").read_text()
    for name in module.__all__:
        assert inspect.getmodule(getattr(module, name)) is module, name
        assert f"`{name}`" in documented, f"docs/integrations.md never names {name}"


def test_the_package_is_typed() -> None:
    assert (ROOT / "toolhub" / "py.typed").is_file()


def test_the_hook_api_exports_its_own_documented_names() -> None:
    """``toolhub.hooks.__all__``: toolhub's own names, each named in docs/hooks.md."""
    module = importlib.import_module("toolhub.hooks")
    documented = (ROOT / "docs" / "hooks.md").read_text()
    for name in module.__all__:
        value = getattr(module, name)
        if not isinstance(value, str):
            defined = inspect.getmodule(value)
            assert defined is not None and defined.__name__.startswith("toolhub.hooks."), name
        assert f"`{name}`" in documented, f"docs/hooks.md never names {name}"


def test_the_tracing_package_exports_its_own_documented_names() -> None:
    """``toolhub.tracing`` (docs/tracing.md): the names other layers and applications use."""
    module = importlib.import_module("toolhub.tracing")
    documented = (ROOT / "docs" / "tracing.md").read_text()
    parts = [
        importlib.import_module(f"toolhub.tracing.{path.stem}")
        for path in (ROOT / "toolhub" / "tracing").glob("[!_]*.py")
    ]
    for name in module.__all__:
        # Defined in one of the package's modules (``TraceContext`` is a type alias there).
        assert any(vars(part).get(name) is getattr(module, name) for part in parts), name
        assert re.search(f"`{name}[`(]", documented), f"docs/tracing.md never names {name}"
