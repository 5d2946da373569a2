"""The done-when of durable approvals, on real parts: two ``toolhub serve`` gateway processes
on one Redis, real ``toolhub worker`` processes. A ``bash`` call matching an ``ask`` rule
waits; the gateway that took it and every worker are SIGKILLed while it waits; a second
replica lists it and approves it (two approvers at once: one wins, one is told who did); it
runs exactly once (the side-effect file has one line); its record shows who approved it.
A denial answers the caller a typed error; a hostile approval body is refused typed."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fixtures_stack import REPO, TOOLHUB, Stack, shared_stack
from tests.gateway.support import sse_events
from toolhub.ports import free_port
from toolhub.tenancy.keys import KeyFile

pytestmark = pytest.mark.timeout(240)

CONFIG = {
    "permissions": {
        "rules": [
            {"tool": ["bash"], "command": ["echo *"], "decision": "ask", "name": "echo-asks"},
        ]
    }
}


class Gateway:
    """One ``toolhub serve --redis`` process, started here; ``wait_up`` waits until it answers
    (so the replicas start side by side)."""

    def __init__(self, stack: Stack, root: Path, env: dict[str, str]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [TOOLHUB, "serve", "--port", str(self.port), "--workspace", str(root)]
        self.proc = subprocess.Popen(
            [*argv, "--redis", stack.url],
            env=env,
            cwd=REPO,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def wait_up(self) -> None:
        deadline = time.monotonic() + 90
        while True:
            assert self.proc.poll() is None, "gateway exited early"
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "gateway not up"
            time.sleep(0.1)

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


@pytest.fixture
def replicas(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Stack, Path, list[Gateway], dict[str, tuple[str, str]]]]:
    stack = shared_stack(request)
    root = tmp_path / "root"
    root.mkdir()
    keys = KeyFile(tmp_path / "keys.json")
    made: dict[str, tuple[str, str]] = {}
    for name in ("agent", "alice", "bob"):
        entry, secret = keys.create("acme", name)
        made[name] = (secret, str(entry.principal))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TOOLHUB_")},
        **{k: v for k, v in os.environ.items() if k.startswith("TOOLHUB_") and k in _STACK},
        "TOOLHUB_HOME": str(tmp_path / "home"),
        "TOOLHUB_KEYS_FILE": str(keys.path),
    }
    gateways = [Gateway(stack, root, env) for _ in range(2)]
    try:
        for gateway in gateways:
            gateway.wait_up()
        yield stack, root, gateways, made
    finally:
        for gateway in gateways:
            gateway.stop()
    stack.heal()


_STACK = {
    "TOOLHUB_LEASE_SECONDS",
    "TOOLHUB_MAX_ATTEMPTS",
    "TOOLHUB_SOFT_SHUTDOWN_SECONDS",
    "TOOLHUB_FOLLOW_OUTAGE_SECONDS",
    "TOOLHUB_ALLOW_ROOT",
}


def client(url: str, secret: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=60, headers={"Authorization": f"Bearer {secret}"})


def echo(command: str, call_id: str) -> dict[str, Any]:
    return {
        "name": "bash",
        "arguments": {"command": command, "description": "t"},
        "call_id": call_id,
    }


def awaiting(c: httpx.Client, call_id: str) -> None:
    """Start the call as an SSE stream and return once it says it awaits approval (the
    stream is left open: the gateway is about to die under it)."""
    started = threading.Event()

    def run() -> None:
        try:
            with c.stream(
                "POST",
                "/v1/sessions/s/calls",
                json=echo("echo once >> side.txt", call_id),
                headers={"Accept": "text/event-stream"},
            ) as stream:
                for line in stream.iter_lines():
                    if "awaiting_approval" in line:
                        started.set()
        except httpx.HTTPError:
            pass  # the gateway was killed

    threading.Thread(target=run, daemon=True).start()
    assert started.wait(60), "the call never said it awaits approval"


def test_an_approval_survives_the_gateway_and_every_worker_and_runs_once(
    replicas: tuple[Stack, Path, list[Gateway], dict[str, tuple[str, str]]],
) -> None:
    stack, root, (first, second), keys = replicas
    agent = client(first.url, keys["agent"][0])
    made = agent.post("/v1/sessions", json={"config": CONFIG, "session_id": "s"})
    assert made.status_code == 201, made.text
    awaiting(agent, "c1")
    workspace = root / "tenants" / "acme"

    first.kill()
    for worker in stack.workers:
        worker.signal(signal.SIGKILL)
    for worker in stack.workers:
        worker.wait(30)
    stack.heal()

    alice, bob = client(second.url, keys["alice"][0]), client(second.url, keys["bob"][0])
    listed = alice.get("/v1/sessions/s/approvals")
    assert listed.status_code == 200, listed.text
    (pending,) = listed.json()["approvals"]
    assert pending["call_id"] == "c1" and pending["rule"] == "config rules[0] (echo-asks)"
    assert pending["arguments"]["command"] == "echo once >> side.txt"
    assert not (workspace / "side.txt").exists()

    answers: dict[str, httpx.Response] = {}
    barrier = threading.Barrier(2)

    def approve(name: str, who: httpx.Client) -> None:
        barrier.wait()
        answers[name] = who.post("/v1/sessions/s/calls/c1/approval", json={"decision": "approve"})

    threads = [threading.Thread(target=approve, args=a) for a in (("alice", alice), ("bob", bob))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    codes = sorted(r.status_code for r in answers.values())
    assert codes == [200, 409], {k: r.text for k, r in answers.items()}
    winner = next(k for k, r in answers.items() if r.status_code == 200)
    loser = answers["bob" if winner == "alice" else "alice"].json()["detail"]
    assert loser["code"] == "not_awaiting_approval"
    assert loser["decided_by"] == keys[winner][1]

    events = sse_events(alice.get("/v1/sessions/s/calls/c1/events").text)
    assert events[-1]["data"]["error"] is None, events[-1]
    record = alice.get("/v1/sessions/s/calls/c1").json()
    assert record["status"] == "succeeded"
    decisions = record["approval"]["decisions"]
    assert [d["decision"] for d in decisions] == ["approved"]
    assert decisions[0]["by"] == keys[winner][1]
    assert (workspace / "side.txt").read_text() == "once\n"
    assert alice.get("/v1/sessions/s/approvals").json() == {"approvals": []}


def test_a_denial_reaches_the_caller_typed_and_hostile_bodies_are_refused(
    replicas: tuple[Stack, Path, list[Gateway], dict[str, tuple[str, str]]],
) -> None:
    _, root, (first, second), keys = replicas
    agent = client(first.url, keys["agent"][0])
    assert agent.post("/v1/sessions", json={"config": CONFIG, "session_id": "s"}).status_code == 201
    result: dict[str, Any] = {}

    def call() -> None:
        result.update(agent.post("/v1/sessions/s/calls", json=echo("echo x", "c2")).json())

    caller = threading.Thread(target=call)
    caller.start()
    alice = client(second.url, keys["alice"][0])
    for _ in range(600):
        if alice.get("/v1/sessions/s/approvals").json()["approvals"]:
            break
        time.sleep(0.05)
    for body, status in (
        ({"decision": "maybe"}, 422),
        ({"decision": "approve", "arguments": {"command": ["echo"], "description": "t"}}, 422),
        ({"decision": "deny", "reason": "x" * 5000}, 422),
        ({"decision": "approve", "unknown": 1}, 422),
    ):
        answer = alice.post("/v1/sessions/s/calls/c2/approval", json=body)
        assert answer.status_code == status, answer.text
        assert "Traceback" not in answer.text
    unknown = alice.post("/v1/sessions/s/calls/nope/approval", json={"decision": "deny"})
    assert unknown.status_code == 404, unknown.text
    denied = alice.post(
        "/v1/sessions/s/calls/c2/approval", json={"decision": "deny", "reason": "not now"}
    )
    assert denied.status_code == 200, denied.text
    caller.join(60)
    assert result["error"]["kind"] == "permission_denied", result
    assert result["error"]["details"]["code"] == "approval_denied"
    assert result["error"]["details"]["denied_by"] == keys["alice"][1]
    assert not (root / "tenants" / "acme" / "side.txt").exists()
