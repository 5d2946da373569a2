"""Optimistic runs (``workers/calls/optimistic.py``) on real workers: a fresh call of a read-only,
synchronous tool runs before its claim and is claimed and finished in one step. Each test
shows what the caller sees and what the record says when something happens meanwhile: the
session state moved, the run outlasted its window, a cancel came, the worker died."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

from pydantic import TypeAdapter

from tests.distributed.helpers import async_wait_until
from tests.distributed.plugin_tools import Items
from tests.observability.metrics_scrape import moved, scrape_all, total
from toolhub import CallResult, Session
from toolhub.state.redis import RedisStateSync

RUNS = "toolhub_worker_optimistic_runs_total"


def _warm(live, session: Session, store, tag: str, tool: str = "peek", args=None) -> None:
    """Calls until both workers have run one of the session's calls: each then holds the
    session's tool set and state, which an optimistic run needs."""
    workers = {f"{socket.gethostname()}:{worker.pid}" for worker in live.workers}
    seen: set[str] = set()
    for burst in range(20):
        cids = [f"{tag}-warm-{burst}-{i}" for i in range(6)]

        async def calls(ids: list[str] = cids) -> None:
            await asyncio.gather(*(session.call(tool, args or {}, call_id=cid) for cid in ids))

        asyncio.run(calls())
        seen |= {store.get_record(cid)["worker"] for cid in cids}
        if seen >= workers:
            return
    raise AssertionError(f"the calls reached {seen}, not both workers {workers}")


def _starts(marker: Path) -> int:
    return marker.read_text().count("start") if marker.exists() else 0


def test_a_read_only_call_is_claimed_and_finished_in_one_step(live, connect, store):
    session = connect(session_id="optimistic-one-step")
    _warm(live, session, store, "one-step")
    before = scrape_all(live)

    async def calls() -> list[CallResult]:
        return [await session.call("peek", {}, call_id=f"one-step-{i}") for i in range(8)]

    results = asyncio.run(calls())
    after = scrape_all(live)
    assert [r.error for r in results] == [None] * 8
    assert moved(before, after, RUNS, outcome="finished") == 8
    assert moved(before, after, RUNS, outcome="refused") == 0
    # Counted as attempts, with their outcome and run time, like every other call.
    assert moved(before, after, "toolhub_worker_calls_total", tool="Test:peek", outcome="ok") == 8
    assert moved(before, after, "toolhub_worker_run_seconds_count", tool="Test:peek") == 8
    for i in range(8):
        record = store.get_record(f"one-step-{i}")
        assert record["status"] == "succeeded" and record["attempt"] == 1
        [attempt] = record["attempts"]
        assert attempt["outcome"] == "succeeded" and attempt["worker"] == record["worker"]
        assert attempt["started_at"] <= attempt["finished_at"]


def test_a_state_written_since_the_workers_copy_makes_the_call_run_again(live, connect, store):
    session = connect(session_id="optimistic-state-moved")
    _warm(live, session, store, "state-moved")
    # Another writer changes the session's state: both workers' copies are now stale.
    state = RedisStateSync(store.client, store.keys.state("optimistic-state-moved"))
    state.update("test_items", lambda _: Items(items=["fresh"]), TypeAdapter(Items))
    before = scrape_all(live)
    result = asyncio.run(session.call("peek", {}, call_id="state-moved-read"))
    after = scrape_all(live)
    assert result.error is None and result.output.value["items"] == ["fresh"]
    assert moved(before, after, RUNS, outcome="refused") == 1
    assert moved(before, after, RUNS, outcome="finished") == 0
    record = store.get_record("state-moved-read")
    assert record["status"] == "succeeded" and record["attempt"] == 1


def test_a_run_past_its_window_is_claimed_while_it_runs(live, connect, store, tmp_path):
    session = connect(session_id="optimistic-late")
    _warm(live, session, store, "late")
    marker = tmp_path / "late.marker"
    before = scrape_all(live)

    async def go() -> tuple[CallResult, dict]:
        call = asyncio.ensure_future(
            session.call("peek", {"seconds": 1.5, "marker": str(marker)}, call_id="late-read")
        )
        await async_wait_until(lambda: _starts(marker) == 1, 10)
        running = await async_wait_until(
            lambda: (r := store.get_record("late-read")) and r["status"] == "running" and r, 5
        )
        assert not call.done(), "it showed running only once it had ended"
        in_flight = total(scrape_all(live), "toolhub_worker_calls_in_flight")
        assert in_flight == 1, "the run counts as in flight before it settles"
        return await call, running

    result, running = asyncio.run(go())
    after = scrape_all(live)
    assert result.error is None
    assert running["attempt"] == 1 and running["lease_until"] > time.time() - 5
    assert moved(before, after, RUNS, outcome="late_claimed") == 1
    assert _starts(marker) == 1, "claimed while it ran, so it ran once"
    assert store.get_record("late-read")["status"] == "succeeded"


def test_a_cancel_during_a_run_in_its_window_is_the_answer(live, connect, store, tmp_path):
    session = connect(session_id="optimistic-cancel")
    _warm(live, session, store, "cancel")
    marker = tmp_path / "cancel.marker"

    async def go() -> CallResult:
        call = asyncio.ensure_future(
            session.call("peek", {"seconds": 0.15, "marker": str(marker)}, call_id="cancel-read")
        )
        await async_wait_until(lambda: _starts(marker) == 1, 10)
        assert await session.cancel("cancel-read")
        return await call

    result = asyncio.run(go())
    assert result.error is not None and result.error.kind == "cancelled"
    time.sleep(0.5)  # the run's own end, refused
    assert store.get_record("cancel-read")["status"] == "cancelled"
    assert _starts(marker) == 1, "a cancelled call is not run again"


def test_a_cancel_after_the_late_claim_is_answered_at_once(live, connect, store, tmp_path):
    session = connect(session_id="optimistic-late-cancel")
    _warm(live, session, store, "late-cancel")
    marker = tmp_path / "late-cancel.marker"

    async def go() -> tuple[CallResult, float]:
        call = asyncio.ensure_future(
            session.call("peek", {"seconds": 6, "marker": str(marker)}, call_id="late-cancel")
        )
        await async_wait_until(
            lambda: (r := store.get_record("late-cancel")) and r["status"] == "running", 10
        )
        asked = time.monotonic()
        assert await session.cancel("late-cancel")
        result = await call
        return result, time.monotonic() - asked

    result, waited = asyncio.run(go())
    assert result.error is not None and result.error.kind == "cancelled"
    assert waited < 3, f"the cancel waited {waited:.1f}s for a 6 s run"
    assert store.get_record("late-cancel")["status"] == "cancelled"


def test_a_worker_killed_during_an_optimistic_run_leaves_a_call_that_still_ends(
    live, connect, store, tmp_path
):
    session = connect(session_id="optimistic-killed")
    _warm(live, session, store, "killed")
    marker = tmp_path / "killed.marker"
    args = {"marker": str(marker), "die_first": True}
    result = asyncio.run(asyncio.wait_for(session.call("peek", args, call_id="killed-read"), 30))
    assert result.error is None
    assert _starts(marker) == 2, "the first run's worker died; the second answered"
    record = store.get_record("killed-read")
    # It died before any claim: the sweep put its message back (requeued), no attempt lost.
    assert record["requeued"] == 1 and record["lost"] == 0 and record["attempt"] == 1


def test_a_run_whose_reminder_wrote_state_is_claimed_after_it_and_kept(live, store, tmp_path):
    workspace = tmp_path / "skills-ws"
    (workspace / "area/.claude/skills/deploy").mkdir(parents=True)
    (workspace / "plain").mkdir()
    (workspace / "plain/a.txt").write_text("a\n")
    (workspace / "area/notes.txt").write_text("notes\n")
    (workspace / "area/.claude/skills/deploy/SKILL.md").write_text(
        "---\nname: deploy\ndescription: Ship it.\n---\nSteps.\n"
    )
    config = {"tools": [{"id": "Main:read_file"}]}
    session = Session.connect(live.url, config, workspace, session_id="optimistic-reminder")
    try:
        _warm(live, session, store, "reminder", "read_file", {"path": "plain/a.txt"})
        before = scrape_all(live)
        first = asyncio.run(
            session.call("read_file", {"path": "area/notes.txt"}, call_id="reminded")
        )
        after = scrape_all(live)
        again = asyncio.run(session.call("read_file", {"path": "area/notes.txt"}, call_id="again"))
    finally:
        session.close()
    # The skill reminder recorded the skill it announced: that run is the answer, not a rerun
    # (which would find the skill announced already, and say nothing of it).
    assert first.error is None and "deploy: Ship it." in first.prompt_text
    assert moved(before, after, RUNS, outcome="wrote_state") == 1
    assert moved(before, after, RUNS, outcome="refused") == 0
    assert store.get_record("reminded")["attempt"] == 1
    assert again.error is None and "deploy" not in again.prompt_text
