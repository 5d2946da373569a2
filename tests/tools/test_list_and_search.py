"""list_dir, grep and glob: .gitignore respected (also nested, also without git), depth and
output caps, ripgrep output modes, head limits with renamed hints, bad regex as misuse."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.tools.harness import Harness
from toolhub.core import ErrorKind
from toolhub.tools.list_dir import ListDir, ListDirParams
from toolhub.tools.search import Glob, GlobParams, Grep


def tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


@pytest.fixture
def project(ws: Path) -> Path:
    tree(
        ws,
        {
            ".gitignore": "build/\n*.log\n",
            "src/app.py": "import os\nTOKEN = 'abc'\ndef main():\n    return TOKEN\n",
            "src/util.py": "def helper():\n    return 'token'\n",
            "src/pkg/.gitignore": "generated.py\n",
            "src/pkg/generated.py": "TOKEN = 'gen'\n",
            "src/pkg/core.py": "TOKEN = 'core'\n",
            "build/out.py": "TOKEN = 'build'\n",
            "debug.log": "TOKEN in log\n",
            "docs/guide.md": "Use the token.\n",
            ".github/ci.yml": "TOKEN: secret\n",
        },
    )
    (ws / ".git").mkdir()
    (ws / ".git/config").write_text("TOKEN\n")
    return ws


def test_list_dir_tree_respects_gitignore(harness: Harness, project: Path) -> None:
    res = harness.call(ListDir, {"path": ".", "depth": 3})
    text = res.output.tree
    assert "src/" in text and "app.py" in text and "core.py" in text
    assert ".github/" in text
    for hidden in ("build", "debug.log", "generated.py", ".git/"):
        assert hidden not in text, hidden


def test_list_dir_depth_limits_levels(harness: Harness, project: Path) -> None:
    res = harness.call(ListDir, {"path": ".", "depth": 1})
    assert "src/" in res.output.tree
    assert "app.py" not in res.output.tree


def test_list_dir_cap_marks_unexpanded_directories(harness: Harness, ws: Path) -> None:
    harness.set_params(ListDirParams(max_output_chars=300))
    for d in range(5):
        for f in range(40):
            tree(ws, {f"dir{d}/file_{f:03d}.txt": ""})
    res = harness.call(ListDir, {"path": ".", "depth": 2})
    assert res.output.truncated
    assert len(res.output.tree) < 2000
    assert all(f"dir{d}/" in res.output.tree for d in range(5))
    assert "…" in res.output.tree and "not expanded" in res.text


def test_list_dir_file_and_missing(harness: Harness, project: Path) -> None:
    assert harness.call(ListDir, {"path": "src/app.py"}).output.status == "not_a_directory"
    assert harness.call(ListDir, {"path": "nope"}).output.status == "not_found"


def test_list_dir_shows_symlinks_without_following(
    harness: Harness, ws: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside/secret.txt").write_text("x")
    (ws / "escape").symlink_to(tmp_path / "outside")
    res = harness.call(ListDir, {"path": ".", "depth": 3})
    assert "escape ->" in res.output.tree
    assert "secret.txt" not in res.output.tree


def test_grep_content_mode_with_line_numbers_and_gitignore(harness: Harness, project: Path) -> None:
    res = harness.call(Grep, {"pattern": "TOKEN ="})
    lines = set(res.output.lines)
    assert "src/app.py:2:TOKEN = 'abc'" in lines
    assert "src/pkg/core.py:1:TOKEN = 'core'" in lines
    assert not any(line.startswith(("build/", "src/pkg/generated", ".git/")) for line in lines)


def test_grep_hidden_files_included_git_dir_excluded(harness: Harness, project: Path) -> None:
    res = harness.call(Grep, {"pattern": "TOKEN", "output_mode": "files_with_matches"})
    assert ".github/ci.yml" in res.output.lines
    assert not any(p.startswith(".git/") for p in res.output.lines)


def test_grep_files_and_count_modes(harness: Harness, project: Path) -> None:
    files = harness.call(Grep, {"pattern": "token", "output_mode": "files_with_matches"})
    assert files.output.lines == ["docs/guide.md", "src/util.py"]
    ci = harness.call(
        Grep, {"pattern": "token", "output_mode": "files_with_matches", "case_insensitive": True}
    )
    assert "src/app.py" in ci.output.lines and len(ci.output.lines) > 2
    count = harness.call(Grep, {"pattern": "TOKEN", "output_mode": "count", "path": "src"})
    assert "src/app.py:2" in count.output.lines
    assert count.output.total_matches == 3


def test_grep_glob_type_context_and_path(harness: Harness, project: Path) -> None:
    res = harness.call(Grep, {"pattern": "TOKEN", "glob": "*.md", "case_insensitive": True})
    assert [line.split(":")[0] for line in res.output.lines] == ["docs/guide.md"]
    res = harness.call(Grep, {"pattern": "token", "type": "py"})
    assert res.output.lines == ["src/util.py:2:    return 'token'"]
    res = harness.call(Grep, {"pattern": "def main", "context": 1, "path": "src/app.py"})
    assert res.output.lines == [
        "src/app.py-2-TOKEN = 'abc'",
        "src/app.py:3:def main():",
        "src/app.py-4-    return TOKEN",
    ]


def test_grep_head_limit_stops_early_and_names_renamed_params(harness: Harness, ws: Path) -> None:
    tree(ws, {"many.txt": "".join(f"hit {n}\n" for n in range(5000))})
    res = harness.call(
        Grep, {"pattern": "hit", "head_limit": 10}, param_names={"head_limit": "max_results"}
    )
    assert len(res.output.lines) == 10
    assert res.output.truncated
    assert "`max_results`" in res.text


def test_grep_long_lines_are_capped(harness: Harness, ws: Path) -> None:
    tree(ws, {"min.js": "var a=1;" * 5000 + "needle\n"})
    res = harness.call(Grep, {"pattern": "var a"})
    assert len(res.text) < 2000


def test_grep_no_match_and_bad_regex(harness: Harness, project: Path) -> None:
    res = harness.call(Grep, {"pattern": "zzz_nothing"})
    assert res.output.status == "no_matches"
    assert "No matches" in res.text
    res = harness.call(Grep, {"pattern": "foo(("})
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS
    assert "regex" in res.error.detail


def test_grep_pattern_starting_with_dash(harness: Harness, ws: Path) -> None:
    tree(ws, {"f.txt": "--verbose flag\n"})
    res = harness.call(Grep, {"pattern": "--verbose"})
    assert res.output.lines == ["f.txt:1:--verbose flag"]


def test_search_outside_workspace_refused(harness: Harness, ws: Path) -> None:
    for tool, args in [
        (Grep, {"pattern": "x", "path": ".."}),
        (Glob, {"pattern": "*", "path": "/"}),
    ]:
        res = harness.call(tool, args)
        assert res.error is not None and res.error.kind is ErrorKind.PERMISSION_DENIED


def test_glob_matches_any_depth_newest_first(harness: Harness, project: Path) -> None:
    now = time.time()
    os.utime(project / "src/util.py", (now + 100, now + 100))
    res = harness.call(Glob, {"pattern": "*.py"})
    assert res.output.files[0] == "src/util.py"
    assert set(res.output.files) == {"src/app.py", "src/util.py", "src/pkg/core.py"}
    res = harness.call(Glob, {"pattern": "src/pkg/*.py"})
    assert res.output.files == ["src/pkg/core.py"]
    res = harness.call(Glob, {"pattern": "*.rs"})
    assert res.output.files == [] and "No files" in res.text


def test_glob_caps_results(harness: Harness, ws: Path) -> None:
    harness.set_params(GlobParams(max_results=5))
    tree(ws, {f"f{n}.txt": "" for n in range(20)})
    res = harness.call(Glob, {"pattern": "*.txt"})
    assert len(res.output.files) == 5 and res.output.truncated
    assert "Showing 5 of 20" in res.text


def test_globs_never_bring_back_ignored_files(harness: Harness, project: Path) -> None:
    tree(
        project, {".venv/lib/site.py": "TOKEN = 'venv'\n", ".gitignore": "build/\n*.log\n.venv/\n"}
    )
    for pattern in ["*.py", "**/*.py", "src/**/*.py", "src/*/*.py"]:
        files = harness.call(Glob, {"pattern": pattern}).output.files
        assert files and not any("generated" in f or "venv" in f or "build" in f for f in files), (
            pattern,
            files,
        )
        grep = harness.call(
            Grep, {"pattern": "TOKEN", "glob": pattern, "output_mode": "files_with_matches"}
        ).output.lines
        assert grep and not any("generated" in f or "venv" in f or "build" in f for f in grep), (
            pattern,
            grep,
        )


def test_glob_with_directory_prefix_is_confined_to_it(harness: Harness, project: Path) -> None:
    files = harness.call(Glob, {"pattern": "src/*.py"}).output.files
    assert sorted(files) == ["src/app.py", "src/util.py"]
    assert harness.call(Glob, {"pattern": "nope/*.py"}).output.files == []
