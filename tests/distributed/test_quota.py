"""A tenant's quotas, checked in the script that creates a call (``toolhub/distributed/quota.py``,
``lua/quota.lua``), on the real stack's redis-server: a burst over the rate is refused with
``retry_after`` and leaves nothing recorded or queued, and the retry after it is admitted; two
dispatchers (two clients, as two gateway replicas) share one bucket; one tenant over its
quota does not touch another's; calls in flight are counted until every terminal path
releases them, and the entry of a call nobody finished expires at its deadline; the CPU
quota reads the usage hashes of this hour and the previous one; a tenant's background tasks
are counted across its sessions."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator
from typing import Any

import pytest
from celery import Celery

from toolhub.core import CallResult, ErrorKind, ToolError
from toolhub.distributed.codec import pack
from toolhub.distributed.quota import (
    OverQuota,
    QuotaLimits,
    over_quota_error,
    quota_args,
)
from toolhub.distributed.records import CallRecords
from toolhub.distributed.script_replies import CreateAndEnqueueReply as Created
from toolhub.distributed.settings import Settings
from toolhub.distributed.store import RedisStore
from toolhub.tasks.redis import RedisBackgroundTasks
from toolhub.tenancy import Quotas

QUEUE = b"quota.test.queue"


@pytest.fixture
def tenant() -> str:
    return f"q{os.urandom(4).hex()}"


@pytest.fixture
def second(live: Any) -> Iterator[RedisStore]:
    """Another dispatcher's store: its own clients and scripts, the same Redis."""
    other = RedisStore.from_settings(Settings.from_env(live.url))
    yield other
    other.close()


def dispatch(
    store: RedisStore,
    limits: QuotaLimits | None,
    cid: str,
    *,
    workload: str = "fast",
    hold: float = 60.0,
) -> Created | OverQuota:
    """One call's create-and-enqueue as the executor sends it (its quota arguments and the
    record field that names its count), through the batched dispatch path."""
    quota, held = quota_args(
        store.keys, limits, counted="calls", workload=workload, hold_seconds=hold
    )
    fields = {"session_id": "s", "name": "noop", **held}
    keys, args = store.records.create_and_enqueue_args(
        cid,
        "run-" + cid,
        fields,
        QUEUE,
        cid.encode(),
        config_hash="h",
        tenant=limits.tenant if limits else "default",
        quota=quota,
    )
    return asyncio.run(store.dispatches.create_and_enqueue(keys, args))


@pytest.fixture(autouse=True)
def _queue(store: RedisStore) -> Iterator[None]:
    store.client.set(store.keys.config("h"), "{}")
    store.client.delete(QUEUE)
    yield
    store.client.delete(QUEUE)


def test_a_burst_over_the_rate_is_refused_with_retry_after_and_leaves_nothing(store, tenant):
    limits = QuotaLimits(tenant, calls_per_second=2.0, burst=3)
    cids = [f"{tenant}-{i}" for i in range(4)]
    replies = [dispatch(store, limits, cid) for cid in cids]
    assert replies[:3] == [Created.CREATED] * 3
    refused = replies[3]
    assert isinstance(refused, OverQuota) and refused.quota == "calls_per_second"
    assert refused.limit == 2.0 and 0 < refused.retry_after <= 0.5 + 0.05
    client = store.client
    assert not client.exists(store.keys.call(cids[3])), "no record for the refused call"
    assert client.llen(QUEUE) == 3, "nothing queued for it"
    assert client.zscore(store.keys.pending, cids[3]) is None

    time.sleep(refused.retry_after + 0.05)
    assert dispatch(store, limits, cids[3]) == Created.CREATED, "the retry is admitted"
    assert client.llen(QUEUE) == 4


def test_two_dispatchers_share_one_bucket(store, second, tenant):
    limits = QuotaLimits(tenant, calls_per_second=0.5, burst=4)
    replies = [dispatch((store, second)[i % 2], limits, f"{tenant}-{i}") for i in range(6)]
    assert replies[:4] == [Created.CREATED] * 4
    assert all(isinstance(r, OverQuota) for r in replies[4:]), replies


def test_one_tenant_over_its_quota_leaves_another_alone(store, tenant):
    hog = QuotaLimits(tenant, calls_per_second=0.1, burst=1)
    other = QuotaLimits(tenant + "b", calls_per_second=0.1, burst=1)
    assert dispatch(store, hog, f"{tenant}-a1") == Created.CREATED
    assert isinstance(dispatch(store, hog, f"{tenant}-a2"), OverQuota)
    assert dispatch(store, other, f"{tenant}-b1") == Created.CREATED
    assert dispatch(store, None, f"{tenant}-free") == Created.CREATED, "no quota, no check"


def _result(cid: str) -> CallResult:
    return CallResult.failure("noop", ToolError.execution("ended"), call_id=cid)


def _claim(store: RedisStore, cid: str) -> int:
    message = {"call_id": cid, "run_id": "run-" + cid, "session_id": "s", "name": "noop"}
    claim = store.records.claim(message, "worker-test")
    assert claim.action == "run", claim
    return claim.attempt


def _finish(store: RedisStore, cid: str) -> None:
    attempt = _claim(store, cid)
    store.records.finish(cid, "s", attempt, _result(cid))


def _cancel(store: RedisStore, cid: str) -> None:
    assert store.records.cancel(cid) == "cancelled"


def _fail_queued(store: RedisStore, cid: str) -> None:
    store.records.mark_failed_dispatch(cid, "s", _result(cid))


def _refuse(store: RedisStore, cid: str) -> None:
    assert store.records.refuse(cid, "run-" + cid, "test")


@pytest.mark.parametrize("end", [_finish, _cancel, _fail_queued, _refuse])
def test_calls_in_flight_are_counted_until_their_terminal(store, tenant, end):
    limits = QuotaLimits(tenant, concurrent_calls=2)
    held = store.keys.prefix + f"quota:{tenant}:calls"
    assert dispatch(store, limits, f"{tenant}-1") == Created.CREATED
    assert dispatch(store, limits, f"{tenant}-2") == Created.CREATED
    refused = dispatch(store, limits, f"{tenant}-3")
    assert isinstance(refused, OverQuota) and refused.quota == "concurrent_calls"
    assert refused.limit == 2 and refused.retry_after > 0
    assert store.client.zcard(held) == 2

    end(store, f"{tenant}-1")
    assert store.client.zcard(held) == 1, "the terminal released its slot"
    assert dispatch(store, limits, f"{tenant}-3") == Created.CREATED
    assert "quota_held" not in (store.get_record(f"{tenant}-3") or {}), "not shown in the record"


def test_a_lost_worker_releases_its_slot_through_the_sweep(store, tenant):
    """A worker that claimed the call and died: once its lease lapsed, the sweep's
    ``fail_lost`` writes the terminal, which releases the slot."""
    limits = QuotaLimits(tenant, concurrent_calls=1)
    cid = f"{tenant}-lost"
    assert dispatch(store, limits, cid) == Created.CREATED
    _claim(store, cid)
    assert isinstance(dispatch(store, limits, f"{tenant}-next"), OverQuota)
    time.sleep(store.settings.lease_seconds + 0.3)
    failed = store.records.scripts.fail_lost(
        keys=store.records.call_keys(cid, "s"),
        args=[cid, b"x", pack(_result(cid).to_dict()), 60],
    )
    assert failed, "the sweep failed the lost call"
    assert dispatch(store, limits, f"{tenant}-next") == Created.CREATED


def test_the_entry_of_a_call_nobody_finished_expires_at_its_deadline(store, tenant):
    """Its worker died and nothing swept it (the whole fleet was down): the slot is free
    again once the call's deadline passed, whatever its record says."""
    limits = QuotaLimits(tenant, concurrent_calls=1)
    cid = f"{tenant}-orphan"
    assert dispatch(store, limits, cid, hold=0.5) == Created.CREATED
    _claim(store, cid)
    assert isinstance(dispatch(store, limits, f"{tenant}-after"), OverQuota)
    time.sleep(0.7)
    assert dispatch(store, limits, f"{tenant}-after") == Created.CREATED
    held = store.keys.prefix + f"quota:{tenant}:calls"
    assert store.client.zrange(held, 0, -1) == [f"{tenant}-after".encode()]


def _usage(store: RedisStore, tenant: str, hour: int, cpu: float) -> None:
    """What the usage meter writes when a call finishes (the agreed layout)."""
    key = f"{store.keys.prefix}usage:{tenant}:{hour}"
    store.client.hset(key, mapping={"calls": 1, "cpu_seconds": cpu})
    store.client.expire(key, 8 * 24 * 3600)


def test_cpu_seconds_over_the_hour_hold_back_commands_only(store, tenant):
    limits = QuotaLimits(tenant, cpu_seconds_per_hour=100.0)
    now, _ = store.client.time()
    hour = now // 3600
    _usage(store, tenant, hour, 60.0)
    assert dispatch(store, limits, f"{tenant}-c1", workload="command") == Created.CREATED
    _usage(store, tenant, hour, 130.0)
    refused = dispatch(store, limits, f"{tenant}-c2", workload="command")
    assert isinstance(refused, OverQuota) and refused.quota == "cpu_seconds_per_hour"
    into = now - hour * 3600
    # Nothing of the previous hour to slide out: it waits for this hour to end, then until
    # this hour's 130 s, sliding out, weigh 100 s.
    expected = (3600 - into) + 3600 * (1 - 100 / 130)
    assert abs(refused.retry_after - expected) < 5
    assert not store.client.exists(store.keys.call(f"{tenant}-c2"))
    assert dispatch(store, limits, f"{tenant}-read", workload="fast") == Created.CREATED


def test_the_previous_hour_counts_for_the_part_still_in_the_window(store, tenant):
    limits = QuotaLimits(tenant, cpu_seconds_per_hour=100.0)
    now, _ = store.client.time()
    hour = now // 3600
    left = 1 - (now - hour * 3600) / 3600
    _usage(store, tenant, hour - 1, 1000.0)
    _usage(store, tenant, hour, 10.0)
    used = 10.0 + 1000.0 * left
    reply = dispatch(store, limits, f"{tenant}-c", workload="command")
    if used < 100.0:
        assert reply == Created.CREATED
    else:
        assert isinstance(reply, OverQuota)
        # The previous hour slides out at 1000/3600 per second.
        assert abs(reply.retry_after - (used - 100.0) * 3600 / 1000) < 5


def test_the_refusal_reads_as_a_typed_rate_limited_error() -> None:
    error = over_quota_error("acme", OverQuota("calls_per_second", 5.0, 0.2501))
    assert error.kind is ErrorKind.RATE_LIMITED and error.code == "quota_exceeded"
    assert error.details == {
        "code": "quota_exceeded",
        "quota": "calls_per_second",
        "limit": 5.0,
        "retry_after": 0.251,
        "tenant": "acme",
    }
    assert "at most 5 calls per second" in error.detail
    assert "nothing was queued; retry after 0.251 s" in error.detail


def test_background_tasks_are_counted_per_tenant_across_sessions(live, store, tenant):
    settings = Settings.from_env(live.url)
    # Their messages go to a broker no worker reads: the tasks stay as started.
    app = Celery(broker=live.url.rsplit("/", 1)[0] + "/7")
    limits = QuotaLimits(tenant, concurrent_background_tasks=2)
    first = RedisBackgroundTasks(store.client, app, settings, f"{tenant}~a", quotas=limits)
    other = RedisBackgroundTasks(store.client, app, settings, f"{tenant}~b", quotas=limits)
    records = CallRecords(store.client, settings)
    started: list[str] = []
    try:
        started.append(_start(first, f"{tenant}~a"))
        started.append(_start(other, f"{tenant}~b"))
        with pytest.raises(ToolError) as refused:
            _start(first, f"{tenant}~a")
        assert refused.value.kind is ErrorKind.RATE_LIMITED
        assert refused.value.details is not None
        assert refused.value.details["quota"] == "concurrent_background_tasks"
        assert "background tasks running at once" in refused.value.detail
        assert first.kill(started[0]) == "killed"
        started.append(_start(first, f"{tenant}~a"))
    finally:
        for task_id in started:
            records.cancel(task_id, reason="test over")


def _start(tasks: RedisBackgroundTasks, session: str) -> str:
    return tasks.start("sleep 30", cwd=None, timeout_ms=None, owner_session=session, call_id="c")


def test_a_python_session_reads_the_typed_error_and_its_retry_runs(connect, tmp_path, tenant):
    """``Session.connect(quotas=...)``: the refused call's result is the typed error (calls
    never raise), and the call retried after ``retry_after`` runs on a worker."""
    workspace = tmp_path / "root" / "tenants" / tenant
    session = connect(
        session_id=f"{tenant}~s",
        workspace=workspace,
        quotas=Quotas(calls_per_second=0.5, burst=1),
    )
    assert not session.call_sync("noop", {}, call_id="first").is_error
    refused = session.call_sync("noop", {}, call_id="second")
    assert refused.error is not None and refused.error.kind is ErrorKind.RATE_LIMITED
    details = refused.error.details or {}
    assert details["quota"] == "calls_per_second" and details["tenant"] == tenant
    assert "retry after" in refused.prompt_text
    assert session.executor.store.get_record("second") is None, "nothing recorded"
    time.sleep(details["retry_after"] + 0.1)
    assert not session.call_sync("noop", {}, call_id="second").is_error
