"""Description and prompt templates.

Jinja2 with ``${{ }}`` / ``${% %}`` / ``${# #}`` delimiters, so literal ``{{ }}`` in prose (code
samples, JSON) is never touched. Every template renders in the bounded sandbox of
``template_limits`` (output size, arithmetic, ranges, call depth): descriptions and prompts may
come from a client. Undefined names render empty, so a description that mentions a kind the tool
set lacks (``${{ tools.by_kind.lsp }}``) degrades to nothing instead of failing.

``TemplateRenderer.render`` renders in this process, which suits templates written in code. A
template from a client also needs a wall-clock budget that no single operation can hold up;
``toolhub/toolset/render_process.py`` renders those, from ``TemplateRenderer.context``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ToolError
from .template_limits import TemplateFailure, check_output_size, render_text

_MARKERS = re.compile(r"\$\{\{.*?\}\}|\$\{%.*?%\}|\$\{#.*?#\}", re.DOTALL)


class TemplateRenderError(ToolError):
    """A template that could not be rendered; says which template and why."""

    def __init__(self, detail: str) -> None:
        super().__init__("invalid_arguments", detail, {"code": "template_render"})


def has_markers(text: str) -> bool:
    return "${{" in text or "${%" in text


@dataclass(frozen=True)
class TemplateRenderer:
    """Renders against the tool set's names: ``tools.by_kind.<kind>`` → the client name of the
    first tool of that kind in config order; ``params.<kind>.<param>`` → that parameter's client
    name across every tool of the kind."""

    by_kind: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    globals: Mapping[str, Any] = field(default_factory=dict)

    def context(self, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The variables a template sees: the tool set's names, the globals, then ``extra``."""
        context: dict[str, Any] = {
            **self.globals,
            "tools": {"by_kind": dict(self.by_kind)},
            "params": {k: dict(v) for k, v in self.params.items()},
        }
        if extra:
            context.update(extra)
        return context

    def render(self, text: str, extra: Mapping[str, Any] | None = None) -> str:
        try:
            if not has_markers(text):
                check_output_size(text)
                return text
            return render_text(text, self.context(extra))
        except TemplateFailure as exc:
            raise TemplateRenderError(str(exc)) from None

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
