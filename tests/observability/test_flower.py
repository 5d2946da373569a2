"""Flower, started for real against the test stack the way ``toolhub up`` starts it, shows the
workers and the toolhub calls (tool and call id) but never their arguments: not in task events,
and not in the worker inspection Flower runs when someone opens a worker."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.distributed.helpers import async_wait_until, wait_until, worker_pid
from tests.fixtures_stack import REPO, STACK_ENV, Stack, free_port

AUTH = ("ops", "flower-test-password")
SECRET = "sk-live-0bs3rv4b1l1ty"


@pytest.fixture
def flower(live: Stack, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    env = {
        **os.environ,
        **STACK_ENV,
        "TOOLHUB_REDIS_URL": live.url,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("FLOWER_UNAUTHENTICATED_API", None)
    argv = [sys.executable, "-m", "celery", "--app", "workers.app:app", "flower"]
    argv += [f"--port={port}", "--address=127.0.0.1", f"--basic-auth={AUTH[0]}:{AUTH[1]}"]
    log = tmp_path / "flower.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: _ok(f"{url}/healthcheck") or proc.poll() is not None, 30, 0.1)
        assert proc.poll() is None, log.read_text()
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def _ok(url: str) -> bool:
    try:
        return httpx.get(url, auth=AUTH, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def _get(url: str, **params: Any) -> httpx.Response:
    response = httpx.get(url, auth=AUTH, params=params, timeout=10)
    response.raise_for_status()
    return response


def _tasks_by_call(url: str) -> dict[str, dict[str, Any]]:
    tasks = _get(f"{url}/api/tasks").json()
    found = {}
    for task in tasks.values():
        for call_id in _call_ids(str(task.get("kwargs"))):
            found[call_id] = task
    return found


def _call_ids(shown: str) -> list[str]:
    marker = "'call_id': '"
    return [part.split("'", 1)[0] for part in shown.split(marker)[1:]]


def test_flower_lists_workers_and_calls_without_arguments(live, connect, store, flower, tmp_path):
    for path in ("/api/workers", "/api/tasks"):
        assert httpx.get(f"{flower}{path}", timeout=5).status_code == 401
    session = connect()
    secret_marker = str(tmp_path / SECRET)

    # Flower only sees events sent after its receiver is up: call until one of them shows
    # (its events reach Flower a moment after the call's result reaches us).
    warm: list[str] = []

    def warmed_up() -> bool:
        warm.append(f"flower-warm-{len(warm)}")
        asyncio.run(session.call("noop", {}, call_id=warm[-1]))
        return bool(set(warm) & set(_tasks_by_call(flower)))

    wait_until(warmed_up, 20, 0.2)

    async def go() -> tuple[list[Any], dict[str, Any]]:
        running = asyncio.ensure_future(
            session.call(
                "ticks", {"n": 30, "delay_ms": 50, "marker": secret_marker}, call_id="fl-long"
            )
        )
        await async_wait_until(
            lambda: (store.get_record("fl-long") or {}).get("status") == "running"
        )
        holder = live.worker_by_pid(worker_pid(store.get_record("fl-long")))
        # What Flower's worker page fetches: Celery inspect of the worker, running call included.
        name = next(
            n
            for n in _get(f"{flower}/api/workers", refresh=1).json()
            if n.startswith(f"toolhub-{holder.pid}@")
        )
        page = await asyncio.to_thread(_get, f"{flower}/api/workers", workername=name, refresh=1)
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

    results, inspected = asyncio.run(asyncio.wait_for(go(), 30))
    assert not any(r.is_error for r in results)
    assert "fl-long" in inspected["page"] and "Test:ticks" in inspected["page"]
    assert SECRET not in inspected["page"]
    assert "fl-long" in inspected["raw"] and SECRET not in inspected["raw"]

    workers = _get(f"{flower}/api/workers", refresh=1)
    for worker in live.workers:
        assert any(name.startswith(f"toolhub-{worker.pid}@") for name in workers.json())
    assert SECRET not in workers.text

    wanted = {"fl-long", "fl-0", "fl-1", "fl-2"}
    wait_until(
        lambda: all(
            _tasks_by_call(flower).get(cid, {}).get("state") == "SUCCESS" for cid in wanted
        ),
        10,
        0.2,
    )
    listing = _get(f"{flower}/api/tasks")
    assert SECRET not in listing.text
    calls = _tasks_by_call(flower)
    for cid in wanted:
        task = calls[cid]
        assert task["name"] == "toolhub.execute"
        assert "'tool': 'Test:ticks'" in task["kwargs"] and "<redacted>" in task["kwargs"]
        info = _get(f"{flower}/api/task/info/{task['uuid']}")
        assert cid in info.text and SECRET not in info.text
