"""Flower, started for real against the test stack the way ``toolhub up`` starts it, shows the
workers and the toolhub calls (tool and call id) but never their arguments: not in task events,
and not in the worker inspection Flower runs when someone opens a worker."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.distributed.helpers import async_wait_until, wait_until, worker_pid
from tests.observability.flower_support import SECRET, get, tasks_by_call, warm_up


def test_flower_lists_workers_and_calls_without_arguments(live, connect, store, flower, tmp_path):
    for path in ("/api/workers", "/api/tasks"):
        assert httpx.get(f"{flower}{path}", timeout=5).status_code == 401
    session = connect()
    secret_marker = str(tmp_path / SECRET)

    warm_up(flower, lambda cid: asyncio.run(session.call("noop", {}, call_id=cid)))

    async def go() -> tuple[list[Any], dict[str, Any]]:
        running = asyncio.ensure_future(
            session.call(
                "ticks", {"n": 120, "delay_ms": 100, "marker": secret_marker}, call_id="fl-long"
            )
        )
        await async_wait_until(
            lambda: (store.get_record("fl-long") or {}).get("status") == "running"
        )
        holder = live.worker_by_pid(worker_pid(store.get_record("fl-long")))
        # What Flower's worker page fetches: Celery inspect of the worker, running call included.
        name = next(
            n
            for n in get(f"{flower}/api/workers", refresh=1).json()
            if n.startswith(f"toolhub-{holder.pid}@")
        )
        page = await asyncio.to_thread(get, f"{flower}/api/workers", workername=name, refresh=1)
        # Flower asks ``active`` in safe mode but ``reserved`` raw; ``celery inspect`` asks
        # both raw. The worker answers every one of them redacted.
        inspect = session.executor.app.control.inspect(timeout=2, destination=[name])
        raw = await asyncio.to_thread(lambda: repr(inspect.active()) + repr(inspect.reserved()))
        short = await asyncio.gather(
            *(
                session.call("ticks", {"n": 2, "marker": secret_marker}, call_id=f"fl-{i}")
                for i in range(3)
            )
        )
        return [*short, await running], {"page": page.text, "raw": raw}

    results, inspected = asyncio.run(asyncio.wait_for(go(), 90))
    assert not any(r.is_error for r in results)
    assert "fl-long" in inspected["page"] and "Test:ticks" in inspected["page"]
    assert SECRET not in inspected["page"]
    assert "fl-long" in inspected["raw"] and SECRET not in inspected["raw"]

    workers = get(f"{flower}/api/workers", refresh=1)
    for worker in live.workers:
        assert any(name.startswith(f"toolhub-{worker.pid}@") for name in workers.json())
    assert SECRET not in workers.text

    wanted = {"fl-long", "fl-0", "fl-1", "fl-2"}
    wait_until(
        lambda: all(tasks_by_call(flower).get(cid, {}).get("state") == "SUCCESS" for cid in wanted),
        10,
        0.2,
    )
    listing = get(f"{flower}/api/tasks")
    assert SECRET not in listing.text
    calls = tasks_by_call(flower)
    for cid in wanted:
        task = calls[cid]
        assert task["name"] == "toolhub.execute"
        assert "'tool': 'Test:ticks'" in task["kwargs"] and "<redacted>" in task["kwargs"]
        info = get(f"{flower}/api/task/info/{task['uuid']}")
        assert cid in info.text and SECRET not in info.text
