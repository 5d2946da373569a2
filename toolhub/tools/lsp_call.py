"""One ``lsp`` call's view of the language servers: which server a file needs, the request it
is asked (positions converted from the model's 1-based columns to the protocol's 0-based UTF-16
units), and its answer turned into workspace paths and 1-based positions with the line's text.

Threat: the server runs project code, so what it answers is untrusted: a location outside the
workspace (a ``..`` or a symlink that leads out) is shown by path only, never read
(``_read``), and the server itself is started under the session's sandbox (``lsp_manager``).
"""

from __future__ import annotations

import asyncio
import os
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from toolhub.backends.http import cancellable
from toolhub.backends.lsp_client import (
    METHOD_NOT_FOUND,
    SYMBOL_KINDS,
    LspClient,
    LspFailure,
    LspManager,
    code_points,
    utf16_units,
)
from toolhub.backends.process import ProcessRunner
from toolhub.backends.workspace import Workspace
from toolhub.core import ToolContext, ToolError
from toolhub.sandbox.installs import install_roots

from .lsp_models import LspItem, LspOutput, LspParams

POSITIONAL = {
    "goToDefinition": "textDocument/definition",
    "findReferences": "textDocument/references",
    "hover": "textDocument/hover",
}
SKIPPED_DIRS = frozenset({"node_modules", "__pycache__", "site-packages", "venv", "build", "dist"})
_MANAGER_LOCK = threading.Lock()


def lsp_manager(ctx: ToolContext, workspace: Workspace, params: LspParams) -> LspManager:
    with _MANAGER_LOCK:
        manager = ctx.container.get(LspManager)
        if manager is None:
            runner = ctx.container.get(ProcessRunner)
            launch = None
            if runner is not None:

                def launch(argv: list[str]) -> tuple[list[str], dict[str, str]]:
                    return runner.confine(argv, workspace.root, readable=install_roots(argv[0]))

            manager = LspManager(workspace.root, params.servers, params.settings, launch)
            ctx.container.insert(manager)
        return manager


class LspCall:
    """One call's view: the workspace, the params, and the servers to ask."""

    def __init__(self, ctx: ToolContext, workspace: Workspace, params: LspParams) -> None:
        self.ctx = ctx
        self.workspace = workspace
        self.params = params
        self.manager = lsp_manager(ctx, workspace, params)
        self._lines: dict[Path, list[str] | None] = {}

    def source(self, file_path: str) -> tuple[Path, str]:
        path = self.workspace.resolve(file_path, what="file")
        if not path.is_file():
            raise ToolError.not_found(f"`{file_path}` is not a file in the workspace")
        language = self.params.extensions.get(path.suffix)
        if language is None or language not in self.params.servers:
            known = ", ".join(sorted(self.params.extensions)) or "none"
            raise ToolError.invalid_arguments(
                f"no language server handles `{path.suffix or path.name}` files "
                f"(configured: {known})"
            )
        return path, language

    async def client(self, language: str) -> LspClient:
        client = self.manager.client(language)
        await self.wait(client.capabilities, "initialize")
        return client

    async def wait(self, future: Future[Any], method: str) -> Any:
        timeout = self.params.request_timeout_s

        async def bounded() -> Any:
            try:
                return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
            except TimeoutError:
                raise ToolError.timeout(
                    f"language server did not answer `{method}` in {timeout:g} s"
                ) from None

        return await cancellable(self.ctx.cancel, bounded())

    async def ask(self, client: LspClient, method: str, params: Any) -> Any:
        return await self.wait(client.request(method, params), method)

    async def positional(
        self, operation: str, path: Path, language: str, line: int, character: int
    ) -> LspOutput:
        client = await self.client(language)
        lines = client.sync_document(path, language).split("\n")
        if line > len(lines):
            raise ToolError.invalid_arguments(
                f"line {line} is past the end of `{self.workspace.display(path)}` "
                f"({len(lines)} lines)"
            )
        text = lines[line - 1]
        column = min(character - 1, len(text))
        position = {"line": line - 1, "character": utf16_units(text, column)}
        request: dict[str, Any] = {"textDocument": {"uri": path.as_uri()}, "position": position}
        if operation == "findReferences":
            request["context"] = {"includeDeclaration": True}
        result = await self.ask(client, POSITIONAL[operation], request)
        target = f"{self.workspace.display(path)}:{line}:{character}"
        if operation == "hover":
            return LspOutput(operation=operation, target=target, hover=_hover_text(result))
        items = [self.location(loc) for loc in _as_list(result)]
        return self.output(operation, target, [i for i in items if i is not None])

    async def document_symbols(self, path: Path, language: str) -> list[LspItem]:
        client = await self.client(language)
        client.sync_document(path, language)
        result = await self.ask(
            client, "textDocument/documentSymbol", {"textDocument": {"uri": path.as_uri()}}
        )
        items: list[LspItem] = []
        for symbol in _as_list(result):
            self._flatten(symbol, path, 0, None, items)
        return items

    async def workspace_symbols(self, query: str, file_path: str | None) -> LspOutput:
        language = self.source(file_path)[1] if file_path else self.params.default_language
        if language not in self.params.servers:
            raise ToolError.invalid_arguments(f"no language server is configured for {language}")
        client = await self.client(language)
        capabilities = await self.wait(client.capabilities, "initialize")
        if capabilities.get("workspaceSymbolProvider"):
            try:
                result = await self.ask(client, "workspace/symbol", {"query": query})
            except LspFailure as failure:
                if failure.rpc_code != METHOD_NOT_FOUND:
                    raise
            else:
                items = [self.symbol(s, None, 0, None) for s in _as_list(result)]
                return self.output("workspaceSymbol", repr(query), [i for i in items if i])
        return await self._scan(language, query)

    async def _scan(self, language: str, query: str) -> LspOutput:
        """The honest fallback when the server has no ``workspace/symbol``: ask every workspace
        file of that language for its symbols and filter them by name."""
        files = self._files(language)
        needle = query.lower()
        found: list[LspItem] = []
        for path in files:
            found += [
                s
                for s in await self.document_symbols(path, language)
                if needle in (s.name or "").lower()
            ]
        for item in found:
            item.depth = 0
        note = (
            f"the {language} server does not support workspace/symbol; these results come from "
            f"a documentSymbol scan of {len(files)} file(s)"
            + (
                f" (capped at {self.params.max_scan_files})"
                if len(files) >= self.params.max_scan_files
                else ""
            )
        )
        output = self.output("workspaceSymbol", repr(query), found)
        output.note = note
        return output

    def _files(self, language: str) -> list[Path]:
        suffixes = {s for s, lang in self.params.extensions.items() if lang == language}
        files: list[Path] = []
        for folder, dirs, names in os.walk(self.workspace.root):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
            for name in sorted(names):
                if Path(name).suffix in suffixes:
                    files.append(Path(folder) / name)
                    if len(files) >= self.params.max_scan_files:
                        return files
        return files

    def _flatten(
        self, symbol: Any, path: Path, depth: int, parent: str | None, out: list[LspItem]
    ) -> None:
        item = self.symbol(symbol, path, depth, parent)
        if item is None:
            return
        out.append(item)
        for child in symbol.get("children") or []:
            self._flatten(child, path, depth + 1, item.name, out)

    def symbol(
        self, symbol: Any, path: Path | None, depth: int, parent: str | None
    ) -> LspItem | None:
        """A DocumentSymbol (``path`` given) or a SymbolInformation / WorkspaceSymbol."""
        if not isinstance(symbol, dict) or not isinstance(symbol.get("name"), str):
            return None
        item: LspItem | None
        if "selectionRange" in symbol and path is not None:
            item = self.position(path, symbol["selectionRange"].get("start", {}))
        else:
            item = self.location(symbol.get("location"))
        if item is None:
            return None
        kind = symbol.get("kind")
        item.name = symbol["name"]
        item.kind = (
            SYMBOL_KINDS[kind - 1]
            if isinstance(kind, int) and 0 < kind <= len(SYMBOL_KINDS)
            else "symbol"
        )
        item.container = symbol.get("containerName") or parent
        item.depth = depth
        item.text = None
        return item

    def location(self, location: Any) -> LspItem | None:
        """A Location or LocationLink → path and 1-based position, with the line's text when the
        file is inside the workspace."""
        if not isinstance(location, dict):
            return None
        uri = location.get("targetUri") or location.get("uri")
        span = location.get("targetSelectionRange") or location.get("range") or {}
        if not isinstance(uri, str) or urlsplit(uri).scheme != "file":
            return None
        return self.position(Path(unquote(urlsplit(uri).path)), span.get("start", {}))

    def position(self, path: Path, start: dict[str, Any]) -> LspItem:
        line, units = int(start.get("line", 0)), int(start.get("character", 0))
        text = self._line(path, line)
        column = code_points(text, units) if text is not None else units
        return LspItem(
            path=self.workspace.display(path), line=line + 1, character=column + 1, text=text
        )

    def _line(self, path: Path, line: int) -> str | None:
        """Source text of a workspace file's line; files outside the workspace are never read."""
        if path not in self._lines:
            self._lines[path] = self._read(path)
        lines = self._lines[path]
        return lines[line] if lines is not None and 0 <= line < len(lines) else None

    def _read(self, path: Path) -> list[str] | None:
        """The lines of the file a server's URI names, read beneath the workspace root: the
        server runs project code, so its URI may climb out with ``..`` or point at a symlink
        that leads out, and neither may show a file of the host."""
        if not self.workspace.contains(path):
            return None
        try:
            with self.workspace.open_read(path) as handle:
                return handle.read().decode(errors="replace").split("\n")
        except (OSError, ToolError):
            return None

    def output(self, operation: str, target: str, items: list[LspItem]) -> LspOutput:
        cap = self.params.max_results
        return LspOutput(
            operation=operation, target=target, items=items[:cap], omitted=max(0, len(items) - cap)
        )


def _as_list(result: Any) -> list[Any]:
    if result is None:
        return []
    return result if isinstance(result, list) else [result]


def _hover_text(result: Any) -> str | None:
    if not isinstance(result, dict):
        return None
    contents = result.get("contents")
    parts = contents if isinstance(contents, list) else [contents]
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("value"), str):
            language = part.get("language")
            texts.append(f"```{language}\n{part['value']}\n```" if language else part["value"])
    text = "\n\n".join(t for t in texts if t.strip())
    return text or None
