"""What each tenant used, on the real stack (redis-server, real ``toolhub worker`` processes):
each call's record has its four figures; the finishing script adds them up per tenant and per
tool in the tenant's hour (``{prefix}usage:{tenant}:{hour}``, 8 days); ``toolhub usage`` prints
them for a window; each worker's ``/metrics`` counts them per tenant and tool.

The tools charge their call's meter themselves (``plugin_usage.py``), as the process backend
does for a command's CPU seconds and peak memory."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from tests.distributed.helpers import TASK_TOOLS, wait_until
from tests.distributed.plugin_usage import CONFIG, usage_builder
from tests.fixtures_stack import Stack
from toolhub import Session
from toolhub.cli.main import app
from toolhub.distributed.store import RedisStore
from toolhub.distributed.usage import ALL_TOOLS, USAGE_TTL_SECONDS, read_usage
from toolhub.tasks.redis import BACKGROUND_TOOL

FIGURES = ("cpu_seconds", "wall_seconds", "peak_memory_bytes", "output_bytes")
CHARGE, STREAM = "Usage:charge", "Usage:charge_stream"


@pytest.fixture
def tenants(live: Stack, tmp_path: Path) -> Iterator[dict[str, Session]]:
    """Two tenants (names new to this Redis), one session each, on the real workers."""
    suffix = os.urandom(3).hex()
    made: dict[str, Session] = {}
    for name in ("acme", "globex"):
        tenant = f"{name}{suffix}"
        workspace = tmp_path / tenant
        workspace.mkdir()
        made[tenant] = Session.connect(
            live.url, CONFIG, workspace, session_id=f"{tenant}~s1", builder=usage_builder()
        )
    yield made
    for session in made.values():
        session.close()


def test_records_sums_cli_and_worker_metrics_of_two_tenants(
    live: Stack, store: RedisStore, tenants: dict[str, Session]
) -> None:
    acme, globex = tenants
    a, g = tenants[acme], tenants[globex]
    results = {
        "a1": a.call_sync("charge", {"cpu_seconds": 0.25, "peak_memory_bytes": 1000, "text": "x"}),
        "a2": a.call_sync("charge", {"cpu_seconds": 0.5, "fail": True}),
        "a3": a.call_sync(
            "charge_stream",
            {"cpu_seconds": 1.0, "peak_memory_bytes": 5000, "text": "héllo", "chunks": 2},
        ),
        "g1": g.call_sync("charge", {"cpu_seconds": 2.0, "peak_memory_bytes": 7000}),
    }
    assert [r.is_error for r in results.values()] == [False, True, False, False]

    # Each call's record (what the API returns) has its four figures.
    records = {}
    for key, result in results.items():
        session = a if key.startswith("a") else g
        assert result.call_id is not None
        record = session.record_sync(result.call_id)
        assert record is not None and all(name in record for name in FIGURES), record
        records[key] = record
    assert records["a1"]["cpu_seconds"] == 0.25 and records["a1"]["peak_memory_bytes"] == 1000
    assert records["a2"]["status"] == "failed" and records["a2"]["cpu_seconds"] == 0.5
    assert records["a3"]["output_bytes"] == 2 * 6 + len(results["a3"].prompt_text.encode())
    assert records["g1"]["cpu_seconds"] == 2.0
    assert all(0 < r["wall_seconds"] < 60 for r in records.values())

    # Summed per tenant and per tool, in the tenant's hour (two hours: a run may span one).
    rows = {
        (row.tenant, row.tool): row
        for row in read_usage(store.client, store.records.keys, hours=2)
        if row.tenant in tenants
    }
    total_a = rows[(acme, ALL_TOOLS)]
    assert (total_a.calls, total_a.errors) == (3, 1)
    assert total_a.cpu_seconds == pytest.approx(1.75)
    assert total_a.peak_memory_bytes == 5000
    assert total_a.output_bytes == sum(records[k]["output_bytes"] for k in ("a1", "a2", "a3"))
    assert total_a.wall_seconds == pytest.approx(
        sum(records[k]["wall_seconds"] for k in ("a1", "a2", "a3")), abs=1e-5
    )
    charge_a = rows[(acme, CHARGE)]
    assert (charge_a.calls, charge_a.errors, charge_a.cpu_seconds) == (2, 1, 0.75)
    assert rows[(acme, STREAM)].calls == 1 and rows[(acme, STREAM)].cpu_seconds == 1.0
    assert rows[(globex, ALL_TOOLS)].calls == 1 and rows[(globex, CHARGE)].cpu_seconds == 2.0
    assert (globex, STREAM) not in rows
    # The agreed layout: one hash per tenant and hour, kept 8 days.
    hour = int(time.time() // 3600)
    key = next(
        k
        for k in (f"toolhub:usage:{acme}:{hour}", f"toolhub:usage:{acme}:{hour - 1}")
        if store.client.exists(k)
    )
    assert 0 < store.client.ttl(key) <= USAGE_TTL_SECONDS
    assert {b"calls", b"errors", b"cpu_seconds", b"Usage:charge|cpu_seconds"} <= set(
        store.client.hkeys(key)
    )

    # ``toolhub usage`` prints them for a window, as a table and as JSON.
    runner = CliRunner()
    shown = runner.invoke(
        app,
        ["usage", "--redis", live.url, "--since", "2h", "--tenant", acme],
        env={"COLUMNS": "160"},
    )
    assert shown.exit_code == 0, shown.output
    assert acme in shown.output and CHARGE in shown.output and "1.750" in shown.output
    assert globex not in shown.output
    raw = runner.invoke(app, ["usage", "--redis", live.url, "--hours", "2", "--json"])
    assert raw.exit_code == 0, raw.output
    listed = json.loads(raw.output)
    assert listed["hours"] == 2
    mine = [r for r in listed["rows"] if r["tenant"] == globex]
    assert [(r["tool"], r["calls"], r["cpu_seconds"]) for r in mine] == [
        (ALL_TOOLS, 1, 2.0),
        (CHARGE, 1, 2.0),
    ]

    # Each worker's /metrics counts the calls it finished, per tenant and tool: summed over
    # the workers, they are the fleet's.
    def cpu_of(tenant: str) -> float:
        total = 0.0
        for worker in live.workers:
            text = httpx.get(worker.metrics_url, timeout=10).text
            for family in text_string_to_metric_families(text):
                for sample in family.samples:
                    if (
                        sample.name == "toolhub_usage_cpu_seconds_total"
                        and sample.labels.get("tenant") == tenant
                    ):
                        total += sample.value
        return total

    assert wait_until(lambda: cpu_of(acme) == pytest.approx(1.75), 10)
    assert wait_until(lambda: cpu_of(globex) == pytest.approx(2.0), 10)


def test_a_background_command_run_by_the_holder_is_charged_to_its_tenant(
    live: Stack, store: RedisStore, tmp_path: Path
) -> None:
    """A durable background command ends in the background holder, not in the worker that
    took it: its record still has the four figures, and its tenant's hour counts it."""
    tenant = f"bg{os.urandom(3).hex()}"
    session = Session.connect(live.url, TASK_TOOLS, tmp_path, session_id=f"{tenant}~s1")
    try:
        started = session.call_sync(
            "bash",
            {
                "command": "printf 'hello from the holder\\n'",
                "description": "t",
                "is_background": True,
            },
        )
        assert not started.is_error, started.prompt_text
        assert started.output is not None
        task_id = str(started.output.value["task_id"])
        record = wait_until(
            lambda: (r := store.get_record(task_id)) and r["status"] != "running" and r, 20
        )
        assert record["status"] == "succeeded", record
        assert all(name in record for name in FIGURES), record
        assert record["output_bytes"] >= len("hello from the holder\n")
        assert record["wall_seconds"] > 0
        rows = {
            row.tool: row
            for row in read_usage(store.client, store.records.keys, hours=2, tenant=tenant)
        }
        assert rows[BACKGROUND_TOOL].calls == 1
        assert rows[BACKGROUND_TOOL].output_bytes == record["output_bytes"]
        # The bash call that started it counts too, as its own tool.
        assert rows[ALL_TOOLS].calls == 2 and rows["Main:bash"].calls == 1
    finally:
        session.close()
