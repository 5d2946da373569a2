"""The secrets hook's no-hit path (one JSON write of the item, one scan of it) must never let a
secret through: whatever ``redact_secrets`` would change, string by string, is still masked
when it sits deep in a structure, when JSON writes it differently (quotes, backslashes,
newlines), when its value is full of regex metacharacters, and when JSON cannot write it."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from pydantic_core import to_json

from toolhub.hooks import AfterItem, CallInfo, SecretsRedaction
from toolhub.redaction import may_change, redact_secrets, remember

CALL = CallInfo("c1", "s1", "default", "Main:bash", "bash")
#: Regex metacharacters, and characters JSON writes escaped (quote, backslash, newline, tab).
ODD_VALUE = 'pa$$.w0rd*(x)[y]{2}^|+?"q\\z\n\tend'
remember("HOOKS_FAST_ODD", ODD_VALUE)
PLAIN_VALUE = "fast-path-secret-93c1"
remember("HOOKS_FAST_PLAIN", PLAIN_VALUE)

SECRETS = [
    (ODD_VALUE, "${HOOKS_FAST_ODD}"),
    (PLAIN_VALUE, "${HOOKS_FAST_PLAIN}"),
    ("ghp_" + "a1" * 18, "[REDACTED:github_token]"),
    ("github_pat_" + "A" * 30, "[REDACTED:github_token]"),
    ("sk-proj-" + "x" * 40, "[REDACTED:api_key]"),
    ("xoxb-1234567890-abcdef", "[REDACTED:slack_token]"),
    ("AKIAIOSFODNN7EXAMPLE", "[REDACTED:aws_access_key]"),
    (
        "AWS_Secret_Access_Key: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "AWS_Secret_Access_Key: [REDACTED:aws_secret_key]",
    ),
    ("https://x.test/a?api_key=abc123&b=1", "https://x.test/a?api_key=***&b=1"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----",
        "[REDACTED:private_key]",
    ),
]


def nested(text: str) -> dict[str, Any]:
    """``text`` deep in a structure, after a newline and a quote (written escaped in JSON)."""
    return {"a": [1, None, {"b": ("x", [f'line\n"{text}" done'])}], "n": 2.5}


def masked(shown: str) -> dict[str, Any]:
    """``nested`` as the hook gives it back, ``shown`` in place of the secret."""
    return {"a": [1, None, {"b": ["x", [f'line\n"{shown}" done']]}], "n": 2.5}


@pytest.mark.parametrize(("secret", "shown"), SECRETS)
def test_a_secret_deep_in_the_output_is_masked(secret: str, shown: str) -> None:
    done = SecretsRedaction().after(AfterItem(CALL, "result", "ok", nested(secret)))
    assert done is not None
    assert done.output == masked(shown)


@pytest.mark.parametrize(("secret", "shown"), SECRETS)
def test_a_secret_in_an_error_or_a_content_block_is_masked(secret: str, shown: str) -> None:
    error = {"kind": "execution", "detail": "failed", "details": nested(secret)}
    blocks = [{"type": "text", "text": "fine"}, {"type": "text", "text": f"\t{secret}\n"}]
    done = SecretsRedaction().after(AfterItem(CALL, "result", None, None, error, blocks))
    assert done is not None and done.error is not None
    assert done.error["details"] == masked(shown)
    assert done.content[1] == {"type": "text", "text": f"\t{shown}\n"}


class Shade(enum.StrEnum):
    SECRET = PLAIN_VALUE


def test_a_secret_in_a_str_subclass_is_masked() -> None:
    done = SecretsRedaction().after(AfterItem(CALL, "result", None, {"v": [Shade.SECRET]}))
    assert done is not None
    assert done.output == {"v": ["${HOOKS_FAST_PLAIN}"]}


def test_what_json_cannot_write_is_walked() -> None:
    text = f"\udcff {PLAIN_VALUE}"  # a lone surrogate: the JSON write fails
    done = SecretsRedaction().after(AfterItem(CALL, "result", text, {"x": object()}))
    assert done is not None
    assert done.text == "\udcff ${HOOKS_FAST_PLAIN}"


def test_an_item_with_nothing_to_mask_is_handed_on_as_it_came() -> None:
    output = {"rows": [{"path": "/tmp/sk-file", "note": "thought, high and right"}]}
    blocks = [{"type": "text", "text": "a=1 and b=2?"}]
    item = AfterItem(CALL, "result", "ghp_ short, AKIA1", output, content=blocks)
    done = SecretsRedaction().after(item)
    assert done is item and done.output is output and done.content is blocks


@pytest.mark.parametrize(
    "text",
    [*(s for s, _ in SECRETS), *(f'x"\\\n{s}\u212a' for s, _ in SECRETS), "plain", "é ü ✓"],
)
def test_may_change_never_misses_what_redaction_changes(text: str) -> None:
    for written in (text, to_json([text]).decode(), to_json({"k": [text]}).decode()):
        if redact_secrets(text) != text:
            assert may_change(written), written
