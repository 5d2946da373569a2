"""Client names of MCP tools: ``server__tool``, exactly one ``__`` boundary, [A-Za-z0-9_-], at
most 64 characters, whatever characters the server itself uses."""

from __future__ import annotations

import re

from toolhub.toolset.registry import EXTERNAL_SEPARATOR, NAME_PATTERN, valid_external_name

MAX_NAME = 64


def valid_server_name(server: str) -> bool:
    return valid_external_name(f"{server}{EXTERNAL_SEPARATOR}x")


def client_name(server: str, tool: str) -> str | None:
    """``server__tool`` for an MCP tool name, or None when no valid name can be made."""
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", tool)
    cleaned = re.sub(r"_{2,}", "_", cleaned).strip("_")
    name = f"{server}{EXTERNAL_SEPARATOR}{cleaned}"[:MAX_NAME].rstrip("_")
    if NAME_PATTERN.match(name) and valid_external_name(name):
        return name
    return None
