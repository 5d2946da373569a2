"""toolhub as an MCP server (``toolhub mcp``): a session's tools over stdio or streamable HTTP,
with tasks, elicitation, progress and tool-list changes. The other direction, toolhub calling
external MCP servers' tools, is ``toolhub/sources``."""
