"""Hooks around each call of an embedded session: the operator's entry-point hooks and the
shipped secrets redaction, through real ``bash`` commands in this process.

``before`` hooks rewrite (the command runs rewritten, the model reads the note), deny
(``permission_denied`` naming the hook) or fail (a raising or hanging hook: ``hook_failed``
within its timeout, or skipped when it fails open); ``after`` hooks rewrite and redact the
stream, the result and the call's record alike.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from toolhub import CallResult, Progress, Session
from toolhub.core import ConfigError

pytestmark = pytest.mark.usefixtures("sample_hooks")

BASH = {"tools": [{"id": "Main:bash", "params": {"enabled_background": False}}]}
TOKEN = "ghp_" + "Z" * 36


def session(tmp_path: Path, config: dict[str, Any] | None = None) -> Session:
    return Session.embedded(config or BASH, tmp_path, state_dir=tmp_path / ".state")


def bash(command: str) -> dict[str, str]:
    return {"command": command, "description": "test"}


async def streamed(s: Session, command: str) -> tuple[list[Progress], CallResult]:
    items = [item async for item in s.stream("bash", bash(command))]
    result = items[-1]
    assert isinstance(result, CallResult)
    return [i for i in items if isinstance(i, Progress)], result


def test_a_before_hook_rewrites_the_command_that_runs_and_notes_it(
    tmp_path: Path, operator_policy: Callable[[dict[str, Any]], Path]
) -> None:
    operator_policy({"hooks": {"always": ["secrets", "rewrite"]}})
    with session(tmp_path) as s:
        result = s.call_sync("bash", bash("echo REWRITE_ME > out.txt"))
        assert result.error is None, result.prompt_text
        assert (tmp_path / "out.txt").read_text() == "rewritten\n"
        assert result.prompt_text.endswith("note: the command was rewritten by policy")
        record = s.record_sync(result.call_id or "")
        assert record is not None and record["result"]["prompt_text"] == result.prompt_text


def test_a_before_hook_denies_with_a_typed_error_naming_it(
    tmp_path: Path, operator_policy: Callable[[dict[str, Any]], Path]
) -> None:
    operator_policy({"hooks": {"always": ["deny_rm"]}})
    (tmp_path / "keep.txt").write_text("kept")
    with session(tmp_path) as s:
        result = s.call_sync("bash", bash("rm -rf keep.txt"))
        assert result.error is not None and result.error.kind == "permission_denied"
        assert result.error.details == {"hook": "deny_rm"}
        assert "Denied by hook `deny_rm`: removing files is not allowed" in result.prompt_text
        assert (tmp_path / "keep.txt").read_text() == "kept"
        # Recorded like any refused call.
        assert s.record_sync(result.call_id or "") is not None


def test_rewritten_arguments_are_validated_again(
    tmp_path: Path, operator_policy: Callable[[dict[str, Any]], Path]
) -> None:
    operator_policy({"hooks": {"always": ["bad_rewrite"]}})
    with session(tmp_path) as s:
        result = s.call_sync("bash", bash("touch ran.txt"))
    assert result.error is not None and result.error.kind == "invalid_arguments"
    assert "Hook `bad_rewrite` rewrote the arguments into ones the tool refuses" in (
        result.error.detail
    )
    assert not (tmp_path / "ran.txt").exists()


def test_a_hanging_before_hook_fails_closed_within_its_timeout_or_is_skipped_when_open(
    tmp_path: Path, operator_policy: Callable[[dict[str, Any]], Path]
) -> None:
    hangs = {"timeout_seconds": 0.5, "on_error": "fail_closed"}
    operator_policy({"hooks": {"always": ["hangs"], "settings": {"hangs": hangs}}})
    with session(tmp_path) as s:
        started = time.monotonic()
        result = asyncio.run(s.call("bash", bash("touch ran.txt")))
        assert time.monotonic() - started < 10
    assert result.error is not None and result.error.details is not None
    assert result.error.details["code"] == "hook_failed"
    assert result.error.details["hook"] == "hangs"
    assert "no answer within 0.5 s" in result.error.detail
    assert "Traceback" not in result.prompt_text
    assert not (tmp_path / "ran.txt").exists()

    operator_policy(
        {"hooks": {"always": ["hangs"], "settings": {"hangs": {**hangs, "on_error": "fail_open"}}}}
    )
    with session(tmp_path) as s:
        result = s.call_sync("bash", bash("touch ran.txt"))
    assert result.error is None, result.prompt_text
    assert (tmp_path / "ran.txt").exists()


@pytest.mark.parametrize(("hook", "why"), [("raises", "RuntimeError"), ("garbles", "content")])
def test_an_after_hook_that_raises_or_answers_nonsense_withholds_the_output(
    hook: str, why: str, tmp_path: Path, operator_policy: Callable[[dict[str, Any]], Path]
) -> None:
    operator_policy({"hooks": {"always": ["secrets", hook]}})
    with session(tmp_path) as s:
        progress, result = asyncio.run(streamed(s, "echo private-output"))
    assert progress == []
    assert result.error is not None and result.error.details is not None
    assert result.error.details["code"] == "hook_failed"
    assert result.error.details["hook"] == hook
    assert why in result.error.detail and "Traceback" not in result.prompt_text
    assert "private-output" not in result.prompt_text


def test_after_hooks_rewrite_and_redact_the_stream_the_result_and_the_record(
    tmp_path: Path,
    operator_policy: Callable[[dict[str, Any]], Path],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HOOKS_EMBEDDED_SECRET", "hunter2-embedded-value")
    operator_policy({"hooks": {"always": ["secrets", "dogs"], "secret_env": ["HOOKS_EMBEDDED_*"]}})
    # The token is printed in two writes with a pause: two output deltas, joined into a line.
    command = (
        "printf 'cat %s' ghp_ZZZZZZZZZZ; sleep 0.3; "
        f"printf '{'Z' * 26} %s%s\\n' hunter2- embedded-value"
    )
    with session(tmp_path) as s:
        progress, result = asyncio.run(streamed(s, command))
        record = s.record_sync(result.call_id or "")
    streamed_text = "".join(p.payload["delta"] for p in progress)
    expected = "dog [REDACTED:github_token] ${HOOKS_EMBEDDED_SECRET}\n"
    assert expected in streamed_text
    assert result.output is not None and result.output.value["output"] == expected
    assert expected in result.prompt_text
    for text in (streamed_text, result.prompt_text, repr(record)):
        assert TOKEN not in text and "hunter2-embedded-value" not in text and "cat " not in text


def test_the_secrets_hook_is_on_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TOOLHUB_POLICY", raising=False)
    with session(tmp_path) as s:
        result = s.call_sync("bash", bash(f"printf 'k=%s' {TOKEN[:10]}{TOKEN[10:]}"))
    assert result.prompt_text.endswith("k=[REDACTED:github_token]"), result.prompt_text


def test_a_config_naming_a_hook_nothing_answers_to_is_a_config_error(
    tmp_path: Path, operator_policy: Callable[[dict[str, Any]], Path]
) -> None:
    operator_policy({})
    with pytest.raises(ConfigError) as raised:
        session(tmp_path, {**BASH, "hooks": ["no-such-hook"]})
    assert raised.value.violations[0].category == "hooks"
