"""Plugins arrive through the ``toolhub.plugins`` entry-point group, as installed packages do:
the test lays out a real distribution (dist-info + module) on ``sys.path``."""

import sys
import textwrap

import pytest

from toolhub.toolset import ToolSetBuilder

PLUGIN = textwrap.dedent(
    """
    from pydantic import BaseModel
    from toolhub import Tool, ToolKind

    class A(BaseModel):
        name: str

    class O(BaseModel):
        greeting: str

    class Greet(Tool[A, O]):
        id = "greet"
        namespace = "Acme"
        kind = ToolKind.OTHER
        description_template = "Greet someone."

        def run(self, ctx, args):
            return O(greeting=f"hello {args.name}")

    def register(builder):
        builder.register(Greet)

    def broken(builder):
        raise RuntimeError("plugin bug")
    """
)


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    (tmp_path / "acme_tools.py").write_text(PLUGIN)
    dist = tmp_path / "acme_tools-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-tools\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[toolhub.plugins]\nacme = acme_tools:register\nbroken = acme_tools:broken\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    sys.modules.pop("acme_tools", None)


def test_entry_point_plugins_register_tools_and_failures_are_reported(installed_plugin):
    builder = ToolSetBuilder()
    toolset = builder.build({"tools": [{"id": "Acme:greet"}]})
    result = toolset.execute_sync(toolset.prepare("greet", {"name": "Ada"}, "c"))
    assert result.prompt_text == "hello Ada"
    assert len(builder.plugin_errors) == 1 and "plugin bug" in builder.plugin_errors[0]


def test_without_plugins_the_tool_is_unknown(installed_plugin):
    report = ToolSetBuilder(plugins=False).validate({"tools": [{"id": "Acme:greet"}]})
    assert [v.category for v in report.violations] == ["tool_not_found"]


def test_a_builder_without_a_catalog_says_where_the_built_ins_are() -> None:
    from toolhub.tools import CATALOG

    config = {"tools": [{"id": "Main:read_file"}]}
    report = ToolSetBuilder(plugins=False).validate(config)
    assert [v.category for v in report.violations] == ["tool_not_found"]
    assert "ToolSetBuilder(CATALOG)" in report.violations[0].message
    assert ToolSetBuilder(CATALOG, plugins=False).validate(config).violations == []
