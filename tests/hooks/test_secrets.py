"""The shipped secrets hook: operator-marked environment values, credential shapes and private
key blocks masked in every string of an item, a key block masked whole even when a stream cuts
it across items."""

from __future__ import annotations

import pytest

from toolhub.hooks import AfterItem, CallInfo, SecretsRedaction
from toolhub.redaction import redact_secrets

CALL = CallInfo("c1", "s1", "default", "Main:bash", "bash")
KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAAAAAAAAAAAAAAAAAAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----"
)


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("ghp_" + "a1" * 18, "github_token"),
        ("github_pat_" + "A" * 30, "github_token"),
        ("sk-proj-" + "x" * 40, "api_key"),
        ("sk-ant-api03-" + "y" * 40, "api_key"),
        ("xoxb-1234567890-abcdef", "slack_token"),
        ("AKIAIOSFODNN7EXAMPLE", "aws_access_key"),
        (KEY, "private_key"),
    ],
)
def test_credential_shapes_are_masked(text: str, label: str) -> None:
    assert redact_secrets(f"before {text} after") == f"before [REDACTED:{label}] after"


def test_an_aws_secret_key_keeps_its_name() -> None:
    line = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert redact_secrets(line) == "aws_secret_access_key = [REDACTED:aws_secret_key]"


def test_ordinary_text_is_left_alone() -> None:
    text = "sk-short, ghp_, AKIA1, a task-1234 and a path /tmp/sk-file"
    assert redact_secrets(text) == text


def test_marked_environment_values_are_masked_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOOKS_UNIT_DB_PASSWORD", "correct-horse-battery")
    hook = SecretsRedaction(["HOOKS_UNIT_DB_*"])
    item = AfterItem(
        CALL, "result", "pw correct-horse-battery", {"nested": ["correct-horse-battery"]}
    )
    done = hook.after(item)
    assert done.text == "pw ${HOOKS_UNIT_DB_PASSWORD}"
    assert done.output == {"nested": ["${HOOKS_UNIT_DB_PASSWORD}"]}


def test_a_key_block_cut_across_items_is_masked_whole() -> None:
    hook = SecretsRedaction()
    state: dict[str, object] = {}
    lines = KEY.splitlines(keepends=True)
    pieces = ["ok\n" + lines[0], lines[1], lines[2], lines[3] + "\ndone\n"]
    shown = []
    for piece in pieces:
        item = AfterItem(CALL, "progress", None, {"delta": piece}, state=state)
        shown.append(hook.after(item).output["delta"])
    assert "".join(shown) == "ok\n[REDACTED:private_key]\ndone\n"


def test_the_tail_of_a_key_cut_by_output_truncation_is_masked() -> None:
    tail = (
        "[truncated]\nAAAAAAAAAAAAAAAAAAAAAAAA\nBBBBBBBBBBBBBBBBBBBBBBBB\n"
        "-----END RSA PRIVATE KEY-----\n"
    )
    item = AfterItem(CALL, "result", tail, None)
    assert SecretsRedaction().after(item).text == "[truncated]\n[REDACTED:private_key]\n"
