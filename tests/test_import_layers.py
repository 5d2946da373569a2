"""Imports point down the layer list only.

``LAYERS`` orders every top-level module and package of toolhub, and the ``workers`` package,
from the bottom (``core``) to the top (``cli``); docs/architecture.md draws the same list. A
module may import from its own layer or one below it, never from one above, and no modules —
nor packages of one layer — import each other in a circle. Lazy imports inside functions count
(they hide the dependency, they do not remove it); only ``if TYPE_CHECKING:`` imports are left
out. The unit is the package: ``toolhub.<name>`` for a package or module of toolhub,
``toolhub`` alone for ``toolhub/__init__.py`` (the public facade), ``workers`` for the worker
process.
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Bottom to top; the names of one layer may import each other (without circles).
LAYERS: list[tuple[str, ...]] = [
    ("core",),
    (
        "errors",
        "redaction",
        "logs",
        "tracing",
        "ports",
        "gc_pauses",
        "process_heap",
        "stop_signals",
        "loop_thread",
        "fences",
        "env_refs",
    ),
    ("sandbox",),
    ("backends",),
    ("distributed",),
    ("answers", "approvals", "state", "subagents", "tasks"),
    ("toolset",),
    ("tools",),
    ("tenancy",),
    ("sources", "hooks"),
    ("executors",),
    ("assembly", "session_parts"),
    ("session", "session_sync", "session_approvals", "session_close", "session_runner"),
    ("toolhub",),
    ("http_guard", "integrations", "mcp", "gateway"),
    ("stack",),
    ("workers",),
    ("cli",),
]


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


def _is_type_checking(test: ast.expr) -> bool:
    """``if TYPE_CHECKING:`` or ``if typing.TYPE_CHECKING:``."""
    return getattr(test, "id", getattr(test, "attr", "")) == "TYPE_CHECKING"


@functools.cache
def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text())
        type_only: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                type_only |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
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


def _unit(module: str) -> str:
    """The name ``LAYERS`` knows a module by."""
    parts = module.split(".")
    if parts[0] == "workers":
        return "workers"
    return parts[1] if len(parts) > 1 else "toolhub"


LAYER_OF = {name: number for number, names in enumerate(LAYERS, 1) for name in names}


def _upward(graph: dict[str, set[str]], layer_of: dict[str, int]) -> list[str]:
    """Every import that points up the list, as a sentence naming both ends and both layers."""
    found = []
    for module, deps in sorted(graph.items()):
        for dep in sorted(deps):
            low, high = _unit(module), _unit(dep)
            if layer_of[high] > layer_of[low]:
                found.append(
                    f"{module} (layer {layer_of[low]}, {low}) imports {dep} "
                    f"(layer {layer_of[high]}, {high}), which sits above it"
                )
    return found


def _units(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between packages (an import inside one package is no edge)."""
    units: dict[str, set[str]] = {}
    for module, deps in graph.items():
        edges = units.setdefault(_unit(module), set())
        edges |= {_unit(dep) for dep in deps} - {_unit(module)}
    return units


def test_every_package_has_a_layer() -> None:
    present = {_unit(module) for module in MODULES}
    listed = set(LAYER_OF)
    assert sorted(present - listed) == [], "put each new package in LAYERS"
    assert sorted(listed - present) == [], "LAYERS names a package that does not exist"


def test_imports_point_down_the_layers() -> None:
    assert _upward(_graph(), LAYER_OF) == []


def test_packages_import_each_other_without_circles() -> None:
    assert _cycles(_units(_graph())) == []


def test_no_import_circles() -> None:
    assert _cycles(_graph()) == []


def test_the_checker_finds_an_upward_import() -> None:
    graph = {
        "toolhub.errors": {"toolhub.core.tool"},
        "toolhub.toolset.builder": {"toolhub.tools.shell", "toolhub.core.tool"},
        "toolhub.tools.shell": {"toolhub.toolset.config"},
        "toolhub.answers.redis": {"toolhub.tasks.base"},
        "workers.app": {"toolhub"},
        "toolhub": {"toolhub.session"},
    }
    layer_of = {"core": 1, "errors": 2, "answers": 6, "tasks": 6, "toolset": 7, "tools": 8}
    layer_of |= {"session": 13, "toolhub": 14, "workers": 17}
    assert _upward(graph, layer_of) == [
        "toolhub.toolset.builder (layer 7, toolset) imports toolhub.tools.shell "
        "(layer 8, tools), which sits above it"
    ]


def test_the_detector_finds_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_detector_finds_a_circle_between_packages() -> None:
    graph = {
        "toolhub.tasks.redis": {"toolhub.answers.base"},
        "toolhub.answers.local": {"toolhub.tasks"},
    }
    assert _cycles(_units(graph)) == [["answers", "tasks"]]


def _drawn_layers() -> list[tuple[str, ...]]:
    """The layers docs/architecture.md draws: each row of its layer table, bottom first."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text.split("<!-- layers:start -->")[1].split("<!-- layers:end -->")[0]
    rows = [row for row in table.splitlines() if re.match(r"\|\s*\d+\s*\|", row)]
    drawn = []
    for row in rows:
        cells = row.split("|")
        number, names = int(cells[1]), tuple(re.findall(r"`([\w/.]+)`", cells[2]))
        drawn.append((number, tuple(_drawn_name(name) for name in names)))
    assert [n for n, _ in drawn] == sorted(n for n, _ in drawn), "number the rows bottom up"
    return [names for _, names in drawn]


def _drawn_name(name: str) -> str:
    """``toolhub/core/``, ``toolhub/errors.py``, ``toolhub/__init__.py``, ``workers/`` → the
    names ``LAYERS`` uses."""
    if name == "toolhub/__init__.py":
        return "toolhub"
    return name.removeprefix("toolhub/").removesuffix("/").removesuffix(".py")


def test_the_docs_draw_the_same_layers() -> None:
    assert _drawn_layers() == LAYERS
