"""Answer box, tool index, ignore rules, path locks and workspace entries."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from toolhub.answers import AnswerBox, LocalAnswerBox
from toolhub.backends.ignore import IgnoreRules
from toolhub.backends.locks import PathLocks
from toolhub.backends.tool_index import InMemoryToolIndex, ToolEntry, ToolIndex
from toolhub.backends.workspace import Workspace
from toolhub.core import ErrorKind, ToolError


def test_answer_box_delivers_to_the_waiter() -> None:
    box = LocalAnswerBox()
    assert isinstance(box, AnswerBox)
    box.post("c1", [{"question": "Which?"}])
    assert box.pending() == {"c1": [{"question": "Which?"}]}
    threading.Timer(0.1, box.answer, ("c1", ["this one"])).start()
    started = time.monotonic()
    assert box.wait("c1", 5) == ["this one"]
    assert time.monotonic() - started < 1
    assert box.pending() == {}
    assert box.answer("c1", ["late"]) is False


def test_answer_box_answer_before_wait_and_unknown_call() -> None:
    box = LocalAnswerBox()
    assert box.answer("nobody", ["x"]) is False
    box.post("c2", [{"question": "Q"}])
    assert box.answer("c2", {"Q": "A"}) is True
    assert box.wait("c2", 1) == {"Q": "A"}


def test_answer_box_timeout_and_withdraw() -> None:
    box = LocalAnswerBox()
    box.post("c3", [{"question": "Q"}])
    started = time.monotonic()
    assert box.wait("c3", 0.1) is None
    assert time.monotonic() - started < 0.5
    box.post("c4", [{"question": "Q"}])
    threading.Timer(0.1, box.withdraw, ("c4",)).start()
    started = time.monotonic()
    assert box.wait("c4", 10) is None
    assert time.monotonic() - started < 1


def test_tool_index_ranks_name_over_description() -> None:
    index = InMemoryToolIndex()
    assert isinstance(index, ToolIndex)
    index.add(ToolEntry("time__get_time", "Current time in a time zone.", {"properties": {}}))
    index.add(ToolEntry("weather__forecast", "Weather forecast; also shows local time.", {}))
    index.add(ToolEntry("github__create_issue", "Open an issue.", {"properties": {"repo": {}}}))
    assert index.search("time", 5)[0].name == "time__get_time"
    assert [e.name for e in index.search("create issue in repo", 1)] == ["github__create_issue"]
    assert index.search("", 5) == [] and index.search("zebra", 5) == []
    assert index.remove("time__get_time") and index.get("time__get_time") is None
    assert len(index) == 2


def test_ignore_rules_nested_and_negated(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / ".gitignore").write_text("*.log\nbuild/\n")
    (tmp_path / "sub/.gitignore").write_text("!keep.log\nlocal.txt\n")
    top = IgnoreRules.for_directory(tmp_path, tmp_path)
    sub = IgnoreRules.for_directory(tmp_path, tmp_path / "sub")
    assert top.ignored(tmp_path / "a.log", is_dir=False)
    assert top.ignored(tmp_path / "build", is_dir=True)
    assert not top.ignored(tmp_path / "build", is_dir=False)
    assert top.ignored(tmp_path / ".git", is_dir=True)
    assert sub.ignored(tmp_path / "sub/x.log", is_dir=False)
    assert not sub.ignored(tmp_path / "sub/keep.log", is_dir=False)
    assert sub.ignored(tmp_path / "sub/local.txt", is_dir=False)
    assert not top.ignored(tmp_path / "local.txt", is_dir=False)


def test_path_locks_serialize_and_clean_up(tmp_path: Path) -> None:
    locks = PathLocks()
    inside = [0]
    peak = [0]

    def work() -> None:
        with locks.hold(tmp_path / "a", tmp_path / "b"):
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
            time.sleep(0.005)
            inside[0] -= 1

    def reverse() -> None:
        with locks.hold(tmp_path / "b", tmp_path / "a"):
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
            time.sleep(0.005)
            inside[0] -= 1

    threads = [threading.Thread(target=work if n % 2 else reverse) for n in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert not any(t.is_alive() for t in threads)
    assert peak[0] == 1
    assert len(locks) == 0


def test_resolve_entry_keeps_links_and_refuses_escapes(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "real").write_text("x")
    (root / "link").symlink_to(root / "real")
    (tmp_path / "out").write_text("o")
    (root / "escape").symlink_to(tmp_path / "out")
    ws = Workspace(root)
    assert ws.resolve("link") == root / "real"
    assert ws.resolve_entry("link") == root / "link"
    for bad in ["escape", "../out", str(tmp_path / "out")]:
        with pytest.raises(ToolError) as err:
            ws.resolve_entry(bad)
        assert err.value.kind is ErrorKind.PERMISSION_DENIED


def test_install_local_resources_fills_the_container(tmp_path: Path) -> None:
    from toolhub.assembly import install_local_resources
    from toolhub.backends import PathLocks, ProcessRunner, Ripgrep, SessionInfo
    from toolhub.core import Container
    from toolhub.tasks import BackgroundTasks

    container = Container()
    (tmp_path / "ws").mkdir()
    install_local_resources(
        container, workspace=tmp_path / "ws", session_dir=tmp_path / "s", session_id="abc"
    )
    assert container.require(Workspace).root == (tmp_path / "ws").resolve()
    assert container.require(SessionInfo).session_id == "abc"
    assert container.require(ProcessRunner).log_dir == tmp_path / "s" / "terminal"
    assert isinstance(container.require(BackgroundTasks), BackgroundTasks)
    assert isinstance(container.require(AnswerBox), AnswerBox)
    assert container.get(PathLocks) is not None and container.get(Ripgrep) is not None


def test_workspace_contains_by_whole_parts(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "root")
    root = ws.root
    assert ws.contains(root) and ws.contains(root / "a" / "b")
    assert not ws.contains(root.parent / (root.name + "-sibling"))  # a shared string prefix
    assert not ws.contains(root.parent)
    assert not ws.contains(Path("relative") / "path")
    everything = Workspace(Path("/"))
    assert everything.contains(Path("/")) and everything.contains(tmp_path)
