"""``lsp``: code intelligence from a real language server (definition, references, hover,
document and workspace symbols).

Positions are 1-based for the model (as editors show them) and converted to the protocol's
0-based UTF-16 positions (``lsp_call.py``). The servers live in an ``LspManager`` in the
container, started on first use per language and reused for the whole session. Its arguments,
params and output are in ``lsp_models.py``.
"""

from __future__ import annotations

from typing import Any

from toolhub.backends.workspace import Workspace
from toolhub.core import Params, Tool, ToolContext, ToolError, ToolKind

from .lsp_call import LspCall
from .lsp_models import LspArgs, LspOutput, LspParams


class Lsp(Tool[LspArgs, LspOutput]):
    id = "lsp"
    kind = ToolKind.LSP
    params_model = LspParams
    description_template = (
        "Ask the language server about code. Operations: `goToDefinition`, `findReferences` and "
        "`hover` need `${{ params.lsp.file_path }}`, `${{ params.lsp.line }}` and "
        "`${{ params.lsp.character }}` (1-based, as editors show them); `documentSymbol` lists "
        "the symbols of `${{ params.lsp.file_path }}`; `workspaceSymbol` finds symbols whose "
        "name contains `${{ params.lsp.query }}` across the workspace."
    )

    async def run(self, ctx: ToolContext, args: LspArgs) -> LspOutput:
        params = ctx.container.get_or_default(Params[LspParams])
        workspace = ctx.container.require(Workspace)
        session = LspCall(ctx, workspace, params)
        if args.operation == "workspaceSymbol":
            if args.query is None:
                raise ToolError.invalid_arguments(
                    f"workspaceSymbol needs `{ctx.param_name('query')}`"
                )
            return await session.workspace_symbols(args.query, args.file_path)
        if not args.file_path:
            raise ToolError.invalid_arguments(
                f"{args.operation} needs `{ctx.param_name('file_path')}`"
            )
        path, language = session.source(args.file_path)
        if args.operation == "documentSymbol":
            items = await session.document_symbols(path, language)
            return session.output("documentSymbol", workspace.display(path), items)
        if args.line is None or args.character is None:
            raise ToolError.invalid_arguments(
                f"{args.operation} needs `{ctx.param_name('line')}` and "
                f"`{ctx.param_name('character')}`"
            )
        return await session.positional(args.operation, path, language, args.line, args.character)


TOOLS: list[type[Tool[Any, Any]]] = [Lsp]
