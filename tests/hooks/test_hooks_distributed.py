"""Hooks on the real fleet: a redis-server, a ``toolhub worker`` process and a gateway, under
an operator policy with the sample entry-point hooks installed on both (``entry_points/`` on
their path) and a webhook served over real HTTP.

* a ``before`` hook at the gateway rewrites a ``bash`` command: the worker runs the rewritten
  one, and the model reads the hook's note (carried to the worker in the call's message);
* the ``after`` hooks on the worker (the operator's secrets redaction and a tenant-enabled
  rewrite) run before anything is written: a token and an operator-marked environment value
  printed by ``bash``, foreground and background, appear nowhere in Redis (every key's value),
  the SSE stream, its replay, ``task_output``, Flower's API or the logs of the worker and the
  gateway, while an unsecret marker printed the same way does (the scan sees outputs);
* a tenant-enabled webhook that does not answer in time refuses the call (fail closed) within
  bounded time, and nothing reaches a worker.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
import yaml

from tests.distributed.helpers import wait_until
from tests.fixtures_stack import REPO, STACK_ENV, Stack
from tests.gateway.support import sse_events
from tests.hooks.conftest import ENTRY_POINTS
from tests.hooks.webhook_server import HookService, hook_service
from tests.observability.flower_support import AUTH, flower  # noqa: F401 - a fixture
from toolhub import Session
from toolhub.gateway import GatewaySettings, ThreadedServer, create_app
from toolhub.gateway.distributed import distributed_parts
from toolhub.hooks import registry
from toolhub.toolset import ConfigSource

pytestmark = pytest.mark.timeout(240)

SECRET_ENV = "HOOKS_FLEET_SECRET"
SECRET_VALUE = "hunter2-fleet-value-9"
TOKEN = "ghp_" + "Q" * 36
#: Printed by the commands; built by the shell from parts so no argument holds it whole.
PRINT_SECRETS = "printf 'cat %s%s %s%s\\n' ghp_ " + "Q" * 36 + " hunter2- fleet-value-9"
MARKER = "plain-marker-" + "7" * 8
PRINT_MARKER = "printf '%s%s\\n' plain-marker- " + "7" * 8
CONFIG = {
    "tools": [{"id": "Main:bash"}, {"id": "Main:task_output"}, {"id": "Main:kill_task"}],
    "hooks": ["dogs"],
}


@pytest.fixture(scope="module")
def service() -> Iterator[HookService]:
    with hook_service() as running:
        yield running


@pytest.fixture(scope="module")
def live(service: HookService, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One worker with the hook policy and the sample hooks; this process (the gateway) the
    same."""
    home = tmp_path_factory.mktemp("hooks-fleet")
    policy = home / "policy.yaml"
    webhook = {"url": service.url("/slow"), "timeout_seconds": 1, "on_error": "fail_closed"}
    policy.write_text(
        yaml.safe_dump(
            {
                "hooks": {
                    "always": ["secrets", "rewrite"],
                    "tenant_hooks": ["dogs", "slow"],
                    "secret_env": ["HOOKS_FLEET_*"],
                    "webhooks": {"slow": webhook},
                },
                "quotas": {"default": {"concurrent_background_tasks": None}},
            }
        )
    )
    path = os.pathsep.join([str(REPO), str(ENTRY_POINTS)])
    env = {"TOOLHUB_POLICY": str(policy), SECRET_ENV: SECRET_VALUE, "PYTHONPATH": path}
    with pytest.MonkeyPatch.context() as patch:
        for key, value in {**STACK_ENV, **env}.items():
            patch.setenv(key, value)
        patch.syspath_prepend(str(ENTRY_POINTS))
        registry._installed.cache_clear()
        registry._entry_point_hook.cache_clear()
        stack = Stack(workers=1, env=env)
        stack.workers[0].loglevel = "INFO"
        try:
            yield stack.start()
        finally:
            stack.stop()
            registry._installed.cache_clear()
            registry._entry_point_hook.cache_clear()


@pytest.fixture(scope="module")
def gateway(live: Stack, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    root = tmp_path_factory.mktemp("hooks-root")

    def factory(config: ConfigSource, workspace: Path, session_id: str) -> Session:
        return Session.connect(live.url, config, workspace, session_id=session_id)

    settings = GatewaySettings(workspace=root, redis_url=live.url, keepalive_s=0.5)
    server = ThreadedServer(create_app(settings, factory=factory, **distributed_parts(live.url)))
    server.start()
    try:
        yield server.url, root
    finally:
        server.stop()


def client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, timeout=60)


def bash(command: str, **more: Any) -> dict[str, Any]:
    return {"name": "bash", "arguments": {"command": command, "description": "test", **more}}


def everything_in_redis(url: str) -> bytes:
    """Every value of every key, as bytes (msgpack keeps strings as their UTF-8)."""
    r = redis.Redis.from_url(url)
    out = []
    for key in r.scan_iter(count=1000):
        kind = r.type(key)
        if kind == b"string":
            out.append(r.get(key) or b"")
        elif kind == b"hash":
            out.extend(b"%s=%s" % kv for kv in r.hgetall(key).items())
        elif kind == b"list":
            out.extend(r.lrange(key, 0, -1))
        elif kind == b"set":
            out.extend(r.smembers(key))
        elif kind == b"zset":
            out.extend(r.zrange(key, 0, -1))
        elif kind == b"stream":
            for _, fields in r.xrange(key):
                out.extend(b"%s=%s" % kv for kv in fields.items())
    r.close()
    return b"\n".join(out)


def test_a_before_hook_rewrites_the_command_a_worker_runs(gateway: tuple[str, Path]) -> None:
    url, root = gateway
    with client(url) as c:
        assert (
            c.post("/v1/sessions", json={"config": CONFIG, "session_id": "rw"}).status_code == 201
        )
        answer = c.post("/v1/sessions/rw/calls", json=bash("echo REWRITE_ME > out.txt")).json()
    assert answer["error"] is None, answer
    assert (root / "out.txt").read_text() == "rewritten\n"
    assert answer["prompt_text"].endswith("note: the command was rewritten by policy")


def test_nothing_unredacted_reaches_redis_the_stream_flower_or_the_logs(
    live: Stack,
    gateway: tuple[str, Path],
    flower: str,  # noqa: F811 - the fixture
    caplog: pytest.LogCaptureFixture,
) -> None:
    url, _ = gateway
    secrets = (TOKEN, SECRET_VALUE)
    caplog.set_level(logging.DEBUG)
    with client(url) as c:
        assert (
            c.post("/v1/sessions", json={"config": CONFIG, "session_id": "rd"}).status_code == 201
        )
        stream = c.post(
            "/v1/sessions/rd/calls",
            json={**bash(f"{PRINT_SECRETS}; {PRINT_MARKER}"), "call_id": "fg"},
            headers={"Accept": "text/event-stream"},
        ).text
        events = sse_events(stream)
        result = events[-1]["data"]
        assert result["error"] is None, result
        shown = f"dog [REDACTED:github_token] ${{{SECRET_ENV}}}\n{MARKER}\n"
        assert result["output"]["value"]["output"] == shown
        replay = c.get("/v1/sessions/rd/calls/fg/events").text
        record = c.get("/v1/sessions/rd/calls/fg").text

        started = c.post(
            "/v1/sessions/rd/calls",
            json=bash(f"sleep 0.2; {PRINT_SECRETS}; {PRINT_MARKER}", is_background=True),
        ).json()
        task_id = started["output"]["value"]["task_id"]
        read = {"name": "task_output", "arguments": {"task_ids": [task_id], "timeout_ms": 20000}}
        output = c.post("/v1/sessions/rd/calls", json=read).json()
        assert MARKER in output["prompt_text"], output
        assert "dog [REDACTED:github_token]" in output["prompt_text"], output

    def flower_saw_both() -> bool:
        tasks = httpx.get(f"{flower}/api/tasks", auth=AUTH, timeout=10).text
        return "'fg'" in tasks and task_id in tasks

    wait_until(flower_saw_both, 30, 0.2)
    flower_text = httpx.get(f"{flower}/api/tasks", auth=AUTH, timeout=10).text
    worker_log = live.workers[0].log_path.read_text(errors="replace")
    everything = everything_in_redis(live.url)
    assert MARKER.encode() in everything, "the scan reads the outputs"
    assert MARKER in stream and MARKER in replay and MARKER in record
    for secret in secrets:
        assert secret.encode() not in everything
        for where, text in (
            ("the SSE stream", stream),
            ("its replay", replay),
            ("the record", record),
            ("task_output", output["prompt_text"]),
            ("Flower", flower_text),
            ("the worker's log", worker_log),
            ("the gateway's log", caplog.text),
        ):
            assert secret not in text, where


def test_a_webhook_that_does_not_answer_in_time_refuses_the_call(
    live: Stack, gateway: tuple[str, Path], service: HookService
) -> None:
    url, root = gateway
    config = {**CONFIG, "hooks": [service.url("/slow")]}
    with client(url) as c:
        made = c.post("/v1/sessions", json={"config": config, "session_id": "wh"})
        assert made.status_code == 201, made.text
        started = time.monotonic()
        call = {**bash("touch webhook-ran.txt"), "call_id": "wh1"}
        answer = c.post("/v1/sessions/wh/calls", json=call).json()
        assert time.monotonic() - started < 30
        # A URL the operator did not list: refused when the session is made.
        hostile = {**CONFIG, "hooks": ["https://collector.example/"]}
        refused = c.post("/v1/sessions", json={"config": hostile, "session_id": "wh2"})
    assert answer["error"]["details"]["code"] == "hook_failed", answer
    assert answer["error"]["details"]["hook"] == "slow"
    assert "no answer within 1 s" in answer["error"]["detail"]
    assert "Traceback" not in answer["prompt_text"]
    assert not (root / "webhook-ran.txt").exists()
    assert not any(b"wh1" in key for key in redis.Redis.from_url(live.url).scan_iter()), "queued"
    assert refused.status_code == 422, refused.text
    assert "hooks[0]" in refused.text
