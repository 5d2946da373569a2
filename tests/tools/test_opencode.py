"""The OpenCode namespace (issue 17): each tool's happy path and every bad input, confinement
(``..``, absolute paths elsewhere, symlinks out), plan mode, and hints that name OpenCode's own
(camelCase, or the client's renamed) arguments — over the Main tools' backends."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from tests.tools.harness import Harness, snapshot
from toolhub.core import ErrorKind, State
from toolhub.tools.opencode import Edit, GlobOC, GrepOC, Read, Write
from toolhub.tools.opencode_session import BashOC, SkillOC, TodoWriteOC
from toolhub.tools.plan import EnterPlanMode
from toolhub.tools.search import GrepParams
from toolhub.tools.shell import BashParams
from toolhub.tools.todo import TodoState, TodoWrite

FILE_TOOLS = [
    (Read, {"filePath": "{p}"}),
    (Edit, {"filePath": "{p}", "oldString": "a", "newString": "b"}),
    (Write, {"filePath": "{p}", "content": "x"}),
    (GrepOC, {"pattern": "keep", "path": "{p}"}),
    (GlobOC, {"pattern": "*", "path": "{p}"}),
]


def fill(args: dict[str, Any], path: str) -> dict[str, Any]:
    return {k: v.replace("{p}", path) if isinstance(v, str) else v for k, v in args.items()}


# -- confinement ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("tool", "args"), FILE_TOOLS, ids=lambda v: getattr(v, "id", ""))
@pytest.mark.parametrize("where", ["dotdot", "absolute", "symlink"])
def test_paths_outside_the_workspace_are_refused(
    harness: Harness, ws: Path, tmp_path: Path, tool: Any, args: dict[str, Any], where: str
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("keep a\n")
    (ws / "link").symlink_to(outside)
    path = {"dotdot": "../outside/f.txt", "absolute": str(outside / "f.txt")}.get(
        where, "link/f.txt"
    )
    if tool is GlobOC:
        path = path.removesuffix("/f.txt")
    before = snapshot(outside)
    res = harness.call(tool, fill(args, path))
    assert res.error is not None and res.error.kind is ErrorKind.PERMISSION_DENIED, res.outcome
    assert snapshot(outside) == before


def test_bash_workdir_outside_the_workspace_is_refused(
    harness: Harness, ws: Path, tmp_path: Path
) -> None:
    (ws / "link").symlink_to(tmp_path)
    for workdir in ("..", str(tmp_path), "link"):
        res = harness.call(BashOC, {"command": "pwd", "description": "d", "workdir": workdir})
        assert res.error is not None and res.error.kind is ErrorKind.PERMISSION_DENIED


# -- read -----------------------------------------------------------------------------------------


def test_read_wraps_numbered_lines_in_tags(harness: Harness, ws: Path) -> None:
    (ws / "a.txt").write_text("alpha\nbeta\n")
    res = harness.call(Read, {"filePath": "a.txt"})
    assert res.text.startswith("<path>a.txt</path>\n<type>file</type>\n<content>\n")
    assert "1→alpha" in res.text and res.text.endswith("beta\n</content>")
    assert res.output.status == "ok" and res.output.total_lines == 2


def test_read_window_and_hint_name_the_clients_arguments(harness: Harness, ws: Path) -> None:
    (ws / "long.txt").write_text("".join(f"line {n}\n" for n in range(1, 51)))
    res = harness.call(
        Read, {"filePath": "long.txt", "offset": 10, "limit": 5}, param_names={"offset": "from"}
    )
    assert res.output.start_line == 10 and res.output.end_line == 14
    assert "`from`=15" in res.text and "`limit`" in res.text


def test_read_outcomes_are_outputs(harness: Harness, ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "bin").write_bytes(b"\x00\x01\x02")
    assert harness.call(Read, {"filePath": "nope.txt"}).output.status == "not_found"
    assert harness.call(Read, {"filePath": "d"}).output.status == "is_directory"
    binary = harness.call(Read, {"filePath": "bin"})
    assert binary.output.status == "binary" and "<content>" not in binary.text


@pytest.mark.parametrize(
    "args",
    [
        {},
        {"path": "a.txt"},
        {"filePath": "a.txt", "limit": 0},
        {"filePath": 3},
        {"filePath": "a\0"},
    ],
)
def test_read_bad_arguments(harness: Harness, ws: Path, args: dict[str, Any]) -> None:
    (ws / "a.txt").write_text("x\n")
    res = harness.call(Read, args)
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS


# -- edit -----------------------------------------------------------------------------------------


def test_edit_replaces_and_creates(harness: Harness, ws: Path) -> None:
    (ws / "m.py").write_text("x = 1\ny = 2\n")
    res = harness.call(Edit, {"filePath": "m.py", "oldString": "y = 2", "newString": "y = 3"})
    assert res.output.status == "applied" and (ws / "m.py").read_text() == "x = 1\ny = 3\n"
    made = harness.call(Edit, {"filePath": "new/n.py", "oldString": "", "newString": "z\n"})
    assert made.output.status == "created" and (ws / "new/n.py").read_text() == "z\n"


def test_edit_several_matches_names_replace_all(harness: Harness, ws: Path) -> None:
    (ws / "m.txt").write_text("a a a\n")
    res = harness.call(Edit, {"filePath": "m.txt", "oldString": "a", "newString": "b"})
    assert res.output.status == "multiple_matches" and "`replaceAll`" in res.text
    assert "replace_all" not in res.text and (ws / "m.txt").read_text() == "a a a\n"
    renamed = harness.call(
        Edit,
        {"filePath": "m.txt", "oldString": "a", "newString": "b"},
        param_names={"replaceAll": "all"},
    )
    assert "`all`" in renamed.text
    done = harness.call(
        Edit, {"filePath": "m.txt", "oldString": "a", "newString": "b", "replaceAll": True}
    )
    assert done.output.replacements == 3 and (ws / "m.txt").read_text() == "b b b\n"


def test_edit_outcomes_and_refusals_name_opencode_arguments(harness: Harness, ws: Path) -> None:
    (ws / "m.txt").write_text("abc\n")
    missing = harness.call(Edit, {"filePath": "gone.txt", "oldString": "a", "newString": "b"})
    assert missing.output.status == "not_found" and "`oldString`" in missing.text
    none = harness.call(Edit, {"filePath": "m.txt", "oldString": "zzz", "newString": "b"})
    assert none.output.status == "no_match"
    same = harness.call(Edit, {"filePath": "m.txt", "oldString": "a", "newString": "a"})
    assert same.error is not None and same.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert "`oldString` and `newString`" in same.error.detail
    assert (ws / "m.txt").read_text() == "abc\n"


@pytest.mark.parametrize(
    "args",
    [
        {"filePath": "m.txt", "oldString": "a"},
        {"filePath": "m.txt", "old_string": "a", "new_string": "b"},
        {"filePath": "m.txt", "oldString": "a", "newString": "b", "replaceAll": "maybe"},
    ],
)
def test_edit_bad_arguments(harness: Harness, ws: Path, args: dict[str, Any]) -> None:
    (ws / "m.txt").write_text("abc\n")
    res = harness.call(Edit, args)
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert (ws / "m.txt").read_text() == "abc\n"


def test_edit_of_a_directory_is_refused(harness: Harness, ws: Path) -> None:
    (ws / "d").mkdir()
    res = harness.call(Edit, {"filePath": "d", "oldString": "a", "newString": "b"})
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS


# -- write ----------------------------------------------------------------------------------------


def test_write_creates_then_overwrites_keeping_the_mode(harness: Harness, ws: Path) -> None:
    res = harness.call(Write, {"filePath": "sub/w.txt", "content": "one\ntwo\n"})
    assert res.output.created and (ws / "sub/w.txt").read_text() == "one\ntwo\n"
    os.chmod(ws / "sub/w.txt", 0o640)
    again = harness.call(Write, {"filePath": "sub/w.txt", "content": "three"})
    assert not again.output.created and (ws / "sub/w.txt").read_text() == "three"
    assert (ws / "sub/w.txt").stat().st_mode & 0o777 == 0o640
    assert [p.name for p in (ws / "sub").iterdir()] == ["w.txt"]  # no temp file left


@pytest.mark.parametrize(
    "args", [{"filePath": "w.txt"}, {"content": "x"}, {"filePath": "w.txt", "content": 5}]
)
def test_write_bad_arguments(harness: Harness, ws: Path, args: dict[str, Any]) -> None:
    res = harness.call(Write, args)
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert not (ws / "w.txt").exists()


def test_write_onto_a_directory_or_through_a_file_is_refused(harness: Harness, ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "f").write_text("keep")
    for path in ("d", "f/child.txt"):
        res = harness.call(Write, {"filePath": path, "content": "x"})
        assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert (ws / "f").read_text() == "keep"


def test_plan_mode_refuses_edit_write_and_bash(harness: Harness, ws: Path) -> None:
    (ws / "m.txt").write_text("abc\n")
    harness.call(EnterPlanMode, {})
    for tool, args in (
        (Edit, {"filePath": "m.txt", "oldString": "a", "newString": "b"}),
        (Write, {"filePath": "m.txt", "content": "x"}),
        (BashOC, {"command": "touch made", "description": "d"}),
    ):
        res = harness.call(tool, args)
        assert res.error is not None and res.error.kind is ErrorKind.PERMISSION_DENIED
    assert harness.call(Read, {"filePath": "m.txt"}).output.status == "ok"
    assert (ws / "m.txt").read_text() == "abc\n" and not (ws / "made").exists()


# -- grep and glob --------------------------------------------------------------------------------


def test_grep_with_include(harness: Harness, ws: Path) -> None:
    (ws / "a.py").write_text("needle = 1\n")
    (ws / "b.txt").write_text("needle\n")
    res = harness.call(GrepOC, {"pattern": "needle", "include": "*.py"})
    assert res.output.lines == ["a.py:1:needle = 1"]
    assert harness.call(GrepOC, {"pattern": "absent"}).output.status == "no_matches"


def test_grep_cut_off_names_opencode_arguments(harness: Harness, ws: Path) -> None:
    (ws / "a.txt").write_text("hit\n" * 10)
    harness.set_params(GrepParams(default_lines=3))
    res = harness.call(GrepOC, {"pattern": "hit"}, param_names={"include": "files"})
    assert res.output.truncated and len(res.output.lines) == 3
    assert "`files`" in res.text and "head_limit" not in res.text and "glob" not in res.text


@pytest.mark.parametrize(
    "args",
    [{"pattern": "("}, {"pattern": "x", "path": "missing"}, {}, {"pattern": "x", "glob": "*"}],
)
def test_grep_bad_arguments(harness: Harness, ws: Path, args: dict[str, Any]) -> None:
    (ws / "a.txt").write_text("x\n")
    res = harness.call(GrepOC, args)
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS


def test_glob_finds_newest_first(harness: Harness, ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src/old.ts").write_text("")
    (ws / "src/new.ts").write_text("")
    os.utime(ws / "src/old.ts", (1, 1))
    res = harness.call(GlobOC, {"pattern": "src/**/*.ts"})
    assert res.output.files == ["src/new.ts", "src/old.ts"]


@pytest.mark.parametrize("args", [{}, {"pattern": "*", "path": "a.txt"}, {"pattern": 1}])
def test_glob_bad_arguments(harness: Harness, ws: Path, args: dict[str, Any]) -> None:
    (ws / "a.txt").write_text("x\n")
    res = harness.call(GlobOC, args)
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS


# -- bash -----------------------------------------------------------------------------------------


def test_bash_streams_and_runs_in_workdir(harness: Harness, ws: Path) -> None:
    (ws / "sub").mkdir()
    res = harness.call(BashOC, {"command": "echo hi; pwd", "description": "d", "workdir": "sub"})
    assert res.output.exit_code == 0 and res.output.mode == "foreground"
    assert res.output.output == f"hi\n{ws.resolve() / 'sub'}\n"
    assert "".join(p.payload["delta"] for p in res.progress) == res.output.output
    failed = harness.call(BashOC, {"command": "exit 3", "description": "d"})
    assert failed.output.exit_code == 3 and failed.text.startswith("exit: 3")


def test_bash_timeout_is_an_output(harness: Harness) -> None:
    res = harness.call(BashOC, {"command": "sleep 5", "description": "d", "timeout": 200})
    assert res.output.killed == "timeout" and "killed (timeout)" in res.text


def test_bash_params_clamp_the_timeout(harness: Harness) -> None:
    harness.set_params(BashParams(max_timeout_ms=300))
    res = harness.call(BashOC, {"command": "sleep 5", "description": "d", "timeout": 60_000})
    assert res.output.killed == "timeout" and res.output.duration_ms < 3000


def test_bash_cancel_ends_the_call(harness: Harness) -> None:
    async def run() -> Any:
        from toolhub.core import CancelToken

        token = CancelToken()
        task = asyncio.ensure_future(
            harness.astream(BashOC, {"command": "sleep 30", "description": "d"}, cancel=token)
        )
        await asyncio.sleep(0.5)
        token.cancel()
        return await asyncio.wait_for(task, 5)

    res = asyncio.run(run())
    assert res.error is not None and res.error.kind is ErrorKind.CANCELLED


@pytest.mark.parametrize(
    "args",
    [
        {"command": "sleep 1 &", "description": "d"},
        {"command": "echo"},
        {"command": "echo", "description": "d", "is_background": True},
        {"command": "echo", "description": "d", "timeout": -1},
        {"command": "echo", "description": "d", "workdir": "missing"},
    ],
)
def test_bash_bad_arguments(harness: Harness, ws: Path, args: dict[str, Any]) -> None:
    res = harness.call(BashOC, args)
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS, res.outcome


def test_bash_workdir_must_be_a_directory(harness: Harness, ws: Path) -> None:
    (ws / "f").write_text("")
    res = harness.call(BashOC, {"command": "pwd", "description": "d", "workdir": "f"})
    assert res.error is not None and "`workdir` f is not a directory" in res.error.detail


# -- todowrite ------------------------------------------------------------------------------------

TODOS = [
    {"id": "1", "content": "parse", "status": "in_progress", "priority": "high"},
    {"id": "2", "content": "test", "status": "pending", "priority": "low"},
]


def test_todowrite_replaces_the_shared_list(harness: Harness) -> None:
    harness.call(TodoWrite, {"todos": [{"id": "old", "content": "from main"}]})
    res = harness.call(TodoWriteOC, {"todos": TODOS})
    assert "[~] 1. parse (high)" in res.text and "old" not in res.text
    state = harness.container.get(State[TodoState])
    assert [(t.id, t.priority) for t in state.todos] == [("1", "high"), ("2", "low")]
    merged = harness.call(TodoWrite, {"merge": True, "todos": [{"id": "2", "status": "completed"}]})
    assert [(t.status, t.priority) for t in merged.output.todos][1] == ("completed", "low")


def test_todowrite_counts_for_the_open_todos_reminder(harness: Harness) -> None:
    res = harness.call(TodoWriteOC, {"todos": TODOS})
    assert harness.reminders(res) == []
    assert harness.container.get(State[TodoState]).calls_since_update == 0


def test_todowrite_duplicate_ids_change_nothing(harness: Harness) -> None:
    harness.call(TodoWriteOC, {"todos": TODOS})
    res = harness.call(TodoWriteOC, {"todos": [TODOS[0], TODOS[0]]})
    assert res.output.status == "duplicate_id"
    assert [t.id for t in harness.container.get(State[TodoState]).todos] == ["1", "2"]


@pytest.mark.parametrize(
    "item",
    [
        {"id": "1", "content": "x", "status": "pending"},
        {"id": "1", "content": "x", "status": "done", "priority": "high"},
        {"id": "1", "content": "x", "status": "pending", "priority": "urgent"},
        {"id": "1", "content": "", "status": "pending", "priority": "high"},
        {"content": "x", "status": "pending", "priority": "high"},
    ],
)
def test_todowrite_bad_items(harness: Harness, item: dict[str, Any]) -> None:
    res = harness.call(TodoWriteOC, {"todos": [item]})
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert harness.container.get(State[TodoState]) in (None, TodoState())


# -- skill ----------------------------------------------------------------------------------------


def test_skill_loads_from_the_workspace(harness: Harness, ws: Path) -> None:
    folder = ws / ".toolhub/skills/pdf"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: pdf\ndescription: PDFs\n---\nRun fill.py\n")
    res = harness.call(SkillOC, {"name": "pdf"})
    assert res.output.content.strip() == "Run fill.py" and res.output.path.endswith("SKILL.md")
    missing = harness.call(SkillOC, {"name": "nope"})
    assert missing.error is not None and missing.error.kind is ErrorKind.NOT_FOUND
    empty = harness.call(SkillOC, {"name": ""})
    assert empty.error is not None and empty.error.kind is ErrorKind.INVALID_ARGUMENTS
