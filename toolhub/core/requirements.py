"""Dependency expressions: what a tool needs from the rest of the tool set, as a small tree.

Built with Python operators over a few leaves::

    requires = Kind(ToolKind.READ) & IfParams(ParamIs("enabled_background", True),
                                               Kind(ToolKind.KILL_TASK_ACTION))

Expressions are evaluated against a *proposed* tool set before it is built, and explain
themselves in plain words when they fail, so a violation says what is missing.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .kinds import ToolKind


@dataclass(frozen=True, slots=True)
class ProposedTool:
    """What validation knows of a tool that the config would enable."""

    namespace: str
    id: str
    kind: ToolKind | None
    params: dict[str, Any] = field(default_factory=dict)
    input_properties: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class EvalContext:
    tools: Sequence[ProposedTool]
    self_params: dict[str, Any] = field(default_factory=dict)


class Expr(ABC):
    """A boolean expression over ``T``-specific leaves; combine with ``&``, ``|`` and ``~``."""

    def __and__(self, other: Expr) -> Expr:
        return AllOf((*_flatten(self, AllOf), *_flatten(other, AllOf)))

    def __or__(self, other: Expr) -> Expr:
        return AnyOf((*_flatten(self, AnyOf), *_flatten(other, AnyOf)))

    def __invert__(self) -> Expr:
        return self.inner if isinstance(self, Not) else Not(self)

    @abstractmethod
    def evaluate(self, ctx: Any) -> bool: ...

    @abstractmethod
    def explain(self) -> str: ...

    @abstractmethod
    def to_json(self) -> Any: ...


def _flatten(expr: Expr, kind: type[AllOf] | type[AnyOf]) -> tuple[Expr, ...]:
    return expr.items if isinstance(expr, kind) else (expr,)


@dataclass(frozen=True, slots=True)
class _Const(Expr):
    value: bool

    def evaluate(self, ctx: Any) -> bool:
        return self.value

    def explain(self) -> str:
        return "always" if self.value else "never"

    def to_json(self) -> Any:
        return self.value


TRUE: Expr = _Const(True)
FALSE: Expr = _Const(False)


@dataclass(frozen=True, slots=True)
class AllOf(Expr):
    items: tuple[Expr, ...]

    def evaluate(self, ctx: Any) -> bool:
        return all(item.evaluate(ctx) for item in self.items)

    def explain(self) -> str:
        return " and ".join(_group(i) for i in self.items)

    def to_json(self) -> Any:
        return {"all": [i.to_json() for i in self.items]}

    def failing(self, ctx: Any) -> list[Expr]:
        return [item for item in self.items if not item.evaluate(ctx)]


@dataclass(frozen=True, slots=True)
class AnyOf(Expr):
    items: tuple[Expr, ...]

    def evaluate(self, ctx: Any) -> bool:
        return any(item.evaluate(ctx) for item in self.items)

    def explain(self) -> str:
        return "one of: " + ", ".join(_group(i) for i in self.items)

    def to_json(self) -> Any:
        return {"any": [i.to_json() for i in self.items]}


@dataclass(frozen=True, slots=True)
class Not(Expr):
    inner: Expr

    def evaluate(self, ctx: Any) -> bool:
        return not self.inner.evaluate(ctx)

    def explain(self) -> str:
        return f"not ({self.inner.explain()})"

    def to_json(self) -> Any:
        return {"not": self.inner.to_json()}


def _group(expr: Expr) -> str:
    text = expr.explain()
    return f"({text})" if isinstance(expr, AllOf | AnyOf) else text


# -- conditions on a params object ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ParamIs(Expr):
    """Condition leaf: ``params[key] == value`` (evaluated on a params dict)."""

    key: str
    value: Any

    def evaluate(self, ctx: Any) -> bool:
        params = ctx if isinstance(ctx, dict) else ctx.self_params
        return bool(params.get(self.key) == self.value)

    def explain(self) -> str:
        return f"{self.key} = {self.value!r}"

    def to_json(self) -> Any:
        return {"param": self.key, "equals": self.value}


# -- requirement leaves ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tool(Expr):
    """A specific tool is enabled (and, optionally, its effective params satisfy a condition)."""

    namespace: str
    id: str
    if_params: Expr | None = None

    def evaluate(self, ctx: EvalContext) -> bool:
        return any(
            t.namespace == self.namespace
            and t.id == self.id
            and (self.if_params is None or self.if_params.evaluate(t.params))
            for t in ctx.tools
        )

    def explain(self) -> str:
        where = f" with {self.if_params.explain()}" if self.if_params is not None else ""
        return f"tool {self.namespace}:{self.id}{where}"

    def to_json(self) -> Any:
        cond = None if self.if_params is None else self.if_params.to_json()
        return {"tool": f"{self.namespace}:{self.id}", "if_params": cond}


@dataclass(frozen=True, slots=True)
class Kind(Expr):
    """Some enabled tool has this kind (and optionally params satisfying a condition)."""

    kind: ToolKind
    if_params: Expr | None = None

    def evaluate(self, ctx: EvalContext) -> bool:
        return any(
            t.kind == self.kind and (self.if_params is None or self.if_params.evaluate(t.params))
            for t in ctx.tools
        )

    def explain(self) -> str:
        where = f" with {self.if_params.explain()}" if self.if_params is not None else ""
        return f"a tool of kind `{self.kind.value}`{where}"

    def to_json(self) -> Any:
        cond = None if self.if_params is None else self.if_params.to_json()
        return {"kind": self.kind.value, "if_params": cond}


@dataclass(frozen=True, slots=True)
class IfParams(Expr):
    """If *this* tool's own params satisfy ``condition``, require ``then``; else vacuously true."""

    condition: Expr
    then: Expr

    def evaluate(self, ctx: EvalContext) -> bool:
        return not self.condition.evaluate(ctx.self_params) or self.then.evaluate(ctx)

    def explain(self) -> str:
        return f"when {self.condition.explain()}: {self.then.explain()}"

    def to_json(self) -> Any:
        return {"if": self.condition.to_json(), "then": self.then.to_json()}


@dataclass(frozen=True, slots=True)
class InputParam(Expr):
    """Some tool of ``kind`` exposes ``param`` in its (canonical) input schema."""

    kind: ToolKind
    param: str

    def evaluate(self, ctx: EvalContext) -> bool:
        return any(t.kind == self.kind and self.param in t.input_properties for t in ctx.tools)

    def explain(self) -> str:
        return f"a `{self.kind.value}` tool with a `{self.param}` argument"

    def to_json(self) -> Any:
        return {"input_param": self.param, "kind": self.kind.value}


def unmet(expr: Expr, ctx: EvalContext) -> list[Expr]:
    """The top-level parts of ``expr`` that fail, for a message that names only what is missing."""
    if expr.evaluate(ctx):
        return []
    if isinstance(expr, AllOf):
        return [part for item in expr.failing(ctx) for part in unmet(item, ctx) or [item]]
    if isinstance(expr, IfParams):
        return unmet(expr.then, ctx) or [expr.then]
    return [expr]
