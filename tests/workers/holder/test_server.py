"""Background commands run under the host's holder (``workers/holder/server.py``), so they survive
the worker process that started them; only when the holder (the host) is gone are they re-run, and
then they say so. Real redis-server, real ``toolhub worker`` processes, a real holder."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.distributed.helpers import TASK_TOOLS, process_gone, wait_until, worker_pid
from tests.fixtures_stack import Stack, WorkerProcess
from toolhub import Progress, Session
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import RedisStore
from toolhub.tasks import BackgroundTasks
from workers.holder.client import HolderClient

pytestmark = pytest.mark.timeout(180)  # real workers, a holder and CLI processes on a busy machine

TOOLHUB = str(Path(sys.executable).with_name("toolhub"))


def _session(live: Stack, ws: Path, sid: str) -> Session:
    return Session.connect(live.url, TASK_TOOLS, ws, session_id=sid)


def _start(session: Session, command: str) -> str:
    started = session.call_sync(
        "bash", {"command": command, "description": "t", "is_background": True}
    )
    assert not started.is_error, started.prompt_text
    assert started.output is not None
    return str(started.output.value["task_id"])


def _events(store: RedisStore, task_id: str) -> list[Progress]:
    return [e.item for e in store.read_events(task_id) if isinstance(e.item, Progress)]


def _output(store: RedisStore, task_id: str, *, last_attempt: bool = False) -> str:
    """Every output delta in the stream (or only those after the last ``retry`` marker)."""
    text = ""
    for item in _events(store, task_id):
        if item.subkind == "retry" and last_attempt:
            text = ""
        elif item.subkind == "output_delta" and isinstance(item.payload, dict):
            text += str(item.payload.get("delta", ""))
    return text


def _numbers(text: str) -> list[str]:
    return text.split()


def _holder(live: Stack, sid: str | None = None) -> dict[str, Any]:
    """The holder's answer to a worker, with the commands it holds for session ``sid``."""
    reply = HolderClient(Settings.from_env(live.url), home=live.home).ping(session_id=sid)
    assert reply is not None, "no holder answers"
    return reply


def _group_alive(pgid: int) -> list[int]:
    """The live (non-zombie) processes of process group ``pgid``."""
    alive = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                alive.append(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return alive


def _command_pid(live: Stack, task_id: str, sid: str) -> int:
    """The host pid (and process group) of the command the holder runs for ``task_id``. Not
    ``$$``: workers sandbox commands, and inside the sandbox's pid namespace ``$$`` is small."""
    return wait_until(
        lambda: next(
            (c["pid"] for c in _holder(live, sid)["commands"] if c["call_id"] == task_id), 0
        ),
        10,
    )


def _counting(n: int) -> str:
    """Counts to ``n``, a second a number; each run adds a line to ``runs.txt``."""
    return f"echo run >> runs.txt; for i in $(seq 1 {n}); do echo $i; sleep 1; done"


def test_command_keeps_running_through_a_sigkill_of_its_worker(live, store, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    sid = f"holder-{uuid.uuid4().hex[:8]}"
    with _session(live, ws, sid) as session:
        task_id = _start(session, _counting(6))
        wait_until(lambda: "2" in _numbers(_output(store, task_id)), 10)
        first = store.get_record(task_id)
        worker = live.worker_by_pid(worker_pid(first))
        assert task_id in {c["call_id"] for c in _holder(live, sid)["commands"]}
        worker.signal(signal.SIGKILL)
        assert worker.wait(5) is not None

        # Longer than a lease: the holder keeps renewing it, so it never looks lost.
        tasks = session.resources.get(BackgroundTasks)
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            snap = tasks.snapshot(task_id)
            assert snap is not None and snap.status == "running", snap
            time.sleep(0.05)

        waited = session.call_sync("task_output", {"task_ids": [task_id], "timeout_ms": 15000})
        assert not waited.is_error, waited.prompt_text
        snap = waited.output.value["tasks"][0]
        assert snap["status"] == "exited" and snap["exit_code"] == 0, snap
        assert snap["attempt"] == 1 and "restarted" not in waited.prompt_text

    assert _numbers(_output(store, task_id)) == [str(i) for i in range(1, 7)]
    record = store.get_record(task_id)
    assert record["status"] == "succeeded" and record["attempt"] == 1
    assert [a["outcome"] for a in record["attempts"]] == ["succeeded"]
    assert record["attempts"][0]["worker"] == first["worker"]
    assert "retry" not in [item.subkind for item in _events(store, task_id)]
    assert len((ws / "runs.txt").read_text().split()) == 1


def test_kill_task_stops_it_after_its_worker_died(live, store, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    sid = f"holder-{uuid.uuid4().hex[:8]}"
    with _session(live, ws, sid) as starter:
        task_id = _start(starter, "sleep 300 & sleep 301 & echo up; wait")
        wait_until(lambda: "up" in _output(store, task_id), 10)
    pid = _command_pid(live, task_id, sid)
    assert len(_group_alive(pid)) >= 3  # the shell and both sleeps
    live.worker_by_pid(worker_pid(store.get_record(task_id))).signal(signal.SIGKILL)

    with _session(live, ws, sid) as killer:
        killed = killer.call_sync("kill_task", {"task_id": task_id})
        assert not killed.is_error, killed.prompt_text
        assert killed.output.value["outcome"] == "killed"
        assert killed.output.value["task"]["status"] == "killed"
    wait_until(lambda: process_gone(pid) and not _group_alive(pid), 5)
    record = store.get_record(task_id)
    assert record["status"] == "cancelled" and record["attempt"] == 1


@pytest.mark.long  # run by `make test-long`; make test keeps a command through its worker's SIGKILL
def test_a_lost_holder_shows_lost_then_restarts_and_says_so(live, store, tmp_path: Path):
    ws = tmp_path / "ws"
    ws.mkdir()
    sid = f"holder-{uuid.uuid4().hex[:8]}"
    with _session(live, ws, sid) as session:
        task_id = _start(session, _counting(5))
        wait_until(lambda: "2" in _numbers(_output(store, task_id)), 10)
        holder = _holder(live, sid)
        assert task_id in {c["call_id"] for c in holder["commands"]}
        first_pid = _command_pid(live, task_id, sid)
        os.kill(holder["pid"], signal.SIGKILL)  # the "host" of the command is gone

        # The command of attempt 1 dies with its holder (parent-death signal).
        wait_until(lambda: process_gone(first_pid) and not _group_alive(first_pid), 3)

        # Until another worker re-runs it, it is `lost`: never `running` once its lease expired.
        tasks = session.resources.get(BackgroundTasks)
        seen: list[tuple[str, int]] = []
        # Workers paused, so no sweep re-runs it before its lease has visibly expired (sweeps
        # run every quarter lease: the window could otherwise close between two looks).
        for worker in live.workers:
            worker.signal(signal.SIGSTOP)
        try:
            wait_until(lambda: tasks.snapshot(task_id).status == "lost", 5)
            seen.append(("lost", 1))
        finally:
            for worker in live.workers:
                worker.signal(signal.SIGCONT)
        shown_lost = ""
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            snap = tasks.snapshot(task_id)
            assert snap is not None
            seen.append((snap.status, snap.attempt))
            if snap.attempt == 2:
                break
            if snap.status == "lost" and not shown_lost:
                text = session.call_sync("task_output", {"task_ids": [task_id]}).prompt_text
                if "lost, recovering" in text:  # (unless it was re-run in between)
                    shown_lost = text
                    assert "restart from the beginning on another worker" in text, text
                    assert "Still running" not in text, text
            time.sleep(0.02)
        assert seen[-1][1] == 2, seen[-20:]
        assert ("lost", 1) in seen, seen
        after_lost = seen[seen.index(("lost", 1)) :]
        assert ("running", 1) not in after_lost, after_lost
        described = session.call_sync("task_output", {"task_ids": [task_id]})
        assert "attempt 2 of 3" in described.prompt_text, described.prompt_text

        # It runs again from the start; once it ended, the next call's reminder says so.
        wait_until(lambda: store.get_record(task_id)["status"] == "succeeded", 60)
        other = session.call_sync("bash", {"command": "true", "description": "t"})
        assert "after restarting from the beginning when its host was lost" in other.prompt_text
        assert "attempt 2 of 3" in other.prompt_text, other.prompt_text

        shown = session.call_sync("task_output", {"task_ids": [task_id]})
        snap_out = shown.output.value["tasks"][0]
        assert snap_out["status"] == "exited" and snap_out["attempt"] == 2
        assert "restarted from the beginning after its host was lost" in shown.prompt_text
        assert "(attempt 2 of 3)" in shown.prompt_text

    env = {**os.environ, "TOOLHUB_REDIS_URL": live.url, "COLUMNS": "200"}
    cli = [TOOLHUB, "tasks"]
    shown_cli = subprocess.run([*cli, "show", task_id], env=env, capture_output=True, text=True)
    assert "restarted from the beginning after its host was lost" in shown_cli.stdout
    listed = subprocess.run(
        [*cli, "list", "--session", sid], env=env, capture_output=True, text=True
    )
    assert task_id in listed.stdout and "(run 2/3)" in listed.stdout, listed.stdout

    assert _numbers(_output(store, task_id, last_attempt=True)) == [str(i) for i in range(1, 6)]
    record = store.get_record(task_id)
    assert [a["outcome"] for a in record["attempts"]] == ["worker_lost", "succeeded"]
    assert [item.subkind for item in _events(store, task_id)].count("retry") == 1
    assert len((ws / "runs.txt").read_text().split()) == 2  # attempt 1 and its re-run
    assert process_gone(first_pid)


def test_a_storm_of_sigterms_stops_the_holder_and_hands_its_command_back(
    live, store, tmp_path: Path
):
    """The holder's handler only sets a flag: an ``Event.set`` there could deadlock the
    main thread it interrupts (the same lock), and the holder would never exit."""
    ws = tmp_path / "ws"
    ws.mkdir()
    sid = f"holder-{uuid.uuid4().hex[:8]}"
    with _session(live, ws, sid) as session:
        task_id = _start(session, _counting(30))
        pgid = _command_pid(live, task_id, sid)
        holder = psutil.Process(_holder(live)["pid"])
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline and holder.is_running():
            for _ in range(50):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(holder.pid, signal.SIGTERM)
        holder.wait(15)  # raises psutil.TimeoutExpired if it hangs
        wait_until(lambda: not _group_alive(pgid), 10)


def test_a_worker_keeps_its_host_holder_started_and_lets_it_go_when_it_dies():
    """The first background commands after a quiet spell must not each wait in a pool thread
    for the holder to spawn: a worker starts its host's holder and keeps it past the idle
    window, a killed holder comes back without a command asking, and once no worker lives the
    holder still exits after its idle window."""
    stack = Stack(workers=1, env={"TOOLHUB_HOLDER_IDLE_SECONDS": "1"}).start()
    try:
        client = HolderClient(Settings.from_env(stack.url), home=stack.home)
        first = wait_until(client.ping, 10)  # no background call was made
        time.sleep(3.5)  # three idle windows: kept
        kept = client.ping()
        assert kept is not None and kept["pid"] == first["pid"]

        os.kill(first["pid"], signal.SIGKILL)
        again = wait_until(lambda: (r := client.ping()) and r["pid"] != first["pid"] and r, 10)

        stack.workers[0].signal(signal.SIGKILL)
        wait_until(lambda: client.ping() is None, 10)
        wait_until(lambda: process_gone(again["pid"]), 5)
    finally:
        stack.stop()


def test_only_a_worker_of_the_background_queue_keeps_a_holder():
    """A worker of the fast queue alone never hands a command over: its host (its pod, under
    the chart) gets no holder from it. One of the background queue on the same host does."""
    stack = Stack(workers=0)
    env = {"TOOLHUB_HOLDER_IDLE_SECONDS": "1"}
    fast = WorkerProcess("fast", stack.redis.url, stack.home, env=env, queues="toolhub.fast")
    stack.workers = [fast]
    stack.start()
    try:
        client = HolderClient(Settings.from_env(stack.url), home=stack.home)
        time.sleep(2.0)  # the other worker's holder answered well within this
        assert client.ping() is None
        background = WorkerProcess(
            "bg", stack.redis.url, stack.home, env=env, queues="toolhub.background"
        )
        stack.workers.append(background.start())
        background.wait_ready()
        wait_until(client.ping, 10)
    finally:
        stack.stop()
