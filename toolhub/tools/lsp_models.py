"""The ``lsp`` tool's models: the operations, the tool's params (which server runs each language,
its settings, the bounds of a call), the model's arguments and the output it reads.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Operation = Literal[
    "goToDefinition", "findReferences", "hover", "documentSymbol", "workspaceSymbol"
]


class LspParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    servers: dict[str, list[str]] = Field(
        default_factory=lambda: {"python": ["pylsp"]}, description="language → server command"
    )
    extensions: dict[str, str] = Field(
        default_factory=lambda: {".py": "python", ".pyi": "python"},
        description="file suffix → language",
    )
    settings: dict[str, dict[str, Any]] = Field(
        default_factory=lambda: {
            "python": {"pylsp": {"plugins": {"jedi_symbols": {"include_import_symbols": False}}}}
        },
        description="language → the server's settings (imported names are not symbols here)",
    )
    default_language: str = "python"
    request_timeout_s: float = Field(30.0, gt=0)
    max_results: int = Field(100, ge=1)
    max_scan_files: int = Field(300, ge=1)


class LspArgs(BaseModel):
    operation: Operation
    file_path: str | None = Field(None, description="File to ask about (workspace path).")
    line: int | None = Field(None, ge=1, description="1-based line.")
    character: int | None = Field(None, ge=1, description="1-based column.")
    query: str | None = Field(None, description="Symbol name (part) for workspaceSymbol.")


class LspItem(BaseModel):
    path: str
    line: int
    character: int
    name: str | None = None
    kind: str | None = None
    container: str | None = None
    depth: int = 0
    text: str | None = None


class LspOutput(BaseModel):
    operation: str
    target: str
    items: list[LspItem] = Field(default_factory=list)
    hover: str | None = None
    note: str | None = None
    omitted: int = 0

    def model_text(self) -> str:
        lines = [f"{self.operation} {self.target}"]
        if self.note:
            lines.append(f"Note: {self.note}")
        if self.operation == "hover":
            lines.append(self.hover or "No hover information.")
        elif not self.items:
            lines.append("No results.")
        for item in self.items:
            where = f"{item.path}:{item.line}:{item.character}"
            if item.name is not None:
                parent = f" in {item.container}" if item.container else ""
                lines.append(f"{'  ' * item.depth}{item.kind} {item.name}{parent} — {where}")
            else:
                lines.append(f"{where}: {item.text.strip()}" if item.text else where)
        if self.omitted:
            lines.append(f"... {self.omitted} more not shown")
        return "\n".join(lines)
