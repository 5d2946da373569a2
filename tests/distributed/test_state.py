"""Session state changed concurrently on two workers: compare-and-set loses no update."""

from __future__ import annotations

import asyncio

from toolhub import Session, State
from toolhub.distributed.codec import unpack
from toolhub.tools.todo import TodoState


def _workers(store, call_ids):
    return {store.get_record(c)["worker"] for c in call_ids}


def test_fifty_concurrent_merges_across_two_workers(live, connect, store):
    session = connect(session_id="merge-50")
    ids = [f"merge-{i}" for i in range(50)]

    async def go():
        return await asyncio.gather(
            *(session.call("merge", {"item": f"item-{i}"}, call_id=c) for i, c in enumerate(ids))
        )

    results = asyncio.run(asyncio.wait_for(go(), 60))
    assert all(not r.is_error for r in results), [r.prompt_text for r in results if r.is_error]
    assert sorted(r.output.value["count"] for r in results) == list(range(1, 51))
    stored = unpack(store.client.hget(store.keys.state("merge-50"), "test_items"))
    assert sorted(stored["items"]) == sorted(f"item-{i}" for i in range(50))
    assert int(store.client.hget(store.keys.state("merge-50"), "__v")) == 50
    assert len(_workers(store, ids)) == 2


def test_fifty_concurrent_todo_write_merges(live, store, tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    session = Session.connect(
        live.url, {"tools": [{"id": "Main:todo_write"}]}, ws, session_id="todo-50"
    )
    ids = [f"todo-{i}" for i in range(50)]

    async def go():
        return await asyncio.gather(
            *(
                session.call(
                    "todo_write",
                    {"todos": [{"id": str(i), "content": f"task {i}"}], "merge": True},
                    call_id=c,
                )
                for i, c in enumerate(ids)
            )
        )

    try:
        results = asyncio.run(asyncio.wait_for(go(), 60))
        assert all(not r.is_error for r in results), [r.prompt_text for r in results]
        stored = unpack(store.client.hget(store.keys.state("todo-50"), "main.todos"))
        assert sorted(int(t["id"]) for t in stored["todos"]) == list(range(50))
        # The dispatcher's own view caught up with what the workers wrote.
        local = session.resources.get(State[TodoState])
        assert local is not None and len(local.todos) == 50
        assert len(_workers(store, ids)) == 2
    finally:
        session.close()
