"""Imports point down only: no module of toolhub or workers reaches, directly or through
others, back to itself — lazy imports inside functions included (they hide a circle, they do
not remove it); only ``if TYPE_CHECKING:`` imports are left out. And the layers that sit below
the session never import it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _modules() -> dict[str, Path]:
    found = {}
    for path in [*(ROOT / "toolhub").rglob("*.py"), *(ROOT / "workers").rglob("*.py")]:
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = module.split(".")
        if node.level:
            if MODULES[module].name != "__init__.py":
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join([*base, *([node.module] if node.module else [])])
        else:
            prefix = node.module or ""
        subs = [f"{prefix}.{alias.name}" for alias in node.names]
        names = [name for name in subs if name in MODULES]
        if len(names) < len(subs):
            names.append(prefix)
    resolved = set()
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            resolved.add(name)
    return resolved


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        type_only: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
                type_only |= {id(n) for n in ast.walk(node)}
        deps: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom) and id(node) not in type_only:
                deps |= _targets(module, node)
        graph[module] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for dep in graph.get(node, ()):
            if dep not in index:
                visit(dep)
                low[node] = min(low[node], low[dep])
            elif dep in on_stack:
                low[node] = min(low[node], index[dep])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def test_no_import_circles() -> None:
    assert _cycles(_graph()) == []


def test_the_detector_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_layers_below_the_session_never_import_it() -> None:
    graph = _graph()
    below = [
        m
        for m in graph
        if m.split(".")[1:2]
        and m.split(".")[1]
        in {
            "core",
            "toolset",
            "backends",
            "tools",
            "distributed",
            "store",
            "executors",
            "sources",
            "mcp",
        }
    ]
    offenders = [m for m in below if "toolhub.session" in graph[m]]
    assert offenders == []
