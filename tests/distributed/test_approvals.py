"""Durable approvals on real workers through the Python face (``Session.pending``,
``approve``, ``deny``): a call a rule asks about is recorded in Redis and queued only once
approved, from another dispatcher too; a denial and an expiry answer typed errors; of two
approvers at once exactly one queues the call; edited arguments are validated and checked
against the rules again. The gateway's face, with its replicas killed: tests/gateway/
test_gateway_approvals.py."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures_stack import Stack
from toolhub import Session
from toolhub.approvals.base import ApprovalRefused
from toolhub.distributed.store import RedisStore
from toolhub.tools import CATALOG
from toolhub.toolset import ToolSetBuilder

pytestmark = pytest.mark.timeout(120)

SessionMaker = Callable[..., Session]


@pytest.fixture
def connect(live: Stack) -> Iterator[SessionMaker]:
    """Dispatcher sessions with the built-in tools (``bash``) on the shared stack."""
    builder = ToolSetBuilder(CATALOG, plugins=False)
    opened: list[Session] = []

    def make(cfg: dict[str, Any], *, workspace: Path, **kwargs: Any) -> Session:
        workspace.mkdir(parents=True, exist_ok=True)
        session = Session.connect(live.url, cfg, workspace, builder=builder, **kwargs)
        opened.append(session)
        return session

    yield make
    for session in opened:
        session.close()


def config(seconds: int = 600) -> dict[str, Any]:
    return {
        "permissions": {
            "approval_seconds": seconds,
            "rules": [
                {"tool": ["bash"], "command": ["rm *"], "decision": "deny", "name": "no-rm"},
                {"tool": ["bash"], "command": ["echo *"], "decision": "ask", "name": "echo"},
            ],
        },
    }


def bash(command: str) -> dict[str, str]:
    return {"command": command, "description": "t"}


def start(session: Session, command: str, call_id: str) -> list[Any]:
    """The call, run on a thread of its own; its items land in the list returned."""
    items: list[Any] = []

    def run() -> None:
        items.extend(session.stream_sync("bash", bash(command), call_id=call_id))

    threading.Thread(target=run, daemon=True).start()
    return items


def wait_pending(session: Session, call_id: str) -> dict[str, Any]:
    for _ in range(600):
        found = [p for p in session.pending() if p["call_id"] == call_id]
        if found:
            return found[0]
        asyncio.run(asyncio.sleep(0.05))
    raise AssertionError(f"{call_id} never awaited approval")


def test_an_approved_call_runs_once_queued_by_another_dispatcher(
    connect: SessionMaker, store: RedisStore, tmp_path: Path
) -> None:
    first = connect(config(), workspace=tmp_path / "ws")
    items = start(first, "echo once >> side.txt", "ap-1")
    pending = wait_pending(first, "ap-1")
    assert pending["rule"] == "config rules[1] (echo)"
    assert store.get_record("ap-1")["status"] == "awaiting_approval"
    assert not (tmp_path / "ws" / "side.txt").exists(), "nothing queued before the approval"

    other = connect(config(), workspace=tmp_path / "ws", session_id=first.session_id)
    record = other.approve("ap-1", principal="acme/alice")
    assert record["status"] in {"queued", "running", "succeeded"}
    with pytest.raises(ApprovalRefused) as again:
        other.approve("ap-1", principal="acme/bob")
    assert again.value.code == "not_awaiting_approval" and again.value.http_status == 409
    assert again.value.extra["decided_by"] == "acme/alice"

    final = _result(items)
    assert final.error is None, final
    assert (tmp_path / "ws" / "side.txt").read_text() == "once\n"
    done = first.record_sync("ap-1")
    assert done is not None and done["status"] == "succeeded"
    decision = done["approval"]["decisions"][-1]
    assert decision["decision"] == "approved" and decision["by"] == "acme/alice"
    assert items[0].subkind == "awaiting_approval"


def test_two_approvers_at_once_run_the_call_once(connect: SessionMaker, tmp_path: Path) -> None:
    session = connect(config(), workspace=tmp_path / "ws")
    items = start(session, "echo one >> side.txt", "ap-2")
    wait_pending(session, "ap-2")
    approvers = [
        connect(config(), workspace=tmp_path / "ws", session_id=session.session_id)
        for _ in range(4)
    ]
    outcomes: list[str] = []
    barrier = threading.Barrier(len(approvers))

    def approve(who: Session, n: int) -> None:
        barrier.wait()
        try:
            who.approve("ap-2", principal=f"approver-{n}")
            outcomes.append("approved")
        except ApprovalRefused as refused:
            outcomes.append(refused.code)

    threads = [threading.Thread(target=approve, args=(who, n)) for n, who in enumerate(approvers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["approved"] + ["not_awaiting_approval"] * 3, outcomes
    assert _result(items).error is None
    assert (tmp_path / "ws" / "side.txt").read_text() == "one\n"


def test_a_denial_and_an_expiry_answer_typed_errors(connect: SessionMaker, tmp_path: Path) -> None:
    session = connect(config(), workspace=tmp_path / "ws")
    items = start(session, "echo no >> side.txt", "ap-3")
    wait_pending(session, "ap-3")
    session.deny("ap-3", "not today", principal="acme/carol")
    denied = _result(items)
    assert denied.error is not None and denied.error.kind == "permission_denied"
    assert denied.error.details["code"] == "approval_denied"
    assert denied.error.details["denied_by"] == "acme/carol"
    assert "not today" in denied.error.detail

    brief = connect(config(seconds=1), workspace=tmp_path / "ws")
    items = start(brief, "echo late >> side.txt", "ap-4")
    expired = _result(items, wait_s=60)
    assert expired.error is not None and expired.error.details["code"] == "approval_expired"
    with pytest.raises(ApprovalRefused) as late:
        brief.approve("ap-4")
    assert late.value.code == "not_awaiting_approval"
    record = brief.record_sync("ap-4")
    assert record is not None and record["approval"]["decisions"][-1]["decision"] == "expired"
    assert not (tmp_path / "ws" / "side.txt").exists()

    refused = session.call_sync("bash", bash("rm -rf side.txt"))
    assert refused.error is not None and refused.error.kind == "permission_denied"
    assert refused.error.details == {"code": "rule_denied", "rule": "config rules[0] (no-rm)"}


def test_edited_arguments_are_validated_and_checked_again(
    connect: SessionMaker, tmp_path: Path
) -> None:
    session = connect(config(), workspace=tmp_path / "ws")
    items = start(session, "echo asked >> side.txt", "ap-5")
    wait_pending(session, "ap-5")
    for bad, code in (
        ({"command": 5, "description": "t"}, "invalid_arguments"),
        ({"command": "echo x", "description": "t", "extra": 1}, "invalid_arguments"),
        (bash("rm -rf /"), "permission_denied"),
    ):
        with pytest.raises(ApprovalRefused) as refused:
            session.approve("ap-5", arguments=bad, principal="acme/dave")
        assert refused.value.code == code, refused.value.to_dict()
    assert [p["call_id"] for p in session.pending()] == ["ap-5"], "still waiting"
    session.approve("ap-5", arguments=bash("echo edited >> side.txt"), principal="acme/dave")
    assert _result(items).error is None
    assert (tmp_path / "ws" / "side.txt").read_text() == "edited\n"
    record = session.record_sync("ap-5")
    assert record is not None
    assert record["approval"]["arguments"]["command"] == "echo asked >> side.txt"
    assert record["approval"]["decisions"][-1]["arguments"]["command"].startswith("echo edited")


def _result(items: list[Any], wait_s: float = 60) -> Any:
    from toolhub.core import CallResult

    for _ in range(int(wait_s * 20)):
        if items and isinstance(items[-1], CallResult):
            return items[-1]
        asyncio.run(asyncio.sleep(0.05))
    raise AssertionError(f"no result: {items}")


def test_an_approval_nobody_waits_for_expires_through_the_workers_sweep(
    connect: SessionMaker, store: RedisStore, tmp_path: Path
) -> None:
    """The caller died (only its record is left): a worker's sweep ends the approval at its
    expiry, typed, and a follower by id gets that answer."""
    from toolhub.approvals.base import new_approval

    session = connect(config(), workspace=tmp_path / "ws")
    approval = new_approval("config rules[1] (echo)", bash("echo orphan"), 1)
    fields = {"session_id": session.session_id, "tool": "Main:bash", "name": "bash"}
    store.approvals.ask("ap-6", session.session_id, fields, approval)
    assert [p["call_id"] for p in session.pending()] == ["ap-6"]
    final = list(session.follow_sync("ap-6", timeout=60))[-1]
    assert final.error is not None and final.error.details["code"] == "approval_expired"
    record = store.get_record("ap-6")
    assert record is not None and record["status"] == "failed"
    assert record["approval"]["decisions"][-1]["decision"] == "expired"
    assert store.approvals.due() == []
