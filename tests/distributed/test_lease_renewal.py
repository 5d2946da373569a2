"""Renewing many leases at once (``CallRecords.renew``): one script call per batch, one code per
call in order: renewed, lost (another attempt owns the call, or it ended) or renewed with a
cancel requested; only the renewed calls' leases move."""

from __future__ import annotations

import time

import pytest

from toolhub.distributed import records


def test_each_call_gets_its_own_code_across_batches(
    live, store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(records, "RENEW_BATCH", 2)
    calls = {
        "renewed-a": {"status": "running", "attempt": "1"},
        "taken-over": {"status": "running", "attempt": "2"},
        "finished": {"status": "succeeded", "attempt": "1"},
        "to-cancel": {"status": "running", "attempt": "1", "cancel_requested": "1"},
        "renewed-b": {"status": "running", "attempt": "3"},
    }
    for cid, fields in calls.items():
        store.client.hset(store.keys.call(cid), mapping={**fields, "lease_until": "1.0"})
    before = time.time()
    codes = store.records.renew(
        [("renewed-a", 1), ("taken-over", 1), ("finished", 1), ("to-cancel", 1), ("renewed-b", 3)]
    )
    assert codes == [1, 0, 0, 2, 1]
    lease = store.records.settings.lease_seconds
    for cid in ("renewed-a", "to-cancel", "renewed-b"):
        until = float(store.client.hget(store.keys.call(cid), "lease_until"))
        assert before + lease - 1 < until < time.time() + lease + 1
        assert store.client.zscore(store.keys.leases, cid) == pytest.approx(until, abs=1e-3)
    for cid in ("taken-over", "finished"):
        assert store.client.hget(store.keys.call(cid), "lease_until") == b"1.0"
        assert store.client.zscore(store.keys.leases, cid) is None
    for cid in calls:
        store.client.delete(store.keys.call(cid))
        store.client.zrem(store.keys.leases, cid)


def test_nothing_to_renew_sends_nothing(live, store) -> None:
    assert store.records.renew([]) == []
