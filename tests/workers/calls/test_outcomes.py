"""What a task tells Celery (and so Flower) about its call, from what the task body did: the
mapping of every ending to SUCCESS, FAILURE (error kind and code, never the detail) or REVOKED,
and how it is told (the worker request's own event, then ``Ignore``: acked, nothing else)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from celery.exceptions import Ignore
from celery.worker import state as worker_state
from redis.exceptions import RedisError

from toolhub.core import CallResult, ToolError
from toolhub.distributed.claims import Claim
from toolhub.distributed.records import cancelled_result, lost_result
from toolhub.distributed.script_replies import ClaimAction
from toolhub.errors import ErrorCode
from workers.calls.claimed import dropped
from workers.calls.outcomes import Ended, report


def _failed(error: ToolError) -> CallResult:
    return CallResult.failure("read_file", error, call_id="c1")


@pytest.mark.parametrize(
    ("said", "result", "state", "exception"),
    [
        (
            "finished",
            _failed(ToolError.permission_denied("path `/x` is outside")),
            "FAILURE",
            "ToolError('permission_denied')",
        ),
        (
            "finished",
            lost_result("t", "c1", "Test:t", 3),
            "FAILURE",
            "ToolError('custom', code='worker_lost')",
        ),
        ("finished", cancelled_result("t", "c1", "Test:t", "user"), "REVOKED", None),
        ("cancelled", _failed(ToolError.permission_denied("late")), "REVOKED", None),
        ("handed_back", _failed(ToolError.permission_denied("x")), "SUCCESS", None),
        ("lease_lost", _failed(ToolError.permission_denied("x")), "SUCCESS", None),
        ("abandoned", _failed(ToolError.permission_denied("x")), "SUCCESS", None),
    ],
)
def test_settled_outcomes(said: str, result: CallResult, state: str, exception: str | None):
    ended = Ended.settled(said, result)
    assert ended.said == said and ended.state == state
    if exception is not None:
        assert ended.exception == exception
        assert "outside" not in ended.exception  # the detail may quote arguments


def test_a_successful_call_is_success():
    assert Ended.failed("finished", None).state == "SUCCESS"
    assert Ended.custom("refused", ErrorCode.MESSAGE_REFUSED).exception == (
        "ToolError('custom', code='message_refused')"
    )


class _Store:
    def __init__(self, status: str | None, fail: bool = False) -> None:
        self.status, self.fail, self.reads = status, fail, 0

    def get_record(self, call_id: str) -> dict[str, Any] | None:
        self.reads += 1
        if self.fail:
            raise RedisError("down")
        return None if self.status is None else {"status": self.status}


@pytest.mark.parametrize(
    ("action", "attempt", "status", "state", "reads"),
    [
        ("cancelled", 0, None, "REVOKED", 0),  # the claim wrote the cancelled terminal
        ("exhausted", 2, None, "FAILURE", 0),  # the claim failed it: its worker lost too often
        ("finished", 0, "cancelled", "REVOKED", 1),  # cancelled while queued
        ("finished", 0, "failed", "SUCCESS", 1),  # e.g. refused elsewhere: not this message's
        ("finished", 1, "cancelled", "SUCCESS", 0),  # a redelivery: its attempt reported it
        ("duplicate", 1, None, "SUCCESS", 0),
        ("stale", 0, None, "SUCCESS", 0),
        ("gone", 0, None, "SUCCESS", 0),
    ],
)
def test_dropped_messages(action: str, attempt: int, status: str | None, state: str, reads: int):
    store = _Store(status)
    ended = dropped(SimpleNamespace(store=store), "c1", Claim(ClaimAction(action), attempt))
    assert (ended.said, ended.state, store.reads) == (action, state, reads)
    if action == "exhausted":
        assert ended.exception == "ToolError('custom', code='worker_lost')"


def test_a_drop_reports_success_when_redis_is_down():
    ended = dropped(SimpleNamespace(store=_Store(None, fail=True)), "c1", Claim("finished", 0))
    assert ended.state == "SUCCESS"


class _Request:
    def __init__(self) -> None:
        self.events: list[tuple[str, dict[str, Any]]] = []

    def send_event(self, type: str, **fields: Any) -> None:
        self.events.append((type, fields))


@pytest.fixture
def running() -> Any:
    """A task whose worker request is registered, as the worker does when it starts it."""
    request = _Request()
    worker_state.requests["task-1"] = request
    yield SimpleNamespace(request=SimpleNamespace(id="task-1")), request
    worker_state.requests.pop("task-1", None)


def test_report_success_returns_what_happened(running):
    task, request = running
    assert report(task, Ended("finished")) == "finished"
    assert report(task, Ended("duplicate")) == "duplicate"
    assert request.events == []


def test_report_failure_sends_task_failed_then_ignores(running):
    task, request = running
    with pytest.raises(Ignore):
        report(task, Ended("finished", "permission_denied"))
    assert request.events == [
        ("task-failed", {"exception": "ToolError('permission_denied')", "traceback": None})
    ]


def test_report_cancel_sends_task_revoked_then_ignores(running):
    task, request = running
    with pytest.raises(Ignore):
        report(task, Ended("cancelled", "cancelled"))
    assert request.events == [
        ("task-revoked", {"terminated": False, "signum": None, "expired": False})
    ]


def test_report_outside_a_worker_returns(running):
    """No worker request (the task called directly): nothing to send, nothing raised."""
    task = SimpleNamespace(request=SimpleNamespace(id="not-running"))
    assert report(task, Ended("finished", "permission_denied")) == "finished"
