"""External tool sources: MCP servers (toolhub as an MCP client), remote toolhub gateways
(config ``hubs:``), and the runtime merge of every external tool into a tool set.

``attach.py`` connects a config's sources; ``merge.py`` decides which of their tools show;
``mcp_*.py`` are the MCP client; ``hub.py`` and ``gateway_api.py`` reach remote gateways.
The MCP server (toolhub serving its tools over MCP) is ``toolhub/mcp``."""
