"""What a worker does with a message it will not run, on a real Redis: the item goes to the
dead-letter list with why, the metric counts it, and the call it names is answered
``message_refused`` rather than left waiting; without a usable fleet key where one is required,
the worker refuses to start at all."""

from __future__ import annotations

import json
import time

import pytest

from tests.distributed.helpers import queued_call
from toolhub.distributed.celery_app import EXECUTE_TASK
from toolhub.distributed.signing import REQUIRE_ENV, FleetKey, FleetKeys
from toolhub.distributed.store import RedisStore
from workers.calls.refusals import EXIT_NO_FLEET_KEY, REPLAYED, Refusals, worker_fleet_keys
from workers.lifecycle.metrics import metrics

QUEUE = b"test.refusals"


def _entries(store: RedisStore) -> list[dict[str, object]]:
    return [json.loads(raw) for raw in store.client.lrange(store.keys.deadletter, 0, -1)]


def _deadlettered(reason: str) -> float:
    return metrics.deadlettered.labels(reason)._value.get()


def test_a_refused_item_is_dead_lettered_counted_and_its_call_answered(
    bare_store: RedisStore,
) -> None:
    queued_call(bare_store, "r-1", QUEUE)
    refusals = Refusals(bare_store, "test-worker", None)
    before = _deadlettered("malformed")
    refusals.refuse(b"\x00junk", "toolhub.fast", "malformed", "no", call_id="r-1", run_id="run-1")
    (entry,) = _entries(bare_store)
    assert entry["reason"] == "malformed" and entry["call_id"] == "r-1"
    assert entry["queue"] == "toolhub.fast" and entry["worker"] == "test-worker"
    assert _deadlettered("malformed") == before + 1
    record = bare_store.get_record("r-1")
    assert record is not None and record["status"] == "failed"
    error = bare_store.read_events("r-1")[-1].item.error
    assert error is not None and error.code == "message_refused"


def test_a_replayed_message_is_refused_under_its_own_reason(bare_store: RedisStore) -> None:
    message = queued_call(bare_store, "r-2", QUEUE)
    Refusals(bare_store, "test-worker", None).replay(message, "toolhub.fast")
    (entry,) = _entries(bare_store)
    assert entry["reason"] == REPLAYED and "already finished" in str(entry["why"])


def test_with_a_fleet_key_only_signed_messages_are_admitted(bare_store: RedisStore) -> None:
    keys = FleetKeys(FleetKey("k" * 43))
    refusals = Refusals(bare_store, "test-worker", keys)
    message = queued_call(bare_store, "r-3", QUEUE)
    assert Refusals(bare_store, "test-worker", None).admit(EXECUTE_TASK, message, "q")
    assert not refusals.admit(EXECUTE_TASK, message, "toolhub.fast")
    assert [entry["reason"] for entry in _entries(bare_store)] == ["unsigned"]
    signed = keys.sign_message({**message, "iat": int(time.time())})
    assert refusals.admit(EXECUTE_TASK, signed, "toolhub.fast")


def test_a_required_key_that_is_missing_stops_the_worker(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("TOOLHUB_FLEET_KEY", raising=False)
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(SystemExit) as stopped:
        worker_fleet_keys()
    assert stopped.value.code == EXIT_NO_FLEET_KEY
    assert "refusing to start" in capsys.readouterr().err
