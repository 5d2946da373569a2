"""Which decision a call gets: the first matching rule of the tenant's config (else its
default), bounded by the first matching rule of the operator's (the stricter of the two wins).

How a rule reads the model's arguments depends on its decision, so that a hostile argument can
only ever make a call stricter. An ``allow`` rule's argument conditions must hold for every
part of the call: every path a file tool names, every simple command of a command line (which
must parse for certain: no substitutions, no here-documents). An ``ask`` or ``deny`` rule's
hold for any part: one path, or the pattern's words anywhere in any simple command or quoted
word (``sudo rm -rf x``, ``bash -c 'rm -rf x'``): a false ask is a nuisance, a missed one is
not.
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from toolhub.core import ToolKind

from .globs import parse_command
from .rules import CompiledRule, Decision, Default, OperatorPermissions, Permissions

#: Argument names that hold a path for a file tool.
PATH_ARGUMENTS = ("path", "destination", "file_path", "source", "target")


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What rules are matched against: the tool and its canonical arguments."""

    name: str
    fq_id: str
    kind: ToolKind | None
    read_only: bool
    arguments: dict[str, Any]
    workspace: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    decision: Decision
    #: The rule that decided, as the denial and the approval name it: ``config rules[2]
    #: (push)``, ``operator rules[0]``, ``config default (review)``.
    rule: str


ALLOWED = Verdict(Decision.ALLOW, "no rule")


def decide(
    facts: CallFacts, config: Permissions | None, operator: OperatorPermissions | None
) -> Verdict:
    tenant = _first(facts, config.rules, "config") if config is not None else None
    if tenant is None and config is not None:
        tenant = Verdict(_default(config.default, facts), f"config default ({config.default})")
    forced = _first(facts, operator.rules, "operator") if operator is not None else None
    verdicts = [v for v in (forced, tenant) if v is not None]
    if not verdicts:
        return ALLOWED
    return max(verdicts, key=lambda v: v.decision.strictness)


def _default(default: Default, facts: CallFacts) -> Decision:
    if default is Default.REVIEW:
        return Decision.ALLOW if facts.read_only else Decision.ASK
    return Decision(default.value)


def _first(facts: CallFacts, rules: list[Any], source: str) -> Verdict | None:
    for index, rule in enumerate(rules):
        if matches(rule.compiled, facts):
            label = f"{source} rules[{index}]" + (f" ({rule.name})" if rule.name else "")
            return Verdict(rule.decision, label)
    return None


def matches(compiled: CompiledRule, facts: CallFacts) -> bool:
    rule = compiled.rule
    every = rule.decision is Decision.ALLOW
    if compiled.tools and not (
        compiled.any(compiled.tools, facts.name) or compiled.any(compiled.tools, facts.fq_id)
    ):
        return False
    if rule.kind is not None and facts.kind not in rule.kind:
        return False
    if rule.read_only is not None and facts.read_only != rule.read_only:
        return False
    if compiled.paths and not _paths_match(compiled, facts, every):
        return False
    if compiled.hosts and not _host_matches(compiled, facts):
        return False
    return not compiled.commands or _command_matches(compiled, facts, every)


def _paths_match(compiled: CompiledRule, facts: CallFacts, every: bool) -> bool:
    paths = [
        _relative(value, facts.workspace)
        for name in PATH_ARGUMENTS
        if isinstance(value := facts.arguments.get(name), str)
    ]
    if not paths:
        return False
    found = [p is not None and compiled.any(compiled.paths, p) for p in paths]
    return all(found) if every else any(found) or None in paths


def _relative(path: str, workspace: str) -> str | None:
    """``path`` relative to the workspace, normalised (``a/../b`` is ``b``); None for one
    outside it or that cannot be read (an ``allow`` never matches it, an ``ask`` or ``deny``
    always does)."""
    if "\x00" in path:
        return None
    if os.path.isabs(path):
        if not workspace:
            return None
        path = os.path.relpath(posixpath.normpath(path), workspace)
    normal = posixpath.normpath(path)
    if normal == ".." or normal.startswith("../") or normal.startswith("/"):
        return None
    return normal


def _host_matches(compiled: CompiledRule, facts: CallFacts) -> bool:
    url = facts.arguments.get("url")
    if not isinstance(url, str):
        return False
    if "://" not in url:
        url = "https://" + url
    try:
        host = (urlsplit(url).hostname or "").rstrip(".")
    except ValueError:
        return compiled.rule.decision is not Decision.ALLOW
    return bool(host) and compiled.any(compiled.hosts, host.lower())


def _command_matches(compiled: CompiledRule, facts: CallFacts, every: bool) -> bool:
    command = facts.arguments.get("command")
    if not isinstance(command, str):
        return False
    parsed = parse_command(command)
    patterns = compiled.commands
    if every:
        return (
            parsed.certain
            and bool(parsed.commands)
            and all(any(p.matches(c) for p in patterns) for c in parsed.commands)
        )
    return any(p.occurs_in(c) for p in patterns for c in (*parsed.commands, *parsed.nested))
