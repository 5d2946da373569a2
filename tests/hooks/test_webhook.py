"""Webhook hooks over real HTTP: the operator lists the URL, toolhub POSTs JSON with the
operator's headers, and honours the answer; a webhook that is slow past its timeout or answers
an error refuses the call (fail closed) or is skipped (fail open), in bounded time."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.hooks.webhook_server import HookService, hook_service
from toolhub import Session

BASH = {"tools": [{"id": "Main:bash", "params": {"enabled_background": False}}]}


def bash(command: str) -> dict[str, str]:
    return {"command": command, "description": "test"}


def webhook_policy(service: HookService, path: str, **grant: Any) -> dict[str, Any]:
    hook = {"url": service.url(path), "headers": {"Authorization": "Bearer operator"}, **grant}
    return {"hooks": {"always": ["secrets", "remote"], "webhooks": {"remote": hook}}}


def test_a_before_webhook_rewrites_the_command_and_gets_the_call_as_json(
    tmp_path: Path, operator_policy: Callable[[dict[str, Any]], Path]
) -> None:
    with hook_service() as service:
        operator_policy(webhook_policy(service, "/rewrite"))
        with Session.embedded(BASH, tmp_path, state_dir=tmp_path / ".state") as s:
            result = asyncio.run(s.call("bash", bash("echo REWRITE_ME > out.txt")))
        assert result.error is None, result.prompt_text
        assert (tmp_path / "out.txt").read_text() == "by-webhook\n"
        assert result.prompt_text.endswith("rewritten remotely")
        ((path, headers, payload),) = service.received
    assert path == "/rewrite" and headers["Authorization"] == "Bearer operator"
    assert payload["stage"] == "before" and payload["hook"] == "remote"
    assert payload["call"]["tool"] == "Main:bash" and payload["call"]["tenant"] == "default"
    assert payload["arguments"]["command"] == "echo REWRITE_ME > out.txt"


def test_a_before_webhook_denies(
    tmp_path: Path, operator_policy: Callable[[dict[str, Any]], Path]
) -> None:
    with hook_service() as service:
        operator_policy(webhook_policy(service, "/deny"))
        with Session.embedded(BASH, tmp_path, state_dir=tmp_path / ".state") as s:
            result = s.call_sync("bash", bash("touch ran.txt"))
    assert result.error is not None and result.error.kind == "permission_denied"
    assert "Denied by hook `remote`: the webhook said no" in result.prompt_text
    assert not (tmp_path / "ran.txt").exists()


def test_a_slow_or_broken_webhook_fails_closed_in_bounded_time_or_open_when_set(
    tmp_path: Path, operator_policy: Callable[[dict[str, Any]], Path]
) -> None:
    with hook_service() as service:
        for path, why in (("/slow", "no answer within 0.5 s"), ("/broken", "HTTP 500")):
            operator_policy(webhook_policy(service, path, timeout_seconds=0.5))
            with Session.embedded(BASH, tmp_path, state_dir=tmp_path / ".state") as s:
                started = time.monotonic()
                result = asyncio.run(s.call("bash", bash("touch ran.txt")))
                assert time.monotonic() - started < 10
            assert result.error is not None and result.error.details is not None, path
            assert result.error.details["code"] == "hook_failed", path
            assert why in result.error.detail, result.error.detail
            assert not (tmp_path / "ran.txt").exists()

        operator_policy(webhook_policy(service, "/slow", timeout_seconds=0.5, on_error="fail_open"))
        with Session.embedded(BASH, tmp_path, state_dir=tmp_path / ".state") as s:
            result = s.call_sync("bash", bash("touch ran.txt"))
    assert result.error is None, result.prompt_text
    assert (tmp_path / "ran.txt").exists()


def test_an_after_webhook_rewrites_the_stream_and_the_result(
    tmp_path: Path, operator_policy: Callable[[dict[str, Any]], Path]
) -> None:
    with hook_service() as service:
        operator_policy(webhook_policy(service, "/redact", stages=["after"]))
        with Session.embedded(BASH, tmp_path, state_dir=tmp_path / ".state") as s:

            async def run() -> list[Any]:
                return [i async for i in s.stream("bash", bash("echo the classified plan"))]

            items = asyncio.run(run())
        kinds = {payload["kind"] for _, _, payload in service.received}
    assert kinds == {"progress", "result"}
    assert "classified" not in repr(items)
    assert items[-1].output.value["output"] == "the [gone] plan\n"
