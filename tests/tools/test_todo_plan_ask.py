"""todo_write (merge, duplicate ids, persisted state, open-todo reminder), plan mode (both
switches, refusals across mutating tools) and ask_user (answer, timeout, cancel)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from tests.tools.harness import Harness
from toolhub.answers import AnswerBox
from toolhub.core import CancelToken, Container, ErrorKind, State
from toolhub.tools.ask_user import AskUser, AskUserParams
from toolhub.tools.codex import ApplyPatch
from toolhub.tools.edit_file import EditFile
from toolhub.tools.file_ops import DeleteFile, MoveFile, WriteFile
from toolhub.tools.plan import EnterPlanMode, ExitPlanMode, PlanMode
from toolhub.tools.read_file import ReadFile
from toolhub.tools.todo import REMIND_EVERY, TodoState, TodoWrite


def test_todo_replace_and_merge(harness: Harness) -> None:
    res = harness.call(
        TodoWrite,
        {"todos": [{"id": "1", "content": "write tests"}, {"id": "2", "content": "ship"}]},
    )
    assert res.output.status == "updated"
    assert "[ ] 1. write tests" in res.text and "2 open" in res.text
    res = harness.call(
        TodoWrite,
        {
            "merge": True,
            "todos": [{"id": "1", "status": "completed"}, {"id": "3", "content": "doc"}],
        },
    )
    assert [(t.id, t.status) for t in res.output.todos] == [
        ("1", "completed"),
        ("2", "pending"),
        ("3", "pending"),
    ]
    assert res.output.todos[0].content == "write tests"
    state = harness.container.get(State[TodoState])
    assert state is not None and len(state.todos) == 3
    assert harness.container.serialize()["state"]["main.todos"]["todos"][0]["status"] == "completed"


def test_todo_duplicate_ids_and_missing_content_change_nothing(harness: Harness) -> None:
    harness.call(TodoWrite, {"todos": [{"id": "a", "content": "x"}]})
    res = harness.call(
        TodoWrite, {"todos": [{"id": "b", "content": "1"}, {"id": "b", "content": "2"}]}
    )
    assert res.output.status == "duplicate_id" and "b" in res.text
    res = harness.call(TodoWrite, {"merge": True, "todos": [{"id": "new"}]})
    assert res.output.status == "invalid" and "content" in res.text
    assert [t.id for t in harness.container.get(State[TodoState]).todos] == ["a"]


def test_open_todos_reminder_after_quiet_calls(harness: Harness, ws: Path) -> None:
    (ws / "f.txt").write_text("x\n")
    harness.call(TodoWrite, {"todos": [{"id": "1", "content": "finish the parser"}]})
    notes: list[list[str]] = []
    for _ in range(REMIND_EVERY):
        res = harness.call(ReadFile, {"path": "f.txt"})
        notes.append([n for n in harness.reminders(res) if "todo" in n])
    assert all(n == [] for n in notes[:-1])
    assert len(notes[-1]) == 1 and "finish the parser" in notes[-1][0]
    done = harness.call(TodoWrite, {"merge": True, "todos": [{"id": "1", "status": "completed"}]})
    assert [n for n in harness.reminders(done) if "todo" in n] == []
    for _ in range(REMIND_EVERY * 2):
        res = harness.call(ReadFile, {"path": "f.txt"})
        assert [n for n in harness.reminders(res) if "todo" in n] == []


def test_plan_mode_blocks_every_mutation_until_exit(harness: Harness, ws: Path) -> None:
    (ws / "a.txt").write_text("alpha\n")
    res = harness.call(EnterPlanMode, {})
    assert res.output.active and "Plan mode is on" in res.text
    assert harness.container.get(State[PlanMode]).active
    attempts = [
        (WriteFile, {"path": "b.txt", "content": "x"}),
        (EditFile, {"path": "a.txt", "old_string": "alpha", "new_string": "beta"}),
        (DeleteFile, {"path": "a.txt"}),
        (MoveFile, {"source": "a.txt", "destination": "c.txt"}),
        (ApplyPatch, {"patch": "*** Begin Patch\n*** Delete File: a.txt\n*** End Patch"}),
    ]
    for tool, args in attempts:
        res = harness.call(tool, args)
        assert res.error is not None and res.error.kind is ErrorKind.PERMISSION_DENIED, tool
    assert harness.call(ReadFile, {"path": "a.txt"}).output.status == "ok"
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt"]
    res = harness.call(ExitPlanMode, {})
    assert not res.output.active and res.output.changed
    assert harness.call(ExitPlanMode, {}).output.changed is False
    assert harness.call(DeleteFile, {"path": "a.txt"}).output.status == "deleted"


def test_plan_mode_state_survives_a_reload(harness: Harness) -> None:
    harness.call(EnterPlanMode, {})
    saved = harness.container.serialize()
    fresh = Container()
    fresh.register_persisted(State[PlanMode], PlanMode.resource_id)
    fresh.load(saved)
    assert fresh.get(State[PlanMode]).active


def answer_when_asked(harness: Harness, answers: object) -> threading.Thread:
    box = harness.container.require(AnswerBox)

    def run() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pending = box.pending()
            if pending:
                box.answer(next(iter(pending)), answers)
                return
            time.sleep(0.01)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_ask_user_announces_then_returns_answers(harness: Harness) -> None:
    thread = answer_when_asked(harness, {"Which DB?": "postgres"})
    res = harness.call(
        AskUser,
        {"questions": [{"question": "Which DB?", "options": ["postgres", "sqlite"]}]},
        call_id="ask-1",
    )
    thread.join()
    (item,) = res.progress
    assert item.subkind == "input_required"
    assert item.payload == {
        "call_id": "ask-1",
        "questions": [{"question": "Which DB?", "options": ["postgres", "sqlite"]}],
    }
    assert res.output.status == "answered"
    assert res.text == "Q: Which DB?\nA: postgres"


def test_ask_user_times_out_and_non_interactive(harness: Harness) -> None:
    harness.set_params(AskUserParams(timeout_s=0.2))
    started = time.monotonic()
    res = harness.call(AskUser, {"questions": [{"question": "Anyone?"}]})
    assert res.output.status == "timed_out" and time.monotonic() - started < 1.5
    assert harness.container.require(AnswerBox).pending() == {}
    harness.set_params(AskUserParams(non_interactive=True))
    res = harness.call(AskUser, {"questions": [{"question": "Anyone?"}]})
    assert res.output.status == "unavailable" and res.progress == []


def test_ask_user_cancel_stops_waiting(harness: Harness) -> None:
    token = CancelToken()
    threading.Timer(0.2, token.cancel).start()
    started = time.monotonic()
    res = harness.call(AskUser, {"questions": [{"question": "Q?"}]}, cancel=token)
    assert time.monotonic() - started < 1.5
    assert res.error is not None and res.error.kind is ErrorKind.CANCELLED


def test_ask_user_rejects_empty_questions(harness: Harness) -> None:
    res = harness.call(AskUser, {"questions": []})
    assert res.error is not None and res.error.kind is ErrorKind.INVALID_ARGUMENTS


def test_ask_user_list_answers_by_position(harness: Harness) -> None:
    thread = answer_when_asked(harness, ["yes"])

    async def go() -> object:
        return await harness.astream(
            AskUser, {"questions": [{"question": "Go?"}, {"question": "Now?"}]}
        )

    res = asyncio.run(go())
    thread.join()
    assert [(qa.question, qa.answer) for qa in res.output.answers] == [
        ("Go?", "yes"),
        ("Now?", "(no answer)"),
    ]
