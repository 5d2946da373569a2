"""Permission rules: the grammar of ``permissions`` in a client's tool-set config and in the
operator's policy (docs/approvals.md).

A rule names what it is about (a tool, a kind, the read-only flag, and on the arguments: path
globs for file tools, command patterns for ``bash``, URL hosts for ``web_fetch``) and a
decision: ``allow``, ``ask`` (a person approves the call before it is queued) or ``deny`` (a
typed ``permission_denied`` naming the rule). Threat: the rules are written by a tenant, so
each is bounded (``MAX_RULES`` rules, ``MAX_PATTERNS`` patterns a condition, patterns compiled
when the config is loaded: a bad one is a config error naming its field), and they are never
the last word: the operator's own rules bound them (``toolhub.approvals.decide``).
"""

from __future__ import annotations

from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from toolhub.core import ToolKind

from .globs import CommandPattern, Glob, PatternError, compile_glob

#: At most this many rules in one list (a config's, the operator's).
MAX_RULES = 256
#: At most this many patterns (or kinds, or tools) in one condition of a rule.
MAX_PATTERNS = 64
#: How long an approval may wait at most (seconds): a week, like a session's record.
MAX_APPROVAL_SECONDS = 7 * 24 * 3600

_Patterns = Annotated[list[str], Field(min_length=1, max_length=MAX_PATTERNS)]


class Decision(StrEnum):
    """What a rule says, strictest last: a merge of two decisions keeps the stricter."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"

    @property
    def strictness(self) -> int:
        return _ORDER[self]


_ORDER = {Decision.ALLOW: 0, Decision.ASK: 1, Decision.DENY: 2}


class Default(StrEnum):
    """The decision when no rule matches. ``review``: read-only tools allowed, every other
    (writes, commands, tools of no known kind) asked."""

    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"
    REVIEW = "review"


class PermissionRule(BaseModel):
    """One rule. Its conditions hold together (each one given must match); a list in one
    condition matches when any of its entries does. A rule with no condition matches every
    call."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = Field(
        None, max_length=120, description="A label the denial and the approval name."
    )
    tool: _Patterns | None = Field(
        None, description="Tool globs, matched against the client name and the fq id."
    )
    kind: Annotated[list[ToolKind], Field(min_length=1, max_length=MAX_PATTERNS)] | None = None
    read_only: bool | None = Field(None, description="Match read-only tools, or the others.")
    command: _Patterns | None = Field(
        None, description="Command patterns matched on the parsed words of `bash`'s command."
    )
    path: _Patterns | None = Field(
        None, description="Globs of workspace-relative paths of file tools (`**` crosses `/`)."
    )
    host: _Patterns | None = Field(None, description="Host globs of `web_fetch`'s URL.")
    decision: Decision

    @field_validator("tool", "host")
    @classmethod
    def _globs(cls, value: list[str] | None) -> list[str] | None:
        for pattern in value or ():
            _check(lambda p=pattern: compile_glob(p))
        return value

    @field_validator("path")
    @classmethod
    def _paths(cls, value: list[str] | None) -> list[str] | None:
        for pattern in value or ():
            _check(lambda p=pattern: compile_glob(p, path=True))
        return value

    @field_validator("command")
    @classmethod
    def _commands(cls, value: list[str] | None) -> list[str] | None:
        for pattern in value or ():
            _check(lambda p=pattern: CommandPattern.parse(p))
        return value

    @cached_property
    def compiled(self) -> CompiledRule:
        return CompiledRule(self)


def _check(make: Any) -> None:
    try:
        make()
    except PatternError as exc:
        raise ValueError(str(exc)) from None


class CompiledRule:
    """A rule's patterns, compiled once."""

    __slots__ = ("commands", "hosts", "paths", "rule", "tools")

    def __init__(self, rule: PermissionRule) -> None:
        self.rule = rule
        self.tools = [compile_glob(p) for p in rule.tool or ()]
        self.paths = [compile_glob(p, path=True) for p in rule.path or ()]
        self.hosts = [compile_glob(p.lower()) for p in rule.host or ()]
        self.commands = [CommandPattern.parse(p) for p in rule.command or ()]

    @staticmethod
    def any(patterns: list[Glob], value: str) -> bool:
        return any(p.fullmatch(value) for p in patterns)


class Permissions(BaseModel):
    """``permissions`` in a client's tool-set config."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default: Default = Field(
        Default.ALLOW,
        description="The decision when no rule matches (`review`: ask for "
        "every tool that is not read-only).",
    )
    rules: list[PermissionRule] = Field(default_factory=list, max_length=MAX_RULES)
    approval_seconds: int = Field(
        600,
        ge=1,
        le=MAX_APPROVAL_SECONDS,
        description="How long a call waits for its approval before it fails `approval_expired`.",
    )


class OperatorPermissions(BaseModel):
    """``permissions`` in the operator's policy: rules every tenant's calls are held to."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rules: list[PermissionRule] = Field(
        default_factory=list,
        max_length=MAX_RULES,
        description="Forced rules: a call gets the stricter of their decision and the "
        "tenant's, so a tenant never turns an operator `ask` or `deny` into `allow`.",
    )
    tenant_rules: bool = Field(
        True, description="Whether a tenant's config may carry `permissions` at all."
    )
    max_approval_seconds: int = Field(
        MAX_APPROVAL_SECONDS,
        ge=1,
        le=MAX_APPROVAL_SECONDS,
        description="The longest `approval_seconds` a tenant may set.",
    )
