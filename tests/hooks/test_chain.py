"""A worker's ``after`` stage (``after_for_message``) resolves the policy's hooks once per policy
and names, not once per call, and resolves them again when the policy changes."""

from __future__ import annotations

import pytest

from toolhub.hooks import chain
from toolhub.hooks.chain import after_for_message
from toolhub.tenancy.policy import OperatorPolicy

MESSAGE = {"call_id": "c1", "session_id": "t1.s1", "tool": "Main:noop", "name": "noop"}


def test_a_policy_s_hooks_are_resolved_once_and_again_when_it_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first = OperatorPolicy.model_validate({"hooks": {"secret_env": ["FIRST_*"]}})
    second = OperatorPolicy.model_validate({"hooks": {"secret_env": ["SECOND_*"]}})
    monkeypatch.setattr(chain, "current_policy", lambda: first)
    one, two = after_for_message(MESSAGE), after_for_message({**MESSAGE, "call_id": "c2"})
    assert [h.name for h in one.hooks] == ["secrets"]
    assert one.hooks == two.hooks and one.hooks[0] is two.hooks[0]  # resolved once
    assert (one.info.call_id, two.info.call_id) == ("c1", "c2")  # each call its own stage
    monkeypatch.setattr(chain, "current_policy", lambda: second)
    changed = after_for_message(MESSAGE)
    assert changed.hooks[0] is not one.hooks[0]
    assert changed.hooks[0].after is not one.hooks[0].after  # the new policy's secrets
