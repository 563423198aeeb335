"""Tools from Model Context Protocol servers, for durable conversations (``pip install agentcore[mcp]``).

    from agentcore.mcp import MCPServerStdio, MCPServerHTTP

    worker = create_worker(client, mcp_servers=[
        MCPServerStdio("files", "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/data"]),
        MCPServerHTTP("docs", "https://example.com/mcp", {"Authorization": "Bearer ..."}),
    ])
    agent = await agents.start(model=model, tools=["mcp:files", "mcp:docs/search"])

The worker owns the connections: a stdio server is started once, restarted when it dies, and stopped
with the worker; an HTTP server gets one session, opened again when it breaks. Each tool call is a
``tools.execute`` activity like any tool's (see ``agentcore.mcp._toolset`` for names and retry safety).
"""

from __future__ import annotations

from ._config import MCPConfigError, load_mcp_config, parse_mcp_option
from ._servers import MCPServerHTTP, MCPServerSpec, MCPServerSSE, MCPServerStdio
from ._toolset import MCP_PREFIX, MCPToolset, is_retry_safe, names_given_twice

__all__ = [
    "MCP_PREFIX",
    "MCPConfigError",
    "MCPServerHTTP",
    "MCPServerSSE",
    "MCPServerSpec",
    "MCPServerStdio",
    "MCPToolset",
    "is_retry_safe",
    "load_mcp_config",
    "names_given_twice",
    "parse_mcp_option",
]
