"""The grammar of permission rules: what a config may say, and every hostile rule (a bad
glob, a huge list, an empty pattern, an unknown field) refused when the config is loaded, as
a typed ``ConfigError`` naming the field, never at call time."""

from __future__ import annotations

from typing import Any

import pytest

from toolhub.approvals.globs import CommandPattern, PatternError, compile_glob, parse_command
from toolhub.approvals.rules import MAX_PATTERNS, MAX_RULES, Decision
from toolhub.core import ConfigError
from toolhub.toolset import ToolSetConfig


def load(permissions: Any) -> ToolSetConfig:
    return ToolSetConfig.load({"permissions": permissions})


def test_a_config_with_every_kind_of_rule_loads() -> None:
    cfg = load(
        {
            "default": "review",
            "approval_seconds": 120,
            "rules": [
                {"tool": ["bash"], "command": ["git push *"], "decision": "ask", "name": "push"},
                {"kind": ["write", "edit"], "path": ["src/**"], "decision": "allow"},
                {"read_only": True, "decision": "allow"},
                {"tool": ["web_fetch"], "host": ["*.example.com"], "decision": "deny"},
            ],
        }
    )
    assert cfg.permissions is not None
    assert [r.decision for r in cfg.permissions.rules] == [
        Decision.ASK,
        Decision.ALLOW,
        Decision.ALLOW,
        Decision.DENY,
    ]


@pytest.mark.parametrize(
    ("permissions", "field"),
    [
        ({"rules": [{"path": ["[abc"], "decision": "deny"}]}, "permissions.rules[0].path"),
        ({"rules": [{"tool": [""], "decision": "deny"}]}, "permissions.rules[0].tool"),
        ({"rules": [{"host": ["a\x00b"], "decision": "deny"}]}, "permissions.rules[0].host"),
        (
            {"rules": [{"command": ["'unclosed"], "decision": "ask"}]},
            "permissions.rules[0].command",
        ),
        ({"rules": [{"command": ["x" * 600], "decision": "ask"}]}, "permissions.rules[0].command"),
        ({"rules": [{"tool": [], "decision": "ask"}]}, "permissions.rules[0].tool"),
        (
            {"rules": [{"tool": ["t"] * (MAX_PATTERNS + 1), "decision": "ask"}]},
            "permissions.rules[0].tool",
        ),
        ({"rules": [{"decision": "allow"}] * (MAX_RULES + 1)}, "permissions.rules"),
        ({"rules": [{"decision": "sometimes"}]}, "permissions.rules[0].decision"),
        ({"rules": [{"decision": "ask", "when": "always"}]}, "permissions.rules[0].when"),
        ({"rules": [{"kind": ["teleport"], "decision": "ask"}]}, "permissions.rules[0].kind[0]"),
        ({"approval_seconds": 0}, "permissions.approval_seconds"),
        ({"approval_seconds": 10**9}, "permissions.approval_seconds"),
        ({"default": "maybe"}, "permissions.default"),
    ],
)
def test_a_hostile_rule_is_a_typed_config_error_naming_its_field(
    permissions: Any, field: str
) -> None:
    with pytest.raises(ConfigError) as refused:
        load(permissions)
    assert any(v.field_path == field for v in refused.value.violations), [
        v.field_path for v in refused.value.violations
    ]


def test_globs_cross_slashes_only_with_two_stars() -> None:
    assert compile_glob("src/**", path=True).fullmatch("src/a/b.py")
    assert compile_glob("**/.env", path=True).fullmatch(".env")
    assert compile_glob("**/.env", path=True).fullmatch("a/b/.env")
    assert not compile_glob("src/*", path=True).fullmatch("src/a/b.py")
    assert compile_glob("[!a]x").fullmatch("bx") and not compile_glob("[!a]x").fullmatch("ax")
    for bad in ("", "[", "[]", "a" * 600):
        with pytest.raises(PatternError):
            compile_glob(bad)


def test_a_pathological_pattern_matches_in_linear_time() -> None:
    pattern = compile_glob("*a*a*a*a*a*a*a*a*a*a*b")
    assert not pattern.fullmatch("a" * 5000)  # would take ages with a backtracking blow-up


def test_command_patterns_match_parsed_words() -> None:
    push = CommandPattern.parse("git push *")
    assert push.matches(("git", "push")) and push.matches(("git", "push", "origin", "main"))
    assert not push.matches(("git", "pull"))
    exact = CommandPattern.parse("git status")
    assert exact.matches(("git", "status")) and not exact.matches(("git", "status", "-s"))
    parsed = parse_command("FOO=1 git status && ls -la | wc -l; echo 'a b'")
    assert parsed.certain
    assert parsed.commands == (("git", "status"), ("ls", "-la"), ("wc", "-l"), ("echo", "a b"))
    assert parsed.nested == (("a", "b"),)
    for uncertain in (
        "echo $(rm -rf /)",
        "echo `id`",
        "cat <<EOF",
        "a\nb",
        "ls > out",
        "x" * 20000,
    ):
        assert not parse_command(uncertain).certain, uncertain
    assert not parse_command("echo 'unclosed").certain
