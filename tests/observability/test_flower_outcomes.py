"""Flower tells the truth about each call: a failed call is ``FAILURE`` with its error kind, a
cancelled one ``REVOKED``, a successful one ``SUCCESS``; the dashboard counts the failure; the
task list shows each call's tool and call id. The Celery message of every one of them is acked
once, as before (no redelivery, no retry), and the call records are unchanged.

The API checks run against a real Flower on the real stack; the browser check loads Flower's
task list in headless Chromium (Debian's ``chromium``) and reads the rendered DOM."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from redis import Redis

from tests.distributed.helpers import wait_until, worker_pid
from tests.fixtures_stack import REPO, Stack
from tests.observability.flower_support import AUTH, SECRET, get, tasks_by_call, warm_up
from toolhub import CallResult, Progress, Session
from toolhub.distributed.celery_app import celery_config
from toolhub.distributed.settings import Settings
from toolhub.distributed.unacked import decode_entry, unacked_keys
from toolhub.stack.local import FLOWER_TASKS_COLUMNS, LocalStack

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _run_outcomes(live: Stack, connect: Any, tmp_path: Path, prefix: str) -> dict[str, str]:
    """One successful, one failed (``permission_denied``: a path outside the workspace, with
    a secret in it) and one cancelled call; returns their call ids by outcome."""
    ids = {"ok": f"{prefix}-ok", "denied": f"{prefix}-denied", "cancelled": f"{prefix}-cancel"}
    tests = connect()
    ws = tmp_path / "ws-main"
    ws.mkdir(exist_ok=True)
    main = Session.connect(live.url, {"tools": [{"id": "Main:read_file"}]}, ws)

    async def go() -> tuple[CallResult, CallResult, CallResult]:
        ok = await tests.call("noop", {}, call_id=ids["ok"])
        denied = await main.call("read_file", {"path": f"/{SECRET}/x"}, call_id=ids["denied"])
        stream = tests.stream("sleeper", {"seconds": 60}, call_id=ids["cancelled"])
        first = await anext(stream)
        assert isinstance(first, Progress), first
        assert await tests.cancel(ids["cancelled"])
        rest = [item async for item in stream]
        assert isinstance(rest[-1], CallResult)
        return ok, denied, rest[-1]

    try:
        ok, denied, cancelled = asyncio.run(asyncio.wait_for(go(), 30))
    finally:
        main.close()
    assert not ok.is_error
    assert denied.error is not None and denied.error.kind == "permission_denied"
    assert SECRET in denied.error.detail  # the detail quotes the argument; Flower must not
    assert cancelled.error is not None and cancelled.error.kind == "cancelled"
    return ids


def _settled(flower: str, ids: dict[str, str]) -> dict[str, dict[str, Any]]:
    want = {"ok": "SUCCESS", "denied": "FAILURE", "cancelled": "REVOKED"}

    def states() -> dict[str, dict[str, Any]] | None:
        calls = tasks_by_call(flower)
        seen = {k: calls.get(cid, {}) for k, cid in ids.items()}
        return seen if all(seen[k].get("state") == want[k] for k in ids) else None

    try:
        return wait_until(states, 10, 0.2)
    except AssertionError:
        calls = tasks_by_call(flower)
        pytest.fail(f"Flower shows {[(c, calls.get(c, {}).get('state')) for c in ids.values()]}")


def test_flower_shows_failed_cancelled_and_successful_calls(live, connect, store, flower, tmp_path):
    session = connect()
    warm_up(flower, lambda cid: asyncio.run(session.call("noop", {}, call_id=cid)))
    ids = _run_outcomes(live, connect, tmp_path, "fo")
    tasks = _settled(flower, ids)

    # The records are the truth, unchanged: one attempt each, with its own outcome.
    records = {k: store.get_record(cid) for k, cid in ids.items()}
    assert {k: r["status"] for k, r in records.items()} == {
        "ok": "succeeded",
        "denied": "failed",
        "cancelled": "cancelled",
    }
    assert all(len(r["attempts"]) == 1 for r in records.values())

    # FAILURE with the error kind; the detail (which quotes the arguments) never reaches Flower.
    assert tasks["denied"]["exception"] == "ToolError('permission_denied')"
    assert tasks["ok"]["result"] == "'finished'" and tasks["ok"].get("exception") is None
    assert tasks["cancelled"]["revoked"] and tasks["cancelled"].get("exception") is None
    listing = get(f"{flower}/api/tasks")
    assert SECRET not in listing.text
    for key, cid in ids.items():
        assert f"'call_id': '{cid}'" in tasks[key]["kwargs"]
        assert SECRET not in get(f"{flower}/api/task/info/{tasks[key]['uuid']}").text
    assert "'tool': 'Main:read_file'" in tasks["denied"]["kwargs"]
    assert "'tool': 'Test:sleeper'" in tasks["cancelled"]["kwargs"]

    # The dashboard (the workers page's data) counts the failure where it ran, and nothing else
    # as failed: the warm-up and the successful call succeeded, the cancelled one was revoked.
    rows = get(f"{flower}/workers", json=1).json()["data"]
    assert sum(row.get("task-failed", 0) for row in rows) == 1
    assert sum(row.get("task-revoked", 0) for row in rows) == 1
    ran_it = worker_pid(records["denied"])
    (row,) = [r for r in rows if r["hostname"].startswith(f"toolhub-{ran_it}@")]
    assert row["task-failed"] == 1

    # Acked once, like any task: no message of these calls is left unacked, none came back.
    client = Redis.from_url(live.url)
    try:
        unacked, _ = unacked_keys(
            celery_config(Settings.from_env(live.url))["broker_transport_options"]
        )

        def held() -> set[str]:
            return {decode_entry(raw)[0] for raw in client.hvals(unacked)} & set(ids.values())

        wait_until(lambda: not held(), 5, 0.1)
    finally:
        client.close()
    assert all(len(store.get_record(cid)["attempts"]) == 1 for cid in ids.values())
    # Nothing in the workers' logs (level WARNING) about these tasks: no "raised unexpected".
    logs = "\n".join(worker.log_path.read_text(errors="replace") for worker in live.workers)
    assert not any(task["uuid"] in logs for task in tasks.values())

    # The task list (what the /tasks page renders) has the columns toolhub sets, and each
    # row's kwargs name the tool and the call.
    page = get(f"{flower}/tasks").text
    assert re.findall(r'<th data-column="(\w+)"', page) == FLOWER_TASKS_COLUMNS.split(",")
    table = _datatable(flower)
    rows_by_call = {
        cid: row
        for row in table
        # A row Flower knows only from a later event (another test's task) has no kwargs yet.
        for cid in re.findall(r"'call_id': '([^']+)'", row.get("kwargs") or "")
    }
    assert rows_by_call[ids["denied"]]["state"] == "FAILURE"
    assert rows_by_call[ids["denied"]]["exception"] == "ToolError('permission_denied')"
    assert rows_by_call[ids["cancelled"]]["state"] == "REVOKED"
    assert "'tool': 'Test:noop'" in rows_by_call[ids["ok"]]["kwargs"]
    assert SECRET not in repr(table)
    # The search box finds a call by its id, and the Failed filter lists the failure only.
    assert [row["uuid"] for row in _datatable(flower, ids["denied"])] == [tasks["denied"]["uuid"]]
    assert [row["uuid"] for row in _datatable(flower, "state:FAILURE")] == [tasks["denied"]["uuid"]]


def _datatable(flower: str, search: str = "") -> list[dict[str, Any]]:
    """The rows Flower's task list fetches (``/tasks/datatable``, newest first)."""
    params = {
        "draw": 1,
        "start": 0,
        "length": 100,
        "search[value]": search,
        "order[0][column]": 0,
        "order[0][dir]": "desc",
        "columns[0][data]": "received",
    }
    rows: list[dict[str, Any]] = get(f"{flower}/tasks/datatable", **params).json()["data"]
    return rows


def test_every_deployment_runs_flower_with_the_same_task_columns(monkeypatch, tmp_path):
    """``toolhub up``, compose and the chart start Flower with toolhub's task list columns."""
    flag = f"--tasks_columns={FLOWER_TASKS_COLUMNS}"
    assert {"kwargs", "exception", "state"} <= set(FLOWER_TASKS_COLUMNS.split(","))
    compose = yaml.safe_load((REPO / "compose" / "docker-compose.yml").read_text())
    assert flag in compose["services"]["flower"]["command"]
    chart = (REPO / "helm" / "toolhub" / "templates" / "flower.yaml").read_text()
    assert f"- {flag}\n" in chart

    def started(columns: str | None) -> list[str]:
        if columns is None:
            monkeypatch.delenv("FLOWER_TASKS_COLUMNS", raising=False)
        else:
            monkeypatch.setenv("FLOWER_TASKS_COLUMNS", columns)
        stack = LocalStack(workspace=tmp_path, flower_port=5599)
        spawned: list[list[str]] = []
        monkeypatch.setattr(stack, "_spawn", lambda name, argv, env, grace: spawned.append(argv))
        monkeypatch.setattr(stack, "_await", lambda child, deadline, ready: None)
        stack._start_flower("redis://127.0.0.1:1/0", 0.0)
        (argv,) = spawned
        return argv

    assert flag in started(None)
    assert "--tasks_columns=name,state" in started("name,state")  # an operator's choice wins


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (Debian: apt-get install chromium); "
    "the API test above checks the same data",
)
def test_flower_task_list_in_a_real_browser(live, connect, flower, tmp_path):
    session = connect()
    warm_up(flower, lambda cid: asyncio.run(session.call("noop", {}, call_id=cid)))
    ids = _run_outcomes(live, connect, tmp_path, "fb")
    _settled(flower, ids)

    dom = _dump_dom(flower, tmp_path, "/tasks")
    (tmp_path / "tasks.html").write_text(dom)  # kept with the test's files, for a failure
    rows = _dom_rows(dom)
    assert rows, dom[-2000:]
    by_call = {cid: row for row in rows for cid in ids.values() if f"'call_id': '{cid}'" in row}
    assert set(by_call) == set(ids.values()), rows
    assert ">FAILURE</span>" in by_call[ids["denied"]]
    assert "ToolError('permission_denied')" in by_call[ids["denied"]]
    assert "Main:read_file" in by_call[ids["denied"]]
    assert (
        ">REVOKED</span>" in by_call[ids["cancelled"]]
        and "Test:sleeper" in by_call[ids["cancelled"]]
    )
    assert ">SUCCESS</span>" in by_call[ids["ok"]] and "Test:noop" in by_call[ids["ok"]]
    assert SECRET not in dom

    # The dashboard's Failed card counts the one failure (the cancel is not a failure).
    dashboard = _dump_dom(flower, tmp_path, "/workers")
    (tmp_path / "workers.html").write_text(dashboard)
    assert re.search(r'id="workers-failed"[^>]*>\s*1\s*<', dashboard), dashboard[-3000:]


def _dump_dom(flower: str, tmp_path: Path, path: str) -> str:
    """A Flower page after its scripts ran (DataTables fetches the rows): Chromium logs in
    with the basic-auth credentials in the URL."""
    assert CHROMIUM is not None
    host = flower.removeprefix("http://")
    url = f"http://{AUTH[0]}:{AUTH[1]}@{host}{path}"
    argv = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        # This machine's network is closed: no background fetches, no Google lookups.
        "--disable-quic",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'chromium'}",
        "--virtual-time-budget=10000",
        "--dump-dom",
        url,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def _dom_rows(dom: str) -> list[str]:
    body = dom.split('<table id="tasks-table"', 1)[-1]
    tbody = body.split("<tbody", 1)[-1].split("</tbody>", 1)[0]
    return re.findall(r"<tr[^>]*>.*?</tr>", tbody, re.S)
