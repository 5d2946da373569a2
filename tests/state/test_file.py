import json
import threading
import time

from pydantic import BaseModel, Field

from toolhub.core import Container, State
from toolhub.state.file import FORMAT, DebouncedWriter, StateFile


class Todo(BaseModel):
    items: list[str] = Field(default_factory=list)


def container() -> Container:
    c = Container()
    c.register_persisted(State[Todo], "main.todo")
    return c


def test_round_trip(tmp_path):
    c = container()
    c.insert(Todo(items=["a"]), State[Todo])
    StateFile(tmp_path / "s.json").write(c)
    fresh = container()
    assert StateFile(tmp_path / "s.json").load_into(fresh)
    assert fresh.require(State[Todo]).items == ["a"]


def test_corrupt_file_is_reported_moved_aside_and_replaced(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"format": "toolhub.state/1", "state": {')
    state = StateFile(path)
    c = container()
    assert state.load_into(c) is False
    assert "corrupt" in state.problems[0]
    assert not path.exists() and list(tmp_path.glob("s.json.corrupt-*"))
    c.insert(Todo(items=["new"]), State[Todo])
    state.write(c)
    assert json.loads(path.read_text())["state"]["main.todo"]["items"] == ["new"]


def test_foreign_file_is_not_loaded(tmp_path):
    path = tmp_path / "s.json"
    path.write_text('{"some": "other app"}')
    state = StateFile(path)
    assert state.load_into(container()) is False
    assert "not a toolhub state file" in state.problems[0]


def test_unknown_keys_ignored_and_bad_values_reset(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(
        json.dumps(
            {
                "format": FORMAT,
                "state": {"main.todo": {"items": 5}, "retired.thing": {}},
                "extra": 1,
            }
        )
    )
    state = StateFile(path)
    c = container()
    assert state.load_into(c) is True
    assert c.get(State[Todo]) is None
    assert "main.todo" in state.problems[0]


def test_writer_atomic_rename_never_exposes_partial_json(tmp_path):
    path = tmp_path / "s.json"
    c = container()
    state = StateFile(path)
    stop = threading.Event()
    seen_bad: list[str] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                text = path.read_text()
            except FileNotFoundError:
                continue
            try:
                json.loads(text)
            except json.JSONDecodeError:
                seen_bad.append(text)

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(200):
        c.insert(Todo(items=[str(i)] * 200), State[Todo])
        state.write(c)
    stop.set()
    thread.join()
    assert seen_bad == []


def test_debounced_writer_coalesces_and_flushes_on_close(tmp_path):
    path = tmp_path / "s.json"
    c = container()
    writes: list[int] = []
    state = StateFile(path)
    original = state.write

    def counting(container: Container) -> None:
        writes.append(1)
        original(container)

    state.write = counting  # type: ignore[method-assign]
    writer = DebouncedWriter(c, state, delay=0.2)
    for i in range(50):
        c.insert(Todo(items=[str(i)]), State[Todo])
        writer.notify()
    time.sleep(0.5)
    assert 1 <= len(writes) <= 2
    c.insert(Todo(items=["last"]), State[Todo])
    writer.notify()
    writer.close()
    assert json.loads(path.read_text())["state"]["main.todo"]["items"] == ["last"]


def test_noop_when_nothing_changed(tmp_path):
    c = container()
    writer = DebouncedWriter(c, StateFile(tmp_path / "s.json"), delay=0.01)
    writer.notify()
    writer.close()
    assert not (tmp_path / "s.json").exists()
