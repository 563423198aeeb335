"""The MCP servers of one worker as tools in its ``ToolRegistry``.

Each server's tools become ``AgentTool``s whose ``execute`` sends ``tools/call``, so an MCP call runs
the same pipeline and the same ``tools.execute`` activity as a local tool: arguments checked by the
same validator, a timeout, heartbeats, abort by cancellation, retries only where safe. A conversation
names a server's tools as the group ``mcp:SERVER`` or one tool as ``mcp:SERVER/TOOL``; the workflow
records the specs ``tools.describe`` returned, so replaying it needs no server.

Names: the model sees a tool's own name, made a valid tool name (``[A-Za-z_][A-Za-z0-9_]*``); when
two servers (or a server and a local tool) offer the same name, each server's copy is called
``SERVER_TOOL`` instead. Retry safety comes from the tool's annotations: ``readOnlyHint`` or
``idempotentHint`` makes it retry-safe; any other tool runs at most once, and a call cut short by a
crash is recorded as "outcome unknown".
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

import mcp_types

from agentcore.runtime import AbortSignal
from agentcore.tools import AgentTool, AgentToolResult, ToolRegistry, ToolUpdateCallback

from ._connection import MCPConnection
from ._results import to_agent_tool_result
from ._servers import MCPServerSpec

__all__ = ["MCP_PREFIX", "MCPToolset", "is_retry_safe", "names_given_twice"]

log = logging.getLogger("agentcore.mcp")

MCP_PREFIX = "mcp:"
# How long a worker's start waits for its MCP servers to list their tools before serving anyway
# (a server still down is retried in the background and its tools appear once it is up).
STARTUP_WAIT_SECONDS = 30.0
_NOT_A_NAME_CHAR = re.compile(r"[^A-Za-z0-9_]")


class MCPToolset:
    """The ``ToolSource`` for a worker's MCP servers (``create_worker(mcp_servers=...)`` makes one)."""

    def __init__(self, servers: Sequence[MCPServerSpec], registry: ToolRegistry) -> None:
        twice = names_given_twice(servers)
        if twice:
            raise ValueError(f"MCP server name(s) given twice: {', '.join(twice)}")
        self.registry = registry
        self.connections = {server.name: MCPConnection(server, self._refresh) for server in servers}
        self._local_names = set(registry.names())
        self._registered: list[AgentTool] = []
        registry.add_source(self)

    async def start(self, wait_seconds: float = STARTUP_WAIT_SECONDS) -> None:
        """Start every server and wait (at most ``wait_seconds``) for their first listing."""
        for connection in self.connections.values():
            connection.start()
        await asyncio.gather(*(c.wait_tried(wait_seconds) for c in self.connections.values()))

    async def stop(self) -> None:
        await asyncio.gather(*(connection.stop() for connection in self.connections.values()))

    async def prepare(self, names: list[str]) -> None:
        """Wait for the servers ``names`` refer to (or all, for a name not known yet)."""
        wanted: set[str] = set()
        for name in names:
            if name.startswith(MCP_PREFIX):
                wanted.add(name[len(MCP_PREFIX) :].split("/", 1)[0])
            elif self.registry.get(name) is None:
                wanted.update(self.connections)
        connections = [self.connections[name] for name in wanted if name in self.connections]
        for connection in connections:
            connection.start()
        await asyncio.gather(*(connection.wait_tried(STARTUP_WAIT_SECONDS) for connection in connections))

    def _refresh(self) -> None:
        """Rebuild every server's tools (a clash depends on all of them) and hand them to the registry."""
        listed = [(conn, tool) for conn in self.connections.values() for tool in conn.tools]
        counts = Counter(_as_tool_name(tool.name) for _, tool in listed)
        groups: dict[str, list[AgentTool]] = {MCP_PREFIX + name: [] for name in self.connections}
        taken = set(self._local_names)
        for conn, tool in listed:
            plain = _as_tool_name(tool.name)
            clash = counts[plain] > 1 or plain in self._local_names
            name = _as_tool_name(f"{conn.name}_{tool.name}") if clash else plain
            if name in taken:
                log.warning(
                    "MCP server %r: tool %r left out, its name %r is taken", conn.name, tool.name, name
                )
                continue
            taken.add(name)
            agent_tool = _agent_tool(conn, tool, name)
            groups[MCP_PREFIX + conn.name].append(agent_tool)
            groups[f"{MCP_PREFIX}{conn.name}/{tool.name}"] = [agent_tool]
        replacing = self._registered
        self._registered = [tool for key, tools in groups.items() if "/" not in key for tool in tools]
        self.registry.set_groups(groups, replacing=replacing)


def names_given_twice(servers: Sequence[MCPServerSpec]) -> list[str]:
    names = Counter(server.name for server in servers)
    return sorted(name for name, count in names.items() if count > 1)


def _as_tool_name(name: str) -> str:
    name = _NOT_A_NAME_CHAR.sub("_", name)
    return name if name and not name[0].isdigit() else f"_{name}"


def is_retry_safe(annotations: mcp_types.ToolAnnotations | None) -> bool:
    if annotations is None:
        return False
    return bool(annotations.read_only_hint or annotations.idempotent_hint)


def _agent_tool(connection: MCPConnection, tool: mcp_types.Tool, name: str) -> AgentTool:
    server = connection.server
    title = tool.title or (tool.annotations.title if tool.annotations else None)

    async def execute(
        tool_call_id: str, arguments: Any, signal: AbortSignal, on_update: ToolUpdateCallback
    ) -> AgentToolResult:
        def progress(value: float, total: float | None, message: str | None) -> None:
            text = message or (f"{value:g}/{total:g}" if total else f"{value:g}")
            on_update(AgentToolResult.text(text, details={"progress": value, "total": total}))

        result = await connection.call_tool(tool.name, dict(arguments or {}), progress)
        return to_agent_tool_result(result, server.name, tool.name)

    return AgentTool(
        name=name,
        label=title or tool.name,
        description=tool.description or f'Tool "{tool.name}" of the MCP server "{server.name}".',
        parameters=dict(tool.input_schema),
        execute=execute,
        timeout_seconds=server.timeout_seconds,
        retry_safe=is_retry_safe(tool.annotations),
        requires_approval=needs_approval(server.require_approval, tool.name, name),
    )


def needs_approval(require_approval: bool | Sequence[str], *names: str) -> bool:
    """A server's ``require_approval`` for one of its tools (named as the server names it, or as
    the conversation sees it)."""
    if isinstance(require_approval, bool):
        return require_approval
    return any(name in require_approval for name in names)
