import threading

import pytest
from pydantic import BaseModel, Field

from toolhub.core import Container, Params, State, ToolError


class Todo(BaseModel):
    items: list[str] = Field(default_factory=list)


class Cwd(str):
    pass


def test_insert_get_by_type():
    c = Container()
    assert c.get(Cwd) is None
    c.insert(Cwd("/w"))
    assert c.get(Cwd) == "/w"


def test_require_missing_is_typed_error_naming_the_type():
    with pytest.raises(ToolError) as err:
        Container().require(Params[Todo])
    assert err.value.kind == "custom"
    assert err.value.code == "missing_resource"
    assert "Params[Todo]" in err.value.detail


def test_params_and_state_coexist_without_collision():
    c = Container()
    c.insert(Todo(items=["config"]), Params[Todo])
    c.insert(Todo(items=["runtime"]), State[Todo])
    c.insert(Todo(items=["plain"]))
    assert c.require(Params[Todo]).items == ["config"]
    assert c.require(State[Todo]).items == ["runtime"]
    assert c.require(Todo).items == ["plain"]
    assert Params[Todo] == Params[Todo] and Params[Todo] != State[Todo]


def test_get_or_default_inserts_once():
    c = Container()
    first = c.get_or_default(State[Todo])
    first.items.append("x")
    assert c.get_or_default(State[Todo]).items == ["x"]


def test_ephemeral_types_are_never_serialized_and_persisted_ones_are():
    c = Container()
    c.register_persisted(State[Todo], "main.todo")
    c.register_persisted(State[Todo], "main.todo")  # idempotent
    c.insert(Todo(items=["a"]), State[Todo])
    c.insert(Todo(items=["config"]), Params[Todo])
    c.insert(Cwd("/w"))
    assert c.serialize() == {"params": {}, "state": {"main.todo": {"items": ["a"]}}}


def test_load_ignores_unknown_keys_and_skips_values_that_do_not_fit():
    c = Container()
    c.register_persisted(State[Todo], "main.todo")
    skipped = c.load({"state": {"main.todo": {"items": ["b"]}, "other": 1}, "junk": []})
    assert skipped == [] and c.require(State[Todo]).items == ["b"]
    skipped = c.load({"state": {"main.todo": {"items": "not a list"}}})
    assert skipped == ["main.todo"]
    assert c.require(State[Todo]).items == ["b"]


def test_set_json_false_for_unregistered():
    c = Container()
    assert c.set_json("state", "nope", {}) is False
    c.register_persisted(State[Todo], "main.todo")
    assert c.set_json("state", "main.todo", {"items": ["z"]}) is True
    assert c.get_json("state", "main.todo") == {"items": ["z"]}


def test_update_is_atomic_across_threads():
    c = Container()

    def add(i: int) -> None:
        c.update(State[Todo], lambda t: Todo(items=[*t.items, str(i)]))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(64)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(c.require(State[Todo]).items, key=int) == [str(i) for i in range(64)]


class RecordingSync:
    def __init__(self) -> None:
        self.stored: dict[str, object] = {}
        self.calls = 0

    def update(self, resource_id, fn, adapter):
        self.calls += 1
        current = self.stored.get(resource_id)
        value = fn(None if current is None else adapter.validate_python(current))
        self.stored[resource_id] = adapter.dump_python(value, mode="json")
        return value


def test_update_of_persisted_state_goes_through_the_attached_sync():
    c = Container()
    c.register_persisted(State[Todo], "main.todo")
    sync = RecordingSync()
    c.attach_state_sync(sync)
    c.update(State[Todo], lambda t: Todo(items=[*t.items, "x"]))
    c.update(State[Todo], lambda t: Todo(items=[*t.items, "y"]))
    assert sync.calls == 2
    assert sync.stored["main.todo"] == {"items": ["x", "y"]}
    assert c.require(State[Todo]).items == ["x", "y"]


def test_version_moves_on_every_change():
    c = Container()
    v0 = c.version
    c.insert(Cwd("/a"))
    assert c.version > v0
