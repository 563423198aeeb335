"""MCP servers from the command line (``--mcp NAME=COMMAND ARGS...``, ``--mcp NAME=URL``) and from the
configuration file other MCP clients use (Claude Desktop's ``{"mcpServers": {...}}``, JSON or TOML)::

    {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/data"],
                  "env": {"DEBUG": "1"}},
        "docs":  {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer ..."}},
        "old":   {"url": "https://example.com/sse", "type": "sse"}}}

A URL is streamable HTTP unless ``"type": "sse"`` says otherwise (on the command line: a URL whose
path ends in ``/sse``). ``"timeout"`` (seconds) bounds each tool call of that server.
"""

from __future__ import annotations

import json
import shlex
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentcore.tools import DEFAULT_TOOL_TIMEOUT_SECONDS

from ._servers import MCPServerHTTP, MCPServerSpec, MCPServerSSE, MCPServerStdio

__all__ = ["MCPConfigError", "load_mcp_config", "parse_mcp_option"]


class MCPConfigError(ValueError):
    """An ``--mcp`` value or an MCP configuration file that cannot be understood (says where)."""


def _is_url(text: str) -> bool:
    return text.startswith(("http://", "https://"))


def parse_mcp_option(value: str) -> MCPServerSpec:
    """``NAME=COMMAND ARGS...`` (a stdio server) or ``NAME=URL`` (HTTP; SSE when the path ends in /sse)."""
    name, sep, target = value.partition("=")
    if not sep or not name.strip() or not target.strip():
        raise MCPConfigError(f"--mcp {value!r}: expected NAME=COMMAND [ARGS...] or NAME=URL")
    target = target.strip()
    try:
        if _is_url(target):
            if target.rstrip("/").endswith("/sse"):
                return MCPServerSSE(name.strip(), target)
            return MCPServerHTTP(name.strip(), target)
        command, *args = shlex.split(target)
        return MCPServerStdio(name.strip(), command, args)
    except ValueError as exc:
        raise MCPConfigError(f"--mcp {value!r}: {exc}") from None


def load_mcp_config(path: str | Path) -> list[MCPServerSpec]:
    """The servers of a JSON or TOML file holding ``mcpServers`` (TOML when it ends in ``.toml``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise MCPConfigError(f"{path}: {exc.strerror or exc}") from None
    try:
        document = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise MCPConfigError(
            f"{path}: not valid {'TOML' if path.suffix == '.toml' else 'JSON'}: {exc}"
        ) from None
    servers = document.get("mcpServers") if isinstance(document, dict) else None
    if not isinstance(servers, dict):
        raise MCPConfigError(f'{path}: expected an object with "mcpServers": {{NAME: {{...}}}}')
    return [_server(path, name, entry) for name, entry in servers.items()]


def _server(path: Path, name: str, entry: Any) -> MCPServerSpec:
    where = f"{path}: mcpServers.{name}"
    if not isinstance(entry, dict):
        raise MCPConfigError(f"{where}: expected an object")
    timeout = entry.get("timeout", DEFAULT_TOOL_TIMEOUT_SECONDS)
    if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
        raise MCPConfigError(f"{where}.timeout: expected a positive number of seconds")
    approval = entry.get("require_approval", entry.get("requireApproval", False))
    if not isinstance(approval, bool) and not (
        isinstance(approval, list) and all(isinstance(name, str) for name in approval)
    ):
        raise MCPConfigError(f"{where}.require_approval: expected true, false or a list of tool names")
    approval = approval if isinstance(approval, bool) else tuple(approval)
    try:
        if "command" in entry:
            command = _text(where, entry, "command")
            args = entry.get("args", [])
            if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
                raise MCPConfigError(f"{where}.args: expected a list of strings")
            return MCPServerStdio(
                name, command, args, env=_strings(where, entry, "env"), cwd=entry.get("cwd"),
                timeout_seconds=float(timeout), require_approval=approval,
            )  # fmt: skip
        if "url" in entry:
            url = _text(where, entry, "url")
            headers = _strings(where, entry, "headers")
            kind = entry.get("type", entry.get("transport", "http"))
            if kind == "sse":
                return MCPServerSSE(
                    name, url, headers, timeout_seconds=float(timeout), require_approval=approval
                )
            if kind in ("http", "streamable-http", "streamable_http", "streamableHttp"):
                return MCPServerHTTP(
                    name, url, headers, timeout_seconds=float(timeout), require_approval=approval
                )
            raise MCPConfigError(f'{where}.type: {kind!r} is not "http" or "sse"')
    except ValueError as exc:
        if isinstance(exc, MCPConfigError):
            raise
        raise MCPConfigError(f"{where}: {exc}") from None
    raise MCPConfigError(f'{where}: expected "command" (a stdio server) or "url" (an HTTP server)')


def _text(where: str, entry: Mapping[str, Any], key: str) -> str:
    value = entry[key]
    if not isinstance(value, str) or not value:
        raise MCPConfigError(f"{where}.{key}: expected a non-empty string")
    return value


def _strings(where: str, entry: Mapping[str, Any], key: str) -> dict[str, str] | None:
    value = entry.get(key)
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise MCPConfigError(f"{where}.{key}: expected an object of strings")
    return {str(k): v for k, v in value.items()}
