"""use_tool / search_tool, the Codex variants (apply_patch atomicity, read_file, list_dir,
grep_files), and the skill-discovery reminder."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.tools.harness import Harness, snapshot
from toolhub.backends import workspace as workspace_module
from toolhub.backends.tool_index import EnabledToolNames, InMemoryToolIndex, ToolEntry, ToolIndex
from toolhub.core import CallResult, ErasedTool, ErrorKind, ToolError, ToolOutput
from toolhub.tools.codex import ApplyPatch, CodexListDir, CodexReadFile, GrepFiles
from toolhub.tools.meta import SearchTool, UseTool, UseToolParams
from toolhub.tools.read_file import ReadFile


class FakeDispatch:
    def __init__(self, result: CallResult) -> None:
        self.result = result
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, name: str, arguments: Mapping[str, Any]) -> CallResult:
        self.calls.append((name, dict(arguments)))
        return self.result


def use(harness: Harness, args: dict[str, Any], dispatch: FakeDispatch) -> Any:
    ctx = harness.context(UseTool)
    ctx.dispatch = dispatch
    erased = ErasedTool(UseTool())

    async def go() -> Any:
        try:
            parsed = erased.parse_args(args, client_name="use_tool")
        except ToolError as err:
            return err
        async for item in erased.stream(ctx, parsed):
            return item
        return None

    return asyncio.run(go())


def ok_result(text: str, value: Any = None) -> CallResult:
    return CallResult(name="t__x", prompt_text=text, output=ToolOutput.dynamic(value or {}))


def test_use_tool_dispatches_and_parses_string_input(harness: Harness) -> None:
    dispatch = FakeDispatch(ok_result("12:00", {"time": "12:00"}))
    out = use(harness, {"tool_name": "time__now", "tool_input": '{"tz": "UTC"}'}, dispatch)
    assert out.error is None and out.text == "12:00"
    assert dispatch.calls == [("time__now", {"tz": "UTC"})]
    out = use(harness, {"tool_name": "time__now", "tool_input": "null"}, dispatch)
    assert dispatch.calls[-1] == ("time__now", {})


def test_use_tool_refuses_native_and_bad_names_without_dispatching(harness: Harness) -> None:
    harness.container.insert(EnabledToolNames(frozenset({"read_file"})))
    dispatch = FakeDispatch(ok_result("x"))
    out = use(harness, {"tool_name": "read_file", "tool_input": {}}, dispatch)
    assert out.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert "native tool" in out.error.detail and "call `read_file` directly" in out.error.detail
    out = use(harness, {"tool_name": "frobnicate", "tool_input": {}}, dispatch)
    assert "search_tool" in out.error.detail
    out = use(harness, {"tool_name": "a__b", "tool_input": "{not json"}, dispatch)
    assert out.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert "`tool_input` is not valid JSON" in out.error.detail
    out = use(harness, {"tool_name": "a__b", "tool_input": "[1, 2]"}, dispatch)
    assert out.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert "`tool_input` must be a JSON object, got list" in out.error.detail
    assert dispatch.calls == []


def test_use_tool_takes_an_object_too_though_its_schema_says_text(harness: Harness) -> None:
    dispatch = FakeDispatch(ok_result("12:00"))
    out = use(harness, {"tool_name": "time__now", "tool_input": {"tz": "UTC"}}, dispatch)
    assert out.error is None and dispatch.calls == [("time__now", {"tz": "UTC"})]
    out = use(harness, {"tool_name": "time__now", "tool_input": None}, dispatch)
    assert out.error is None and dispatch.calls[-1] == ("time__now", {})


def test_use_tool_truncates_large_output_and_passes_errors(harness: Harness) -> None:
    big = "é" * 30_000
    out = use(harness, {"tool_name": "s__big"}, FakeDispatch(ok_result(big)))
    assert out.output.model.truncated
    assert len(out.text.encode()) < 20_200 and "output truncated at 20000" in out.text
    harness.set_params(UseToolParams(max_output_bytes=100))
    out = use(harness, {"tool_name": "s__big"}, FakeDispatch(ok_result(big)))
    assert "truncated at 100" in out.text
    failing = CallResult.failure("s__x", ToolError.not_found("Unknown tool `s__x`."))
    out = use(harness, {"tool_name": "s__x"}, FakeDispatch(failing))
    assert out.error.kind is ErrorKind.NOT_FOUND


def test_search_tool_ranks_and_handles_missing_index(harness: Harness) -> None:
    res = harness.call(SearchTool, {"query": "time"})
    assert res.output.tools == [] and "No external tools" in res.text
    index = InMemoryToolIndex()
    index.add(ToolEntry("clock__now", "Current time.", {"properties": {"tz": {"type": "string"}}}))
    index.add(ToolEntry("db__query", "Run SQL.", {"properties": {"sql": {}}}))
    harness.container.insert(index, ToolIndex)
    res = harness.call(SearchTool, {"query": "current time", "limit": 1})
    assert [t.name for t in res.output.tools] == ["clock__now"]
    assert '"tz"' in res.text and "use_tool" in res.text


PATCH_OK = """*** Begin Patch
*** Add File: new/hello.txt
+hello
+world
*** Update File: src/app.py
@@ def main():
-    return 1
+    return 2
*** Delete File: old.txt
*** Update File: src/name.py
*** Move to: src/renamed.py
@@
-NAME = 'a'
+NAME = 'b'
*** End Patch"""


@pytest.fixture
def codebase(ws: Path) -> Path:
    (ws / "src").mkdir()
    (ws / "src/app.py").write_text("import os\n\ndef main():\n    return 1\n")
    (ws / "src/name.py").write_text("NAME = 'a'\n")
    (ws / "old.txt").write_text("bye\n")
    return ws


def test_apply_patch_add_update_delete_move(harness: Harness, codebase: Path) -> None:
    res = harness.call(ApplyPatch, {"patch": PATCH_OK})
    assert res.output.status == "applied", res.text
    assert (codebase / "new/hello.txt").read_text() == "hello\nworld\n"
    assert (codebase / "src/app.py").read_text() == "import os\n\ndef main():\n    return 2\n"
    assert not (codebase / "old.txt").exists()
    assert not (codebase / "src/name.py").exists()
    assert (codebase / "src/renamed.py").read_text() == "NAME = 'b'\n"
    assert res.text.startswith("Success.") and "D old.txt" in res.text


def test_apply_patch_that_does_not_fit_changes_nothing(harness: Harness, codebase: Path) -> None:
    before = snapshot(codebase)
    bad = PATCH_OK.replace("-    return 1", "-    return 42")
    res = harness.call(ApplyPatch, {"patch": bad})
    assert res.output.status == "failed" and "not found" in res.text
    assert snapshot(codebase) == before


def test_apply_patch_rolls_back_when_a_write_fails(
    harness: Harness, codebase: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(codebase)
    real = workspace_module.Workspace.write
    writes = [0]

    def flaky(self: workspace_module.Workspace, path: Path, data: bytes) -> bool:
        writes[0] += 1
        if writes[0] == 2:
            raise OSError(28, "No space left on device")
        return real(self, path, data)

    monkeypatch.setattr(workspace_module.Workspace, "write", flaky)
    res = harness.call(ApplyPatch, {"patch": PATCH_OK})
    assert res.error is not None and "restored" in res.error.detail
    monkeypatch.setattr(workspace_module.Workspace, "write", real)
    assert snapshot(codebase) == before


def test_apply_patch_malformed_and_escaping(harness: Harness, codebase: Path) -> None:
    res = harness.call(ApplyPatch, {"patch": "*** Update File: x\n"})
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    escape = "*** Begin Patch\n*** Add File: ../evil.txt\n+x\n*** End Patch"
    res = harness.call(ApplyPatch, {"patch": escape})
    assert res.error is not None and res.error.kind is ErrorKind.PERMISSION_DENIED
    assert not (codebase.parent / "evil.txt").exists()


def test_apply_patch_fuzzy_whitespace_crlf_and_eof(harness: Harness, ws: Path) -> None:
    (ws / "w.txt").write_bytes(b"a  \r\nb\r\nc\r\n")
    patch = "*** Begin Patch\n*** Update File: w.txt\n@@\n a\n-b\n+B\n*** End Patch"
    assert harness.call(ApplyPatch, {"patch": patch}).output.status == "applied"
    assert (ws / "w.txt").read_bytes() == b"a  \r\nB\r\nc\r\n"
    (ws / "e.txt").write_text("x\ny\nx\n")
    patch = "*** Begin Patch\n*** Update File: e.txt\n@@\n-x\n+z\n*** End of File\n*** End Patch"
    assert harness.call(ApplyPatch, {"patch": patch}).output.status == "applied"
    assert (ws / "e.txt").read_text() == "x\ny\nz\n"


def test_codex_read_list_and_grep(harness: Harness, codebase: Path) -> None:
    res = harness.call(CodexReadFile, {"file_path": "src/app.py", "offset": 3, "limit": 2})
    assert res.text == "L3: def main():\nL4:     return 1"
    res = harness.call(CodexReadFile, {"file_path": str(codebase / "src/app.py"), "offset": 99})
    assert res.text == "offset exceeds file length"
    res = harness.call(CodexListDir, {"dir_path": ".", "depth": 2})
    assert res.text.split("\n")[1:] == ["old.txt", "src/", "  app.py", "  name.py"]
    res = harness.call(CodexListDir, {"dir_path": ".", "limit": 2})
    assert res.text.endswith("More than 2 entries found")
    res = harness.call(GrepFiles, {"pattern": "NAME|main", "include": "*.py"})
    assert sorted(res.text.split("\n")) == ["src/app.py", "src/name.py"]
    assert harness.call(GrepFiles, {"pattern": "zzz"}).text == "No matches found."


def test_codex_and_main_file_tools_share_a_variant_family() -> None:
    from toolhub.tools import BUILTIN_TOOLS

    family = {t.fq_id() for t in BUILTIN_TOOLS if t.variant_family == "file_tools"}
    assert {"Codex:apply_patch", "Codex:read_file", "Main:read_file", "Main:edit_file"} <= family


def test_skill_reminder_announces_nearby_skills_once(harness: Harness, ws: Path) -> None:
    skill = ws / "pkg/api/.claude/skills/deploy/SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: deploy\ndescription: Ship the API\n---\nSteps\n")
    (ws / "pkg/api/src").mkdir()
    (ws / "pkg/api/src/main.py").write_text("x = 1\n")
    (ws / "other.py").write_text("y = 2\n")
    res = harness.call(ReadFile, {"path": "other.py"})
    assert [n for n in harness.reminders(res) if "Skills" in n] == []
    res = harness.call(ReadFile, {"path": "pkg/api/src/main.py"})
    (note,) = [n for n in harness.reminders(res) if "Skills" in n]
    assert "deploy: Ship the API (pkg/api/.claude/skills/deploy/SKILL.md)" in note
    res = harness.call(ReadFile, {"path": "pkg/api/src/main.py"})
    assert [n for n in harness.reminders(res) if "Skills" in n] == []
    assert json.dumps(harness.container.serialize()) is not None
