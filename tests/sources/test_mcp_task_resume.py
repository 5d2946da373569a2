"""An external MCP call whose worker is SIGKILLed while it polls a remote task: the next attempt,
on the other worker, polls that same task instead of calling the tool again (the remote tool
body runs once, counted in a file it appends to), and the result says so. Lost before the task
handle came back, the call fails with ``worker_lost`` as before; a task the server no longer
knows on resume is a typed ``remote_outcome_unknown`` error, never a second call.

Real parts only: the shared stack (redis-server, two ``toolhub worker`` processes), another
toolhub serving the distributed suite's test tools over MCP (streamable HTTP, with tasks) from
this process, and a fleet session whose ``use_tool`` reaches it on the workers.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.conftest import live, store
from tests.distributed.helpers import wait_until, worker_pid
from tests.distributed.plugin_tools import make_builder
from tests.fixtures_stack import Stack
from toolhub import CallResult, Session
from toolhub.distributed.store import RedisStore
from toolhub.gateway import ThreadedServer
from toolhub.mcp.transports import http_app

pytestmark = pytest.mark.timeout(180)

__all__ = ["live", "store"]  # the distributed suite's fixtures

TOKEN = "resume-token"


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[str]:
    """Another toolhub, serving ``ticks`` (which appends ``start``/``done`` lines to a marker
    file) over MCP; this process runs its calls, so they outlive any worker."""
    (tmp_path / "remote").mkdir()
    session = Session.embedded(
        {"tools": [{"id": "Test:ticks"}]},
        tmp_path / "remote",
        state_dir=tmp_path / "remote-state",
        builder=make_builder(),
    )
    server = ThreadedServer(http_app(session, host="127.0.0.1", token=TOKEN))
    # The worker that took the call over keeps its MCP connection (its tool set stays cached):
    # do not wait for it to close.
    server.server.config.timeout_graceful_shutdown = 0.5
    with session, server:
        yield f"{server.url}/mcp"


@pytest.fixture
def fleet(live: Stack, remote: str, tmp_path: Path) -> Iterator[Session]:
    """A fleet session whose ``use_tool`` (policy on a lost worker: ``fail``) calls the remote
    server's tools on the workers, taking its tasks."""
    server = {"url": remote, "headers": {"Authorization": f"Bearer {TOKEN}"}, "tasks": True}
    config = {
        "tools": [{"id": "Main:use_tool", "on_worker_lost": "fail"}],
        "mcp_servers": {"far": server},
    }
    (tmp_path / "ws").mkdir()
    with Session.connect(
        live.url, config, tmp_path / "ws", session_id=f"resume-{time.time_ns()}"
    ) as session:
        yield session
    live.heal()


def _call_in_background(
    session: Session, cid: str, marker: Path, n: int
) -> tuple[threading.Thread, list[CallResult]]:
    results: list[CallResult] = []
    arguments = {
        "tool_name": "far__ticks",
        "tool_input": {"n": n, "delay_ms": 100, "marker": str(marker)},
    }

    def call() -> None:
        results.append(session.call_sync("use_tool", arguments, call_id=cid, timeout=40))

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    return thread, results


def _kill_worker_of(live: Stack, store: RedisStore, cid: str) -> int:
    record = wait_until(
        lambda: (r := store.get_record(cid)) and r.get("status") == "running" and r, 10
    )
    pid = worker_pid(record)
    live.worker_by_pid(pid).signal(signal.SIGKILL)
    return pid


def _result(thread: threading.Thread, results: list[CallResult]) -> CallResult:
    thread.join(45)
    assert results, "the call never ended"
    return results[0]


def _details(result: CallResult) -> dict[str, Any]:
    assert result.error is not None, result.prompt_text
    return dict(result.error.details or {})


def test_a_worker_lost_mid_poll_resumes_the_remote_task_on_another_worker(
    live: Stack, store: RedisStore, fleet: Session, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("TOOLHUB_MCP_TASKS", "always")  # the remote answers with a task at once
    marker, cid = tmp_path / "runs.txt", "resume-mid-poll"
    thread, results = _call_in_background(fleet, cid, marker, n=30)
    wait_until(lambda: store.client.exists(store.keys.remote_task(cid)), 15)
    killed = _kill_worker_of(live, store, cid)
    result = _result(thread, results)

    assert result.error is None, result.prompt_text
    assert result.prompt_text.startswith(
        "[toolhub] The worker running this call was lost; the call resumed polling remote task "
    )
    assert "(attempt 2 of 3); the remote tool ran once." in result.prompt_text
    assert result.output is not None and result.output.value["output"]["total"] == 30
    # The remote tool body ran exactly once: one start, one end.
    lines = marker.read_text().splitlines()
    assert [line.split()[0] for line in lines] == ["start", "done"], lines
    record = store.get_record(cid)
    assert record["status"] == "succeeded" and record["resumed"] == 1 and record["lost"] == 1
    assert [a["outcome"] for a in record["attempts"]] == ["worker_lost", "succeeded"]
    assert worker_pid(record) != killed
    assert "resumed polling remote task" in record["result"]["prompt_text"]


@pytest.mark.long  # run by `make test-long`; make test keeps the resume after a loss mid-poll
def test_a_worker_lost_before_the_task_handle_fails_with_worker_lost(
    live: Stack, store: RedisStore, fleet: Session, tmp_path: Path, monkeypatch
) -> None:
    # The remote answers with a task only after 5 s: the worker dies while it waits for it.
    monkeypatch.setenv("TOOLHUB_MCP_TASKS", "auto")
    monkeypatch.setenv("TOOLHUB_MCP_TASK_AFTER_S", "5")
    marker, cid = tmp_path / "runs.txt", "resume-no-handle"
    thread, results = _call_in_background(fleet, cid, marker, n=100)
    wait_until(lambda: marker.exists() and marker.read_text().startswith("start"), 15)
    _kill_worker_of(live, store, cid)
    result = _result(thread, results)

    details = _details(result)
    assert details["code"] == "worker_lost" and details["may_have_run"] is True
    assert store.client.exists(store.keys.remote_task(cid)) == 0
    record = store.get_record(cid)
    assert record["status"] == "failed" and "resumed" not in record
    assert [a["outcome"] for a in record["attempts"]] == ["worker_lost"]
    assert marker.read_text().splitlines()[0].startswith("start")
    assert len(marker.read_text().splitlines()) == 1  # never called a second time


def test_a_remote_task_gone_on_resume_is_an_unknown_outcome(
    live: Stack, store: RedisStore, fleet: Session, tmp_path: Path, monkeypatch
) -> None:
    # The remote forgets its tasks after 1 s; the next attempt cannot start within a lease
    # (1.5 s) of the last renewal, so it always finds the task gone.
    monkeypatch.setenv("TOOLHUB_MCP_TASKS", "always")
    monkeypatch.setenv("TOOLHUB_MCP_TASK_TTL_S", "1")
    marker, cid = tmp_path / "runs.txt", "resume-gone"
    thread, results = _call_in_background(fleet, cid, marker, n=100)
    wait_until(lambda: store.client.exists(store.keys.remote_task(cid)), 15)
    _kill_worker_of(live, store, cid)
    result = _result(thread, results)

    details = _details(result)
    assert details["code"] == "remote_outcome_unknown" and details["may_have_run"] is True
    assert details["server"] == "far" and details["task_id"]
    detail = result.error.detail if result.error else ""
    assert "Task not found" in detail and "is unknown; it was not called again" in detail
    assert len(marker.read_text().splitlines()) == 1  # started once, never called again
    record = store.get_record(cid)
    assert record["status"] == "failed" and record["resumed"] == 1
    assert [a["outcome"] for a in record["attempts"]] == ["worker_lost", "failed"]


@pytest.mark.long  # run by `make test-long`; make test keeps the resume after a loss mid-poll
def test_a_worker_handing_the_call_back_leaves_the_remote_task_to_the_next_attempt(
    live: Stack, store: RedisStore, fleet: Session, tmp_path: Path, monkeypatch
) -> None:
    # SIGTERM: the worker waits out its soft-shutdown window (3 s here), then hands the call
    # back; it must not cancel the remote task the next attempt takes up.
    monkeypatch.setenv("TOOLHUB_MCP_TASKS", "always")
    marker, cid = tmp_path / "runs.txt", "resume-handed-back"
    thread, results = _call_in_background(fleet, cid, marker, n=50)
    wait_until(lambda: store.client.exists(store.keys.remote_task(cid)), 15)
    record = wait_until(lambda: (r := store.get_record(cid)) and r.get("worker") and r, 10)
    live.worker_by_pid(worker_pid(record)).signal(signal.SIGTERM)
    result = _result(thread, results)

    assert result.error is None, result.prompt_text
    assert result.prompt_text.startswith(
        "[toolhub] The worker running this call handed it back (it was shutting down); the "
        "call resumed polling remote task "
    )
    assert [line.split()[0] for line in marker.read_text().splitlines()] == ["start", "done"]
    record = store.get_record(cid)
    assert record["status"] == "succeeded" and record["resumed"] == 1 and record["lost"] == 0
    assert [a["outcome"] for a in record["attempts"]] == ["handed_back", "succeeded"]


def test_a_direct_call_runs_on_a_worker_and_resumes_after_its_loss(
    live: Stack, store: RedisStore, fleet: Session, tmp_path: Path, monkeypatch
) -> None:
    """Called by its own name (no ``use_tool``), a tool of a server that offers tasks runs on
    a worker, under a call record, and resumes there like any other call."""
    monkeypatch.setenv("TOOLHUB_MCP_TASKS", "always")
    marker, cid = tmp_path / "runs.txt", "resume-direct"
    arguments = {"n": 30, "delay_ms": 100, "marker": str(marker)}
    results: list[CallResult] = []
    thread = threading.Thread(
        target=lambda: results.append(
            fleet.call_sync("far__ticks", arguments, call_id=cid, timeout=40)
        ),
        daemon=True,
    )
    thread.start()
    wait_until(lambda: store.client.exists(store.keys.remote_task(cid)), 15)
    _kill_worker_of(live, store, cid)
    result = _result(thread, results)

    assert result.error is None, result.prompt_text
    assert "the call resumed polling remote task " in result.prompt_text
    assert [line.split()[0] for line in marker.read_text().splitlines()] == ["start", "done"]
    record = store.get_record(cid)
    assert record["tool"] == "External:far__ticks" and record["resumed"] == 1


DISPATCHER = """
import json, sys
from toolhub import Session
url, config, ws, sid, cid, arguments = sys.argv[1:]
session = Session.connect(url, json.loads(config), ws, session_id=sid)
session.call_sync("far__ticks", json.loads(arguments), call_id=cid)
"""


def test_a_call_outlives_its_dispatcher(
    live: Stack, store: RedisStore, remote: str, tmp_path: Path, monkeypatch
) -> None:
    """The dispatcher that started a long external call is SIGKILLed; the call goes on on its
    worker, and a new dispatcher of the same session follows it to the remote task's result."""
    monkeypatch.setenv("TOOLHUB_MCP_TASKS", "always")
    server = {"url": remote, "headers": {"Authorization": f"Bearer {TOKEN}"}, "tasks": True}
    config = {"tools": [{"id": "Main:use_tool"}], "mcp_servers": {"far": server}}
    marker, cid, sid = tmp_path / "runs.txt", "outlives-dispatcher", f"gone-{time.time_ns()}"
    (tmp_path / "ws").mkdir()
    arguments = {"n": 20, "delay_ms": 100, "marker": str(marker)}
    argv = [live.url, json.dumps(config), str(tmp_path / "ws"), sid, cid, json.dumps(arguments)]
    dispatcher = subprocess.Popen([sys.executable, "-c", DISPATCHER, *argv])
    try:
        wait_until(lambda: store.client.exists(store.keys.remote_task(cid)), 20)
    finally:
        dispatcher.send_signal(signal.SIGKILL)
        dispatcher.wait(10)
    with Session.connect(live.url, config, tmp_path / "ws", session_id=sid) as successor:
        items = list(successor.follow_sync(cid, timeout=40))
    result = items[-1]
    assert isinstance(result, CallResult) and result.error is None, result
    assert result.output is not None and result.output.value["total"] == 20
    assert [line.split()[0] for line in marker.read_text().splitlines()] == ["start", "done"]
    assert store.get_record(cid)["status"] == "succeeded"
