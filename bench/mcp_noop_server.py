"""The bench's no-op tool served by an MCP server over stdio (``python -m bench.mcp_noop_server``), so
an MCP tool turn can be measured against the same turn with a local ``AgentTool``."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("bench")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def noop(i: int = 0) -> str:
    """Do nothing."""
    return "ok"


if __name__ == "__main__":
    server.run()
