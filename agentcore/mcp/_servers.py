"""The MCP servers a worker can be given: how to reach each one (stdio, streamable HTTP, SSE).

These are plain settings; the connection that a worker keeps to each server lives in
``agentcore.mcp._connection``. ``env`` and ``headers`` often hold tokens: they are left out of
``repr`` and never reach a workflow (only the tools' specs do). ``where()`` names a server in logs
and errors without what may be secret: a command without its arguments, a URL without its query.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx2
from mcp import StdioServerParameters, stdio_client
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client

from agentcore.tools import DEFAULT_TOOL_TIMEOUT_SECONDS

__all__ = ["MCPServerHTTP", "MCPServerSSE", "MCPServerStdio", "MCPServerSpec"]

# A server's name is how a conversation refers to it (``mcp:NAME``), so it must survive in that
# reference: no whitespace, no ``/`` (it separates the tool) and no ``:``.
SERVER_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
# The MCP transports' own advice: a server may hold a response stream open for minutes.
_HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


def _check_name(name: str) -> None:
    if not SERVER_NAME_RE.fullmatch(name):
        raise ValueError(f"MCP server name {name!r} must match [A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class MCPServerStdio:
    """A server the worker runs as a child process, speaking MCP on its stdin/stdout.

    ``MCPServerStdio("files", "npx", ["-y", "@modelcontextprotocol/server-filesystem", "/data"])``.
    ``timeout_seconds`` bounds each of its tool calls. ``require_approval``: True makes a person
    approve every call of its tools, a list of tool names only theirs (off by default: MCP's
    ``destructiveHint`` defaults to true, so keying on it would gate every unannotated tool)."""

    name: str
    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] | None = field(default=None, repr=False)
    cwd: str | None = None
    timeout_seconds: float = DEFAULT_TOOL_TIMEOUT_SECONDS
    require_approval: bool | Sequence[str] = False

    def __post_init__(self) -> None:
        _check_name(self.name)

    def transport(self) -> AbstractAsyncContextManager[Any]:
        params = StdioServerParameters(
            command=self.command, args=list(self.args), env=dict(self.env or {}), cwd=self.cwd
        )
        return stdio_client(params)

    def where(self) -> str:
        return f"{self.command} ..." if self.args else self.command


@dataclass(frozen=True)
class _MCPServerURL:
    name: str
    url: str
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    timeout_seconds: float = DEFAULT_TOOL_TIMEOUT_SECONDS
    require_approval: bool | Sequence[str] = False  # as MCPServerStdio's

    def __post_init__(self) -> None:
        _check_name(self.name)

    def where(self) -> str:
        return _without_secrets(self.url)


@dataclass(frozen=True)
class MCPServerHTTP(_MCPServerURL):
    """A server reached over streamable HTTP: ``MCPServerHTTP("docs", "https://example.com/mcp")``."""

    def transport(self) -> AbstractAsyncContextManager[Any]:
        client = httpx2.AsyncClient(headers=dict(self.headers or {}), timeout=_HTTP_TIMEOUT)
        return streamable_http_client(self.url, http_client=client)


@dataclass(frozen=True)
class MCPServerSSE(_MCPServerURL):
    """A server that only speaks the older HTTP+SSE transport (``.../sse``)."""

    def transport(self) -> AbstractAsyncContextManager[Any]:
        return sse_client(self.url, headers=dict(self.headers or {}))


def _without_secrets(url: str) -> str:
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


MCPServerSpec = MCPServerStdio | MCPServerHTTP | MCPServerSSE
