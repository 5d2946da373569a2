"""The approval gate of an embedded session (``Session.embedded``, the memory store): a call a
rule asks about waits and runs once approved; of many approvers at once one wins; a denial,
an expiry and a caller that leaves answer typed; the operator's rules bound the tenant's;
the reminder says how many calls wait; answers to the MCP question decide it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from toolhub import ApprovalRefused, Session
from toolhub.approvals.rules import OperatorPermissions
from toolhub.core import CallResult

pytestmark = pytest.mark.timeout(60)


def config(seconds: int = 600, default: str = "allow") -> dict[str, Any]:
    return {
        "permissions": {
            "default": default,
            "approval_seconds": seconds,
            "rules": [{"tool": ["bash"], "command": ["echo *"], "decision": "ask"}],
        }
    }


def bash(command: str) -> dict[str, str]:
    return {"command": command, "description": "t"}


def session(tmp_path: Path, cfg: dict[str, Any], **kwargs: Any) -> Session:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return Session.embedded(cfg, workspace, state_dir=tmp_path / "state", **kwargs)


async def waiting(s: Session, call_id: str) -> None:
    for _ in range(400):
        if any(p["call_id"] == call_id for p in s.pending()):
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"{call_id} never waited")


def test_many_approvers_at_once_run_the_call_once(tmp_path: Path) -> None:
    s = session(tmp_path, config())

    async def body() -> tuple[CallResult, list[str]]:
        call = asyncio.create_task(s.call("bash", bash("echo x >> side.txt"), call_id="m1"))
        await waiting(s, "m1")
        outcomes: list[str] = []
        barrier = threading.Barrier(8)

        def approve(n: int) -> None:
            barrier.wait()
            try:
                s.approve("m1", principal=f"p{n}")
                outcomes.append("approved")
            except ApprovalRefused as refused:
                outcomes.append(refused.code)

        threads = [threading.Thread(target=approve, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        await asyncio.to_thread(lambda: [thread.join(30) for thread in threads])
        return await call, outcomes

    with s:
        result, outcomes = asyncio.run(body())
    assert result.error is None
    assert sorted(outcomes) == ["approved"] + ["not_awaiting_approval"] * 7
    assert (tmp_path / "ws" / "side.txt").read_text() == "x\n"


def test_expiry_and_a_caller_that_leaves_answer_typed(tmp_path: Path) -> None:
    s = session(tmp_path, config(seconds=1))

    async def body() -> None:
        expired = await s.call("bash", bash("echo late"), call_id="e1")
        assert expired.error is not None and expired.error.details["code"] == "approval_expired"
        record = s.record_sync("e1")
        assert record is not None and record["status"] == "expired"
        left = asyncio.create_task(s.call("bash", bash("echo gone"), call_id="e2"))
        await waiting(s, "e2")
        left.cancel()
        with pytest.raises(asyncio.CancelledError):
            await left
        with pytest.raises(ApprovalRefused) as refused:
            s.approve("e2")
        assert refused.value.extra["status"] == "cancelled"

    with s:
        asyncio.run(body())


def test_the_operators_rules_bound_the_tenants(tmp_path: Path) -> None:
    operator = OperatorPermissions.model_validate(
        {"rules": [{"tool": ["write_file"], "decision": "deny", "name": "no-writes"}]}
    )
    allow_all = {"permissions": {"rules": [{"decision": "allow"}]}}
    with session(tmp_path, allow_all, permissions=operator) as s:
        refused = s.call_sync("write_file", {"path": "a.txt", "content": "x"})
        assert refused.error is not None and refused.error.kind == "permission_denied"
        assert refused.error.details["rule"] == "operator rules[0] (no-writes)"
        assert not (tmp_path / "ws" / "a.txt").exists()
        (tmp_path / "ws" / "b.txt").write_text("b")
        assert s.call_sync("read_file", {"path": "b.txt"}).error is None  # no operator rule
        assert s.record_sync(refused.call_id or "")["status"] == "failed"


def test_the_reminder_and_the_question_answer(tmp_path: Path) -> None:
    s = session(tmp_path, config())

    async def body() -> None:
        first = asyncio.create_task(s.call("bash", bash("echo one"), call_id="q1"))
        await waiting(s, "q1")
        other = await s.call("bash", bash("true"))
        assert "1 call awaits approval" in other.prompt_text
        assert s.answer("q1", ["approve"], principal="mcp:stdio") is True
        assert (await first).error is None
        second = asyncio.create_task(s.call("bash", bash("echo two"), call_id="q2"))
        await waiting(s, "q2")
        assert s.answer("q2", {"Approve?": "no thanks"}, principal="mcp:stdio") is True
        denied = await second
        assert denied.error is not None and "no thanks" in denied.error.detail
        assert s.answer("q2", ["approve"]) is False  # decided: not a question any more
        record = s.record_sync("q1")
        assert record is not None and record["approval"]["decisions"][0]["by"] == "mcp:stdio"

    with s:
        asyncio.run(body())
