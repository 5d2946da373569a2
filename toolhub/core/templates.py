"""Description and prompt templates.

Jinja2 with ``${{ }}`` / ``${% %}`` / ``${# #}`` delimiters, so literal ``{{ }}`` in prose (code
samples, JSON) is never touched. Every template renders in Jinja2's sandbox: descriptions and
prompts may come from a client. Undefined names render empty, so a description that mentions a
kind the tool set lacks (``${{ tools.by_kind.lsp }}``) degrades to nothing instead of failing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jinja2 import ChainableUndefined, TemplateError
from jinja2.exceptions import SecurityError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import ToolError


class _Sandbox(ImmutableSandboxedEnvironment):
    """The sandbox, but an attempt to reach an unsafe attribute fails loudly instead of
    rendering as empty text, so a hostile template is reported rather than half-rendered."""

    def unsafe_undefined(self, obj: Any, attribute: str) -> Any:
        raise SecurityError(f"access to attribute {attribute!r} is not allowed")


_ENV = _Sandbox(
    variable_start_string="${{",
    variable_end_string="}}",
    block_start_string="${%",
    block_end_string="%}",
    comment_start_string="${#",
    comment_end_string="#}",
    undefined=ChainableUndefined,
    autoescape=False,
    keep_trailing_newline=True,
)

_MARKERS = re.compile(r"\$\{\{.*?\}\}|\$\{%.*?%\}|\$\{#.*?#\}", re.DOTALL)


class TemplateRenderError(ToolError):
    """A template that could not be rendered; says which template and why."""

    def __init__(self, detail: str) -> None:
        super().__init__("invalid_arguments", detail, {"code": "template_render"})


def has_markers(text: str) -> bool:
    return "${{" in text or "${%" in text


def strip_markers(text: str) -> str:
    """The template with every placeholder removed (for display where nothing can render)."""
    return _MARKERS.sub("", text)


@dataclass(frozen=True)
class TemplateRenderer:
    """Renders against the tool set's names: ``tools.by_kind.<kind>`` → the client name of the
    first tool of that kind in config order; ``params.<kind>.<param>`` → that parameter's client
    name across every tool of the kind."""

    by_kind: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    globals: Mapping[str, Any] = field(default_factory=dict)

    def render(self, text: str, extra: Mapping[str, Any] | None = None) -> str:
        if not has_markers(text):
            return text
        context: dict[str, Any] = {
            **self.globals,
            "tools": {"by_kind": dict(self.by_kind)},
            "params": {k: dict(v) for k, v in self.params.items()},
        }
        if extra:
            context.update(extra)
        try:
            return _ENV.from_string(text).render(context)
        except TemplateError as exc:
            raise TemplateRenderError(f"template could not be rendered: {exc}") from None

    def render_schema(self, schema: Any, extra: Mapping[str, Any] | None = None) -> Any:
        """The schema with every ``description`` rendered, recursively."""
        if isinstance(schema, dict):
            return {
                k: (
                    self.render(v, extra)
                    if k == "description" and isinstance(v, str)
                    else self.render_schema(v, extra)
                )
                for k, v in schema.items()
            }
        if isinstance(schema, list):
            return [self.render_schema(v, extra) for v in schema]
        return schema
