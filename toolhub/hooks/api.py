"""What a hook sees and answers: plain, JSON-shaped values, the same for a Python hook and a
webhook.

A ``before`` hook gets a ``BeforeCall`` (the call and its canonical arguments, as validated)
and answers a ``Decision``: allow (``None`` says the same), deny with a reason, rewrite the
arguments (validated again against the tool's input model), and optionally a note the model
reads after the call's text. An ``after`` hook gets each ``AfterItem`` of a call (each progress
item, then the result) and answers the item to store and stream instead (``None``: unchanged).
``state`` is the hook's own scratch for one call: a stateful rewrite (a private key block cut
across progress items) keeps its place there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = ["AfterItem", "BeforeCall", "CallInfo", "Decision", "Hook"]

_set = object.__setattr__


@dataclass(frozen=True, slots=True, init=False)
class CallInfo:
    """The call a hook runs around."""

    call_id: str
    session_id: str
    tenant: str
    tool: str
    name: str

    def __init__(self, call_id: str, session_id: str, tenant: str, tool: str, name: str) -> None:
        # The generated ``__init__`` of a frozen class looks ``object.__setattr__`` up once
        # per field; one is made for every call that runs ``after`` hooks.
        _set(self, "call_id", call_id)
        _set(self, "session_id", session_id)
        _set(self, "tenant", tenant)
        _set(self, "tool", tool)
        _set(self, "name", name)

    def to_dict(self) -> dict[str, str]:
        return {
            "call_id": self.call_id,
            "session_id": self.session_id,
            "tenant": self.tenant,
            "tool": self.tool,
            "name": self.name,
        }


@dataclass(frozen=True, slots=True)
class BeforeCall:
    """A validated call about to be queued (or run, embedded)."""

    call: CallInfo
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Decision:
    """A ``before`` hook's answer. ``action``: ``allow``, ``deny`` (``reason`` says why: the
    model reads it) or ``rewrite`` (``arguments`` replace the call's). ``note``: text the model
    reads after the call's own."""

    action: Literal["allow", "deny", "rewrite"] = "allow"
    reason: str | None = None
    arguments: dict[str, Any] | None = None
    note: str | None = None

    @classmethod
    def allow(cls, note: str | None = None) -> Decision:
        return cls("allow", note=note)

    @classmethod
    def deny(cls, reason: str) -> Decision:
        return cls("deny", reason=reason)

    @classmethod
    def rewrite(cls, arguments: dict[str, Any], note: str | None = None) -> Decision:
        return cls("rewrite", arguments=arguments, note=note)


@dataclass(slots=True)
class AfterItem:
    """One item of a call's output on its way to be stored and streamed. ``kind``:
    ``progress`` or ``result``. ``text``: a progress item's text, or the result's model text;
    ``output``: a progress item's payload, or the result's structured output value; ``error``:
    a failed result's error as a dict (``kind``, ``detail``, ``details``); ``content``: content
    blocks as dicts. A hook returns the item with what it changed."""

    call: CallInfo
    kind: Literal["progress", "result"]
    text: str | None
    output: Any
    error: dict[str, Any] | None = None
    content: list[dict[str, Any]] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)


class Hook(Protocol):
    """A hook object. It defines ``before``, ``after`` or both (this protocol lists both; a
    hook of one stage leaves the other out); an entry point in the ``toolhub.hooks`` group
    names a class (made with no arguments) or such an object."""

    def before(self, call: BeforeCall) -> Decision | None: ...

    def after(self, item: AfterItem) -> AfterItem | None: ...
