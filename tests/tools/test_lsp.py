"""lsp against a real python-lsp-server (pylsp) on a small generated package."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.tools.servers.drive import call, snapshot
from toolhub.backends.lsp_client import LspManager, _read_message, code_points, utf16_units
from toolhub.backends.workspace import Workspace
from toolhub.core import Container, ErrorKind, Outcome, Params, ToolContext
from toolhub.tools.lsp import Lsp
from toolhub.tools.lsp_call import LspCall
from toolhub.tools.lsp_models import LspOutput, LspParams

SHAPES = '''"""Shapes."""
import math


class Circle:
    """A circle with a radius."""

    def __init__(self, radius: float) -> None:
        self.radius = radius

    def area(self) -> float:
        """Area of the circle."""
        return math.pi * self.radius ** 2


def area(shape: Circle) -> float:
    """Area of any shape."""
    return shape.area()
'''

MAIN = """from pkg.shapes import Circle, area

c = Circle(2.0)
print(area(c))
total = area(Circle(1.0))
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Container]]:
    root = tmp_path_factory.mktemp("lsp_project")
    (root / "pkg").mkdir()
    (root / "pkg/__init__.py").write_text("")
    (root / "pkg/shapes.py").write_text(SHAPES)
    (root / "pkg/main.py").write_text(MAIN)
    (root / "notes.txt").write_text("not code")
    container = Container()
    container.insert(Workspace(root))
    container.insert(LspParams(request_timeout_s=60), Params[LspParams])
    yield root, container
    manager = container.get(LspManager)
    if manager is not None:
        manager.close()


def ask(project: tuple[Path, Container], **args: Any) -> Outcome:
    return call(Lsp(), ToolContext(call_id="l1", container=project[1]), args)[1]


def result(outcome: Outcome) -> LspOutput:
    assert outcome.error is None, outcome.error
    assert outcome.output is not None
    return outcome.output.parse(LspOutput)


def test_go_to_definition(project: tuple[Path, Container]) -> None:
    out = ask(project, operation="goToDefinition", file_path="pkg/main.py", line=3, character=5)
    (item,) = result(out).items
    assert (item.path, item.line, item.character) == ("pkg/shapes.py", 5, 7)
    assert item.text == "class Circle:"
    assert "pkg/shapes.py:5:7: class Circle:" in out.text


def test_find_references(project: tuple[Path, Container]) -> None:
    out = ask(project, operation="findReferences", file_path="pkg/shapes.py", line=16, character=5)
    places = {(i.path, i.line) for i in result(out).items}
    assert {
        ("pkg/shapes.py", 16),
        ("pkg/main.py", 1),
        ("pkg/main.py", 4),
        ("pkg/main.py", 5),
    } <= places
    assert ("pkg/shapes.py", 11) not in places


def test_hover(project: tuple[Path, Container]) -> None:
    out = ask(project, operation="hover", file_path="pkg/main.py", line=4, character=7)
    assert "Area of any shape" in (result(out).hover or "")


def test_document_symbols(project: tuple[Path, Container]) -> None:
    out = ask(project, operation="documentSymbol", file_path="pkg/shapes.py")
    symbols = [(i.name, i.kind, i.container, i.line) for i in result(out).items]
    assert ("Circle", "class", None, 5) in symbols
    assert ("area", "function", None, 16) in symbols
    assert ("area", "method", "Circle", 11) in symbols
    assert "method area in Circle — pkg/shapes.py:11:5" in out.text


def test_workspace_symbols_fall_back_to_a_labelled_scan(project: tuple[Path, Container]) -> None:
    out = ask(project, operation="workspaceSymbol", query="circ")
    found = result(out)
    assert [(i.name, i.path) for i in found.items] == [("Circle", "pkg/shapes.py")]
    assert found.note is not None and "documentSymbol scan of 3 file(s)" in found.note


def test_edits_are_seen(project: tuple[Path, Container]) -> None:
    root = project[0]
    extra = root / "pkg/extra.py"
    extra.write_text("def first():\n    return 1\n")
    before = result(ask(project, operation="documentSymbol", file_path="pkg/extra.py"))
    extra.write_text("def first():\n    return 1\n\n\ndef second():\n    return 2\n")
    after = result(ask(project, operation="documentSymbol", file_path="pkg/extra.py"))
    extra.unlink()
    assert [i.name for i in before.items] == ["first"]
    assert [i.name for i in after.items] == ["first", "second"]


@pytest.mark.parametrize(
    ("args", "kind"),
    [
        ({"operation": "hover"}, ErrorKind.INVALID_ARGUMENTS),
        ({"operation": "hover", "file_path": "pkg/main.py"}, ErrorKind.INVALID_ARGUMENTS),
        (
            {"operation": "hover", "file_path": "pkg/main.py", "line": 0, "character": 1},
            ErrorKind.INVALID_ARGUMENTS,
        ),
        (
            {"operation": "hover", "file_path": "pkg/main.py", "line": 99, "character": 1},
            ErrorKind.INVALID_ARGUMENTS,
        ),
        ({"operation": "rename", "file_path": "pkg/main.py"}, ErrorKind.INVALID_ARGUMENTS),
        ({"operation": "documentSymbol", "file_path": "notes.txt"}, ErrorKind.INVALID_ARGUMENTS),
        ({"operation": "documentSymbol", "file_path": "pkg/nope.py"}, ErrorKind.NOT_FOUND),
        (
            {"operation": "documentSymbol", "file_path": "/etc/hostname"},
            ErrorKind.PERMISSION_DENIED,
        ),
        (
            {"operation": "documentSymbol", "file_path": "../outside.py"},
            ErrorKind.PERMISSION_DENIED,
        ),
        ({"operation": "workspaceSymbol"}, ErrorKind.INVALID_ARGUMENTS),
    ],
)
def test_bad_input_is_typed_and_harmless(
    project: tuple[Path, Container], args: dict[str, Any], kind: ErrorKind
) -> None:
    before = snapshot(project[0])
    out = ask(project, **args)
    assert out.error is not None and out.error.kind is kind, out.error
    assert snapshot(project[0]) == before


def test_one_server_is_reused_and_closed(project: tuple[Path, Container]) -> None:
    ask(project, operation="documentSymbol", file_path="pkg/main.py")
    manager = project[1].require(LspManager)
    client = manager.client("python")
    ask(project, operation="documentSymbol", file_path="pkg/shapes.py")
    assert manager.client("python") is client and client.alive


def test_missing_server_binary(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    container = Container()
    container.insert(Workspace(tmp_path))
    container.insert(LspParams(servers={"python": ["no-such-lsp-server"]}), Params[LspParams])
    out = call(
        Lsp(),
        ToolContext(call_id="l2", container=container),
        {"operation": "documentSymbol", "file_path": "a.py"},
    )[1]
    assert out.error is not None and out.error.code == "lsp_unavailable"


def test_close_stops_the_server(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    container = Container()
    container.insert(Workspace(tmp_path))
    ctx = ToolContext(call_id="l3", container=container)
    out = call(Lsp(), ctx, {"operation": "documentSymbol", "file_path": "a.py"})[1]
    assert [i.name for i in result(out).items] == ["x"]
    manager = container.require(LspManager)
    client = manager.client("python")
    manager.close()
    assert not client.alive


def test_positions_convert_between_code_points_and_utf16() -> None:
    line = "s = '😀' + name"
    column = line.index("name")
    assert utf16_units(line, column) == column + 1
    assert code_points(line, column + 1) == column


def test_framing_skips_malformed_messages() -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "result": None}).encode()
    stream = io.BytesIO(
        b"Content-Length: x\r\n\r\n"
        + b"Content-Length: 5\r\n\r\n{oops"
        + b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc\r\n\r\n" % len(body)
        + body
        + b"Content-Length: 99\r\n\r\n{}"
    )
    assert _read_message(stream) == {"jsonrpc": "2.0", "id": 1, "result": None}
    assert _read_message(stream) is None


def test_a_servers_location_never_shows_a_file_outside_the_workspace(tmp_path: Path) -> None:
    """The server runs project code: the URIs it answers with are hostile input. A location
    that climbs out with ``..``, or names a link inside the workspace that leads out, gets no
    line text (the host's file is never read); one inside does."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "ok.py").write_text("inside = 1\n")
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret\n")
    (root / "link.txt").symlink_to(secret)
    container = Container()
    container.insert(Workspace(root))
    session = LspCall(ToolContext(call_id="l2", container=container), Workspace(root), LspParams())
    start = {"range": {"start": {"line": 0, "character": 0}}}

    def text(path: str) -> str | None:
        item = session.location({"uri": f"file://{path}", **start})
        assert item is not None
        return item.text

    assert text(f"{root}/ok.py") == "inside = 1"
    assert text(f"{root}/../secret.txt") is None
    assert text(f"{root}/link.txt") is None
    assert text(str(secret)) is None
